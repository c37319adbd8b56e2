// File: fsdp/plan/precision_policy.cc
#include "fsdp/plan/precision_policy.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fsdp {

const char* ReductionKindName(ReductionKind kind) {
  switch (kind) {
    case ReductionKind::kSumInReduceDtype:
      return "sum";
    case ReductionKind::kExact:
      return "exact";
  }
  return "unknown";
}

absl::StatusOr<PrecisionPolicy> ParsePrecisionPolicy(absl::string_view precision,
                                                     absl::string_view reduce_dtype,
                                                     bool exact) {
  PrecisionPolicy policy;
  if (precision == "bf16") {
    policy.param_dtype = comm::Dtype::kBFloat16;
  } else if (precision != "fp32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--precision=", precision, " is not one of fp32, bf16"));
  }
  if (exact) {
    if (!reduce_dtype.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--reduce_dtype=", reduce_dtype, " with --exact: exact gradients are int64 "
          "fixed-point sums (docs/exact.md); drop --reduce_dtype or --exact"));
    }
    policy.reduce_dtype = comm::Dtype::kInt64;
    policy.reduction = ReductionKind::kExact;
  } else if (reduce_dtype.empty()) {
    policy.reduce_dtype = policy.param_dtype;
  } else if (reduce_dtype == "bf16") {
    policy.reduce_dtype = comm::Dtype::kBFloat16;
  } else if (reduce_dtype == "fp32") {
    policy.reduce_dtype = comm::Dtype::kFloat32;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reduce_dtype=", reduce_dtype,
        " is not one of bf16 (2-byte gradients, reduced in bf16), fp32 (4-byte gradients)"));
  }
  if (policy.reduce_dtype == comm::Dtype::kBFloat16 &&
      policy.param_dtype != comm::Dtype::kBFloat16) {
    return absl::InvalidArgumentError(
        "--reduce_dtype=bf16 needs --precision=bf16: 2-byte gradients come with the bf16 "
        "parameter layout");
  }
  FSDP_RETURN_IF_ERROR(ValidatePrecisionPolicy(policy));
  return policy;
}

absl::Status ValidatePrecisionPolicy(const PrecisionPolicy& policy) {
  if (policy.master_dtype != comm::Dtype::kFloat32 ||
      policy.optimizer_state_dtype != comm::Dtype::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "precision policy ", PrecisionPolicyToString(policy),
        ": the master parameters and the optimizer state must be fp32"));
  }
  if (policy.reduce_dtype == comm::Dtype::kBFloat16 &&
      policy.param_dtype != comm::Dtype::kBFloat16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "precision policy ", PrecisionPolicyToString(policy),
        ": bf16 gradients need bf16 parameters (the 2-byte gradients come with the bf16 "
        "parameter layout); reduce in fp32 or store the parameters in bf16"));
  }
  if ((policy.reduce_dtype == comm::Dtype::kInt64) !=
      (policy.reduction == ReductionKind::kExact)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "precision policy ", PrecisionPolicyToString(policy),
        ": int64 gradients are the exact reduction's (ReductionKind::kExact) and it keeps "
        "nothing else"));
  }
  return absl::OkStatus();
}

std::string PrecisionPolicyToString(const PrecisionPolicy& policy) {
  return absl::StrCat("params=", comm::DtypeName(policy.param_dtype),
                      " reduce=", comm::DtypeName(policy.reduce_dtype), " (",
                      ReductionKindName(policy.reduction),
                      ") master=", comm::DtypeName(policy.master_dtype),
                      " optimizer_state=", comm::DtypeName(policy.optimizer_state_dtype));
}

}  // namespace fsdp
