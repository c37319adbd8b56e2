// File: fsdp/plan/plan_fingerprint.h
//
// A 64-bit fingerprint of a ShardPlan that is stable across processes and
// runs: FNV-1a over the plan's deterministic protobuf serialization with the
// `fingerprint` field itself zeroed. Ranks all-gather fingerprints at start-up
// and compare whole plans (plan_compare.h) only on a mismatch.
//
// Not absl::Hash: that one is salted per process on purpose.
#ifndef FSDP_PLAN_PLAN_FINGERPRINT_H_
#define FSDP_PLAN_PLAN_FINGERPRINT_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t Fnv1a64(absl::string_view bytes);

// Fnv1a64 of the deterministic serialization of `plan` with fingerprint = 0.
// Ignores plan.fingerprint(), so it can check a received plan's claim.
uint64_t ComputePlanFingerprint(const proto::ShardPlan& plan);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_PLAN_FINGERPRINT_H_
