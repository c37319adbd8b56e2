// File: fsdp/optim/grad_clip.h
//
// Global-norm gradient clipping in two halves so a sharded caller can sum
// across ranks in between:
//   double sq = SumOfSquares(my_grad_shard);          // per rank
//   ... all-reduce sq (sum) across ranks ...
//   float s = ClipScale(sq, max_norm);                 // same on every rank
//   ScaleInPlace(my_grad_shard, s);
// The scale is min(1, max_norm / (||g|| + 1e-6)), as torch.nn.utils.clip_grad_norm_.
#ifndef FSDP_OPTIM_GRAD_CLIP_H_
#define FSDP_OPTIM_GRAD_CLIP_H_

#include "absl/types/span.h"
#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

// Sum of g_i^2, accumulated in double: in 16 lanes (element i in lane i % 16)
// added up by one fixed tree, so the result depends on the values and the
// span length only (not on alignment or the CPU's instruction set).
double SumOfSquares(absl::Span<const float> grads);

// The same with one ISA variant (the CPU must support it); bit-identical.
double SumOfSquares(KernelIsa isa, absl::Span<const float> grads);

// The factor to multiply gradients by; 1 when the norm is within max_norm or
// when max_norm <= 0 (clipping disabled).
float ClipScale(double global_sq_norm, float max_norm);

void ScaleInPlace(absl::Span<float> values, float scale);
void ScaleInPlace(KernelIsa isa, absl::Span<float> values, float scale);

}  // namespace fsdp

#endif  // FSDP_OPTIM_GRAD_CLIP_H_
