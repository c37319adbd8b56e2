// File: fsdp/optim/sgd.h
//
// SGD with momentum (PyTorch's formulation, no dampening), elementwise over
// flat fp32 spans like AdamW:
//   g' = g + weight_decay p
//   buf = momentum buf + g'        (buf = g' on the first step)
//   p  = p - lr buf
// With momentum 0 no state is allocated.
#ifndef FSDP_OPTIM_SGD_H_
#define FSDP_OPTIM_SGD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"

namespace fsdp {

struct SgdOptions {
  float momentum = 0.9f;
  float weight_decay = 0.0f;
};

absl::Status ValidateSgdOptions(const SgdOptions& options);

// One update; `momentum_buffer` is empty when options.momentum == 0.
// `first_step` selects buf = g' instead of the momentum recurrence. Each
// gradient is multiplied by `grad_scale` (the clip scale) as it is read, as
// scaling the gradients in place first would.
void SgdUpdate(const SgdOptions& options, float lr, bool first_step, absl::Span<float> params,
               absl::Span<const float> grads, absl::Span<float> momentum_buffer,
               float grad_scale = 1.0f);

class Sgd {
 public:
  static absl::StatusOr<Sgd> Create(const SgdOptions& options, int64_t numel,
                                    MemoryTracker* tracker);
  absl::Status Step(float lr, absl::Span<float> params, absl::Span<const float> grads,
                    float grad_scale = 1.0f);
  // The bf16 layout's step in one pass, as AdamW::StepBf16 (fsdp/optim/adamw.h).
  absl::Status StepBf16(float lr, absl::Span<float> params, absl::Span<const uint16_t> grads,
                        float grad_scale, absl::Span<uint16_t> params_bf16);
  int64_t numel() const { return numel_; }
  int64_t step() const { return step_; }
  const SgdOptions& options() const { return options_; }
  // For checkpoints: the momentum buffer (empty when momentum == 0), and
  // the step count (the first step initializes the buffer).
  absl::Span<float> mutable_momentum_buffer() { return momentum_.span(); }
  void set_step(int64_t step) { step_ = step; }

 private:
  Sgd(const SgdOptions& options, int64_t numel, FloatBuffer buf)
      : options_(options), numel_(numel), momentum_(std::move(buf)) {}

  SgdOptions options_;
  int64_t numel_;
  FloatBuffer momentum_;
  int64_t step_ = 0;
};

}  // namespace fsdp

#endif  // FSDP_OPTIM_SGD_H_
