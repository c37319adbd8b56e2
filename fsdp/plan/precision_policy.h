// File: fsdp/plan/precision_policy.h
//
// What a training run stores, moves and computes in: one value, chosen once
// from the --precision and --reduce_dtype flags, read by every layer below
// (the unit's buffers, its collectives, the optimizer) as data. The dtypes
// are comm::Dtype, the collectives' own element types.
//
//   FSDP_ASSIGN_OR_RETURN(PrecisionPolicy policy, ParsePrecisionPolicy("bf16", ""));
//   // policy.param_dtype == kBFloat16, policy.reduce_dtype == kBFloat16,
//   // policy.master_dtype == policy.optimizer_state_dtype == kFloat32
//
//   --precision  --reduce_dtype   params (stored, gathered,  gradients (stored,  master and
//                                 computed)                  reduced)            optimizer state
//   fp32         "" / fp32        fp32                       fp32                fp32 (the params)
//   bf16         "" / bf16        bf16                       bf16                fp32
//   bf16         fp32             bf16                       fp32                fp32
//
// How the gradients are combined across ranks is a value too (ReductionKind):
// today a sum in the reduce dtype (each addition in fp32, rounded per hop
// for bf16; comm/communicator.h), then a scale by 1 / world size.
#ifndef FSDP_PLAN_PRECISION_POLICY_H_
#define FSDP_PLAN_PRECISION_POLICY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/dtype.h"

namespace fsdp {

// How a unit's gradients are combined across ranks.
enum class ReductionKind {
  // Summed in PrecisionPolicy::reduce_dtype by the collectives, then scaled
  // by 1 / world size ([Note: why sum then scale] in docs/data-parallel.md).
  kSumInReduceDtype,
  // --exact (docs/exact.md): int64 fixed-point sums of per-sequence
  // contributions (reduce_dtype kInt64), added as integers across ranks and
  // converted to fp32 once, divided by the global token count: the same
  // bits for every world size and split of the batch.
  kExact,
};
const char* ReductionKindName(ReductionKind kind);  // "sum", "exact"

struct PrecisionPolicy {
  // The parameters the model reads: stored in this dtype, all-gathered in it,
  // and the operand dtype of the products (which accumulate in fp32).
  comm::Dtype param_dtype = comm::Dtype::kFloat32;
  // The gradients as kept between backward and optimizer step, and as
  // reduce-scattered.
  comm::Dtype reduce_dtype = comm::Dtype::kFloat32;
  ReductionKind reduction = ReductionKind::kSumInReduceDtype;
  // The values the optimizer updates and its state (moments). When the
  // parameters are stored in another dtype, the master is a copy of its own
  // and the parameters are its rounding, refreshed after every update.
  comm::Dtype master_dtype = comm::Dtype::kFloat32;
  comm::Dtype optimizer_state_dtype = comm::Dtype::kFloat32;

  // The optimizer updates a copy of its own, not the parameters in place.
  bool separate_master() const { return param_dtype != master_dtype; }

  bool operator==(const PrecisionPolicy& o) const {
    return param_dtype == o.param_dtype && reduce_dtype == o.reduce_dtype &&
           reduction == o.reduction && master_dtype == o.master_dtype &&
           optimizer_state_dtype == o.optimizer_state_dtype;
  }
  bool operator!=(const PrecisionPolicy& o) const { return !(*this == o); }
};

// The policy of --precision=`precision` (fp32 or bf16),
// --reduce_dtype=`reduce_dtype` ("" = the parameters' dtype, bf16 or fp32)
// and --exact (`exact`: ReductionKind::kExact, int64 gradients; no
// --reduce_dtype then). InvalidArgument naming the flag, its value and the
// choices for anything else, for --reduce_dtype=bf16 with --precision=fp32,
// and for --reduce_dtype with --exact.
absl::StatusOr<PrecisionPolicy> ParsePrecisionPolicy(absl::string_view precision,
                                                     absl::string_view reduce_dtype,
                                                     bool exact = false);

// OK for the combinations the trainer implements: an fp32 master and fp32
// optimizer state, bf16 gradients only with bf16 parameters (the 2-byte
// gradients come with the bf16 parameter layout), and int64 gradients
// exactly with ReductionKind::kExact. InvalidArgument saying what to change
// otherwise.
absl::Status ValidatePrecisionPolicy(const PrecisionPolicy& policy);

// "params=bf16 reduce=bf16 (sum) master=fp32 optimizer_state=fp32".
std::string PrecisionPolicyToString(const PrecisionPolicy& policy);

}  // namespace fsdp

#endif  // FSDP_PLAN_PRECISION_POLICY_H_
