// File: fsdp/optim/adamw.cc
#include "fsdp/optim/adamw.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "comm/status_macros.h"

namespace fsdp {

absl::Status ValidateAdamWOptions(const AdamWOptions& o) {
  if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f) || !(o.beta2 >= 0.0f && o.beta2 < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW betas must lie in [0, 1), got ", o.beta1, " and ", o.beta2));
  }
  if (!(o.eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("AdamW eps must be positive, got ", o.eps));
  }
  if (!(o.weight_decay >= 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW weight_decay must be non-negative, got ", o.weight_decay));
  }
  return absl::OkStatus();
}

void AdamWUpdate(const AdamWOptions& o, float lr, int64_t step, absl::Span<float> params,
                 absl::Span<const float> grads, absl::Span<float> m, absl::Span<float> v) {
  // The bias corrections depend on the step only, so every slice computes the
  // same two numbers: this is what makes sharded updates bit-identical.
  const float correction1 = 1.0f - static_cast<float>(std::pow(double{o.beta1}, double(step)));
  const float correction2 = 1.0f - static_cast<float>(std::pow(double{o.beta2}, double(step)));
  const int64_t n = static_cast<int64_t>(params.size());
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i];
    const float mi = o.beta1 * m[i] + (1.0f - o.beta1) * g;
    const float vi = o.beta2 * v[i] + (1.0f - o.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = mi / correction1;
    const float v_hat = vi / correction2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + o.eps) + o.weight_decay * params[i]);
  }
}

absl::StatusOr<AdamW> AdamW::Create(const AdamWOptions& options, int64_t numel,
                                    MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateAdamWOptions(options));
  if (tracker == nullptr) return absl::InvalidArgumentError("AdamW needs a MemoryTracker");
  FSDP_ASSIGN_OR_RETURN(FloatBuffer m, tracker->Allocate<float>(MemoryCategory::kOptimizerState,
                                                                numel, "adamw first moment"));
  FSDP_ASSIGN_OR_RETURN(FloatBuffer v, tracker->Allocate<float>(MemoryCategory::kOptimizerState,
                                                                numel, "adamw second moment"));
  return AdamW(options, std::move(m), std::move(v));
}

absl::Status AdamW::Step(float lr, absl::Span<float> params, absl::Span<const float> grads) {
  if (static_cast<int64_t>(params.size()) != numel() ||
      static_cast<int64_t>(grads.size()) != numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdamW was created for ", numel(), " parameters but got ", params.size(),
        " parameters and ", grads.size(), " gradients"));
  }
  ++step_;
  AdamWUpdate(options_, lr, step_, params, grads, m_.span(), v_.span());
  return absl::OkStatus();
}

}  // namespace fsdp
