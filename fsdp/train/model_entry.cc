// File: fsdp/train/model_entry.cc
#include "fsdp/train/model_entry.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/train/dtype_kernels.h"

namespace fsdp {

absl::Status BackwardModelUnit(Model& model, int unit, ConstDtypeSpan params, DtypeSpan grads,
                               GradWrite write, absl::Span<float> fp32_scratch,
                               float loss_scale, ExactGradSums exact) {
  if (grads.dtype() == comm::Dtype::kFloat32) {
    return model.BackwardUnit(unit, params, {grads}, loss_scale, write);
  }
  if (grads.dtype() == comm::Dtype::kInt64) {
    return model.BackwardUnit(unit, params, {grads, fp32_scratch, exact}, loss_scale, write);
  }
  if (params.dtype() != comm::Dtype::kBFloat16 ||
      static_cast<int64_t>(fp32_scratch.size()) != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unit ", unit, ": ", comm::DtypeName(grads.dtype()), " gradients need bf16 parameters (got ",
        comm::DtypeName(params.dtype()), ") and an fp32 scratch of their ", grads.size(),
        " elements (got ", fp32_scratch.size(), ")"));
  }
  if (write == GradWrite::kOverwrite) {
    return model.BackwardUnit(unit, params, {grads, fp32_scratch}, loss_scale, write);
  }
  FSDP_RETURN_IF_ERROR(
      model.BackwardUnit(unit, params, {fp32_scratch}, loss_scale, GradWrite::kOverwrite));
  AccumulateFloats(grads, fp32_scratch);
  return absl::OkStatus();
}

}  // namespace fsdp
