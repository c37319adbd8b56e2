// File: fsdp/train/model_entry.cc
#include "fsdp/train/model_entry.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/train/dtype_kernels.h"

namespace fsdp {

absl::Status ForwardModelUnit(Model& model, int unit, ConstDtypeSpan params, const Batch& batch) {
  switch (params.dtype()) {
    case comm::Dtype::kFloat32:
      return model.ForwardUnit(unit, params.as<float>(), batch);
    case comm::Dtype::kBFloat16:
      return model.ForwardUnitBf16(unit, params.as<uint16_t>(), batch);
  }
  return absl::InvalidArgumentError("unknown parameter dtype");
}

absl::Status BackwardModelUnit(Model& model, int unit, ConstDtypeSpan params, DtypeSpan grads,
                               GradWrite write, absl::Span<float> fp32_scratch,
                               float loss_scale) {
  if (grads.dtype() == comm::Dtype::kFloat32) {
    if (params.dtype() == comm::Dtype::kFloat32) {
      return model.BackwardUnit(unit, params.as<float>(), grads.as<float>(), loss_scale, write);
    }
    return model.BackwardUnitBf16(unit, params.as<uint16_t>(), grads.as<float>(), loss_scale,
                                  write);
  }
  if (params.dtype() != comm::Dtype::kBFloat16 ||
      static_cast<int64_t>(fp32_scratch.size()) != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unit ", unit, ": ", comm::DtypeName(grads.dtype()), " gradients need bf16 parameters (got ",
        comm::DtypeName(params.dtype()), ") and an fp32 scratch of their ", grads.size(),
        " elements (got ", fp32_scratch.size(), ")"));
  }
  if (write == GradWrite::kOverwrite) {
    return model.BackwardUnitBf16ToBf16Grads(unit, params.as<uint16_t>(), fp32_scratch,
                                             grads.as<uint16_t>(), loss_scale);
  }
  FSDP_RETURN_IF_ERROR(model.BackwardUnitBf16(unit, params.as<uint16_t>(), fp32_scratch,
                                              loss_scale, GradWrite::kOverwrite));
  AccumulateFloats(grads, fp32_scratch);
  return absl::OkStatus();
}

}  // namespace fsdp
