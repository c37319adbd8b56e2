// File: fsdp/optim/adamw.h
//
// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay and bias
// correction. Elementwise over flat fp32 spans, so the same code updates a
// full copy or one rank's shard, and updating a vector in any slicing gives
// bit-identical results. With step t >= 1, for each element:
//   m = beta1 m + (1 - beta1) g
//   v = beta2 v + (1 - beta2) g^2
//   m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)
//   p = p - lr (m_hat / (sqrt(v_hat) + eps) + weight_decay p)
// Weight decay applies to every element of the span (as llm.c); a caller that
// wants none on biases gives them their own span and weight_decay 0.
//
//   FSDP_ASSIGN_OR_RETURN(AdamW adam, AdamW::Create(options, shard_numel, &tracker));
//   FSDP_RETURN_IF_ERROR(adam.Step(lr, shard_params, shard_grads));
#ifndef FSDP_OPTIM_ADAMW_H_
#define FSDP_OPTIM_ADAMW_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// InvalidArgument unless 0 <= beta < 1, eps > 0, weight_decay >= 0.
absl::Status ValidateAdamWOptions(const AdamWOptions& options);

// One AdamW update of params from grads with moments m and v (all the same
// length; checked by the caller). `step` is 1-based. Each gradient is first
// multiplied by `grad_scale` (the clip scale) as it is read: bit for bit
// what scaling the gradients in place before the update gives (x 1 is exact).
void AdamWUpdate(const AdamWOptions& options, float lr, int64_t step, absl::Span<float> params,
                 absl::Span<const float> grads, absl::Span<float> m, absl::Span<float> v,
                 float grad_scale = 1.0f);

// The same with one ISA variant of the vectorized loop (the CPU must support
// it). Every variant, and the plain overload (BestKernelIsa()), equals the
// scalar loop of the formulas above bit for bit (no FMA: fsdp/nn/simd.h).
void AdamWUpdate(KernelIsa isa, const AdamWOptions& options, float lr, int64_t step,
                 absl::Span<float> params, absl::Span<const float> grads, absl::Span<float> m,
                 absl::Span<float> v, float grad_scale = 1.0f);

// AdamW with its moments held in tracked buffers (kOptimizerState), sized for
// one shard of `numel` parameters.
class AdamW {
 public:
  static absl::StatusOr<AdamW> Create(const AdamWOptions& options, int64_t numel,
                                      MemoryTracker* tracker);

  // Advances the step count and updates params in place from grads times
  // grad_scale (as AdamWUpdate). InvalidArgument if a span's length differs
  // from numel().
  absl::Status Step(float lr, absl::Span<float> params, absl::Span<const float> grads,
                    float grad_scale = 1.0f);

  // The same step for the bf16 parameter layout, in one pass over memory:
  // the gradients are bf16 (widened exactly, then multiplied by grad_scale),
  // and each updated fp32 parameter's bf16 rounding is written to
  // params_bf16. Bit for bit what widening the whole gradient, Step() and
  // ToBf16(params) give, without the widened copy and the second read of
  // params (block by block in L1). InvalidArgument if a span's length
  // differs from numel().
  absl::Status StepBf16(float lr, absl::Span<float> params, absl::Span<const uint16_t> grads,
                        float grad_scale, absl::Span<uint16_t> params_bf16);

  int64_t numel() const { return m_.size(); }
  int64_t step() const { return step_; }
  const AdamWOptions& options() const { return options_; }
  absl::Span<const float> first_moment() const { return m_.span(); }
  absl::Span<const float> second_moment() const { return v_.span(); }
  // For checkpoint loading: the moments to fill, and the step count.
  absl::Span<float> mutable_first_moment() { return m_.span(); }
  absl::Span<float> mutable_second_moment() { return v_.span(); }
  void set_step(int64_t step) { step_ = step; }

 private:
  AdamW(const AdamWOptions& options, FloatBuffer m, FloatBuffer v)
      : options_(options), m_(std::move(m)), v_(std::move(v)) {}

  AdamWOptions options_;
  FloatBuffer m_;
  FloatBuffer v_;
  int64_t step_ = 0;
};

}  // namespace fsdp

#endif  // FSDP_OPTIM_ADAMW_H_
