// File: fsdp/optim/sgd.cc
#include "fsdp/optim/sgd.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/bf16_convert.h"

namespace fsdp {

absl::Status ValidateSgdOptions(const SgdOptions& o) {
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SGD momentum must lie in [0, 1), got ", o.momentum));
  }
  if (!(o.weight_decay >= 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SGD weight_decay must be non-negative, got ", o.weight_decay));
  }
  return absl::OkStatus();
}

void SgdUpdate(const SgdOptions& o, float lr, bool first_step, absl::Span<float> params,
               absl::Span<const float> grads, absl::Span<float> buf, float grad_scale) {
  const int64_t n = static_cast<int64_t>(params.size());
  const bool use_momentum = o.momentum != 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = grads[i] * grad_scale;  // exact when 1
    float g = scaled + o.weight_decay * params[i];
    if (use_momentum) {
      g = first_step ? g : o.momentum * buf[i] + g;
      buf[i] = g;
    }
    params[i] -= lr * g;
  }
}

absl::StatusOr<Sgd> Sgd::Create(const SgdOptions& options, int64_t numel,
                                MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateSgdOptions(options));
  if (tracker == nullptr) return absl::InvalidArgumentError("Sgd needs a MemoryTracker");
  if (numel < 0) return absl::InvalidArgumentError("Sgd numel must be non-negative");
  FloatBuffer buf;
  if (options.momentum != 0.0f) {
    FSDP_ASSIGN_OR_RETURN(buf, tracker->Allocate<float>(MemoryCategory::kOptimizerState, numel,
                                                        "sgd momentum"));
  }
  return Sgd(options, numel, std::move(buf));
}

absl::Status Sgd::Step(float lr, absl::Span<float> params, absl::Span<const float> grads,
                       float grad_scale) {
  if (static_cast<int64_t>(params.size()) != numel_ ||
      static_cast<int64_t>(grads.size()) != numel_) {
    return absl::InvalidArgumentError(absl::StrCat("Sgd was created for ", numel_,
                                                   " parameters but got ", params.size(),
                                                   " parameters and ", grads.size(),
                                                   " gradients"));
  }
  SgdUpdate(options_, lr, step_ == 0, params, grads, momentum_.span(), grad_scale);
  ++step_;
  return absl::OkStatus();
}

absl::Status Sgd::StepBf16(float lr, absl::Span<float> params, absl::Span<const uint16_t> grads,
                           float grad_scale, absl::Span<uint16_t> params_bf16) {
  if (static_cast<int64_t>(params.size()) != numel_ ||
      static_cast<int64_t>(grads.size()) != numel_ ||
      static_cast<int64_t>(params_bf16.size()) != numel_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Sgd was created for ", numel_, " parameters but got ", params.size(), " parameters, ",
        grads.size(), " bf16 gradients and ", params_bf16.size(), " bf16 parameters"));
  }
  const bool first_step = step_ == 0;
  const bool momentum = options_.momentum != 0.0f;
  base::ForEachWidenedBlock(grads.data(), numel_, [&](const float* g, int64_t begin, int64_t len) {
    const absl::Span<float> p = params.subspan(begin, len);
    SgdUpdate(options_, lr, first_step, p, absl::Span<const float>(g, len),
              momentum ? momentum_.span().subspan(begin, len) : absl::Span<float>(), grad_scale);
    base::ToBf16(params_bf16.data() + begin, p.data(), len);
  });
  ++step_;
  return absl::OkStatus();
}

}  // namespace fsdp
