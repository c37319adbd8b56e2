// File: fsdp/train/plan_agreement.h
//
// Start-up check that every rank holds the same shard plan. Each rank
// contributes its plan's fingerprint to one all-gather; if all agree, that is
// all. Otherwise the ranks all-gather their serialized plans and EVERY rank
// returns the same error: ComparePlans (fsdp/plan/plan_compare.h) between
// rank 0's plan and the lowest rank whose plan differs from it, naming the
// first unit and field that differ. No rank trains on a mismatch and none
// is left waiting: every rank takes part in the same collectives.
//
//   FSDP_RETURN_IF_ERROR(CheckPlansAgree(world, plan, absl::Seconds(60)));
#ifndef FSDP_TRAIN_PLAN_AGREEMENT_H_
#define FSDP_TRAIN_PLAN_AGREEMENT_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {

// OK if every rank of `world` holds a plan with this fingerprint;
// InvalidArgument (the plan comparison) on a mismatch; the collectives'
// errors (naming the ranks) if a peer does not take part within `timeout`.
absl::Status CheckPlansAgree(comm::Communicator& world, const proto::ShardPlan& plan,
                             absl::Duration timeout);

}  // namespace fsdp

#endif  // FSDP_TRAIN_PLAN_AGREEMENT_H_
