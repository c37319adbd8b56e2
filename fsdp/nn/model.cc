// File: fsdp/nn/model.cc
#include "fsdp/nn/model.h"

#include "absl/strings/str_cat.h"

namespace fsdp {

absl::Status CheckParamDtype(ConstDtypeSpan params, comm::Dtype dtype, absl::string_view what) {
  if (params.dtype() == dtype) return absl::OkStatus();
  // The model was configured for the other dtype: a precondition of the
  // call, as calling it out of order is.
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": got ", comm::DtypeName(params.dtype()), " values, this model takes ",
      comm::DtypeName(dtype), " (Model::param_dtype)"));
}

absl::Status CheckUnitGrads(const UnitGrads& grads, GradWrite write, absl::string_view what,
                            int num_params) {
  if (grads.values.dtype() == comm::Dtype::kFloat32) return absl::OkStatus();
  if (grads.values.dtype() == comm::Dtype::kInt64) {
    if (static_cast<int64_t>(grads.fp32_scratch.size()) != grads.values.size() ||
        static_cast<int>(grads.exact.exponents.size()) != num_params ||
        static_cast<int>(grads.exact.max_abs.size()) != num_params) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", grads.values.size(), " exact (int64) gradients with ",
          grads.fp32_scratch.size(), " fp32 scratch elements, ", grads.exact.exponents.size(),
          " exponents and ", grads.exact.max_abs.size(), " maxima; exact sums need a scratch of "
          "their size and one exponent and one maximum per parameter (", num_params, ")"));
    }
    return absl::OkStatus();
  }
  if (write != GradWrite::kOverwrite ||
      static_cast<int64_t>(grads.fp32_scratch.size()) != grads.values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", grads.values.size(), " ", comm::DtypeName(grads.values.dtype()),
        " gradients for ", grads.fp32_scratch.size(), " fp32 scratch elements under ",
        write == GradWrite::kOverwrite ? "kOverwrite" : "kAdd",
        "; 2-byte gradients are written whole (kOverwrite) through an fp32 scratch of their "
        "size"));
  }
  return absl::OkStatus();
}

}  // namespace fsdp
