// File: fsdp/plan/plan_compare.h
//
// Says where two ranks' shard plans differ. The runtime all-gathers plan
// fingerprints at start-up; on a mismatch it all-gathers the serialized plans
// and calls ComparePlans on each peer's, so the error names the first field
// that differs instead of "fingerprint mismatch":
//
//   rank 0 and rank 2 hold different shard plans: unit 3 'block2' field
//   padded_numel: 1024 vs 1028 (check that every rank got the same model
//   config and sharding flags)
//
// Fields are walked in declaration order (header, then units in order, and
// within a unit its fields in order), so "first" is well defined.
#ifndef FSDP_PLAN_PLAN_COMPARE_H_
#define FSDP_PLAN_PLAN_COMPARE_H_

#include "absl/status/status.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

// OK if the plans are equal (fingerprint included). Otherwise
// InvalidArgument naming both ranks, the first differing unit (index and
// name) and field path, and both values. If only the fingerprints differ, the
// message says the ranks run different builds of the planner.
absl::Status ComparePlans(const proto::ShardPlan& mine, int my_rank,
                          const proto::ShardPlan& theirs, int their_rank);

// As above, when the caller does not know its own rank ("this rank and rank 2
// hold different shard plans: ...").
absl::Status ComparePlans(const proto::ShardPlan& mine, const proto::ShardPlan& theirs,
                          int their_rank);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_PLAN_COMPARE_H_
