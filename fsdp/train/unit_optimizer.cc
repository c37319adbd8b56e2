// File: fsdp/train/unit_optimizer.cc
#include "fsdp/train/unit_optimizer.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/bf16_convert.h"
#include "fsdp/train/dtype_kernels.h"

namespace fsdp {

absl::Status UnitOptimizer::Step(int unit, absl::Span<float> master, ConstDtypeSpan grads,
                                 float grad_scale, DtypeSpan params, float lr, int step) {
  if (params.size() != static_cast<int64_t>(master.size())) {
    return absl::InvalidArgumentError(absl::StrCat("unit ", unit, ": ", master.size(),
                                                   " master values but ", params.size(),
                                                   " parameters to refresh"));
  }
  switch (grads.dtype()) {
    case comm::Dtype::kFloat32:
      FSDP_RETURN_IF_ERROR(StepUnit(unit, master, grads.as<float>(), grad_scale, lr, step));
      StoreFloats(params, master);
      return absl::OkStatus();
    case comm::Dtype::kBFloat16:
      if (params.dtype() != comm::Dtype::kBFloat16) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unit ", unit, ": bf16 gradients with ", comm::DtypeName(params.dtype()),
            " parameters; 2-byte gradients come with bf16 parameters"));
      }
      return StepUnitBf16(unit, master, grads.as<uint16_t>(), grad_scale,
                          params.as<uint16_t>(), lr, step);
    case comm::Dtype::kInt64:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unit ", unit, ": ", comm::DtypeName(grads.dtype()),
      " gradients: the optimizer steps on fp32 or bf16 ones (exact int64 sums are converted "
      "first)"));
}

absl::Status UnitOptimizer::StepUnitBf16(int unit, absl::Span<float> params,
                                         absl::Span<const uint16_t> grads, float grad_scale,
                                         absl::Span<uint16_t> params_bf16, float lr, int step) {
  if (grads.size() != params.size() || params_bf16.size() != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unit ", unit, ": ", params.size(), " parameters but ", grads.size(),
        " bf16 gradients and ", params_bf16.size(), " bf16 parameters"));
  }
  std::vector<float> widened(grads.size());
  base::FromBf16(widened.data(), grads.data(), static_cast<int64_t>(grads.size()));
  FSDP_RETURN_IF_ERROR(StepUnit(unit, params, widened, grad_scale, lr, step));
  base::ToBf16(params_bf16.data(), params.data(), static_cast<int64_t>(params.size()));
  return absl::OkStatus();
}

}  // namespace fsdp
