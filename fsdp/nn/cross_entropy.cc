// File: fsdp/nn/cross_entropy.cc
#include "fsdp/nn/cross_entropy.h"

#include <cmath>

#include "fsdp/nn/softmax_row.h"

namespace fsdp {
namespace {

// Per row: max, exp(l - max) with its 16-lane sum, scale by 1 / sum
// (fsdp/nn/softmax_row.h). The loss is summed over rows in double.
FSDP_SIMD_INLINE float CrossEntropyForwardBody(float* logits_to_probs, const int32_t* targets,
                                               int n, int vocab) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    float* row = logits_to_probs + static_cast<long>(i) * vocab;
    const float max_logit = simd::RowMax(row, vocab);
    // loss_i = log(sum_v exp(l_v - max)) - (l_target - max), read before the
    // row is overwritten so a tiny probability never becomes log(0).
    const double target_shifted = static_cast<double>(row[targets[i]]) - max_logit;
    const float sum = simd::ExpShiftedInPlace(row, vocab, max_logit);
    simd::ScaleRow(row, vocab, static_cast<float>(1.0 / sum));
    total += std::log(static_cast<double>(sum)) - target_shifted;
  }
  return static_cast<float>(total / n);
}

FSDP_SIMD_INLINE void CrossEntropyBackwardBody(float* probs_to_dlogits, const int32_t* targets,
                                               int n, int vocab, float loss_scale) {
  const float factor = loss_scale / static_cast<float>(n);
  for (int i = 0; i < n; ++i) {
    float* row = probs_to_dlogits + static_cast<long>(i) * vocab;
    row[targets[i]] -= 1.0f;
    simd::ScaleRow(row, vocab, factor);
  }
}

// Row r's bf16 gradient goes to bytes 2rV .. 2(r+1)V of the buffer: for
// r = 0 the row's own start (ScaleRowInto reads each 16 values before it
// writes over them), for r >= 1 within rows 0 .. r-1, all consumed
// (2(r+1)V <= 4rV).
FSDP_SIMD_INLINE void CrossEntropyBackwardToBf16Body(float* probs_to_dlogits,
                                                     const int32_t* targets, int n, int vocab,
                                                     float loss_scale) {
  const float factor = loss_scale / static_cast<float>(n);
  uint16_t* dlogits16 = reinterpret_cast<uint16_t*>(probs_to_dlogits);
  for (int i = 0; i < n; ++i) {
    float* row = probs_to_dlogits + static_cast<long>(i) * vocab;
    row[targets[i]] -= 1.0f;
    simd::ScaleRowInto(dlogits16 + static_cast<long>(i) * vocab, row, vocab, vocab, factor);
  }
}

FSDP_ISA_VARIANTS(float, CrossEntropyForward,
                  (float* logits_to_probs, const int32_t* targets, int n, int vocab),
                  (logits_to_probs, targets, n, vocab))
FSDP_ISA_VARIANTS(void, CrossEntropyBackward,
                  (float* probs_to_dlogits, const int32_t* targets, int n, int vocab,
                   float loss_scale),
                  (probs_to_dlogits, targets, n, vocab, loss_scale))
FSDP_ISA_VARIANTS(void, CrossEntropyBackwardToBf16,
                  (float* probs_to_dlogits, const int32_t* targets, int n, int vocab,
                   float loss_scale),
                  (probs_to_dlogits, targets, n, vocab, loss_scale))

}  // namespace

float CrossEntropyForward(KernelIsa isa, float* logits_to_probs, const int32_t* targets, int n,
                          int vocab) {
  FSDP_ISA_DISPATCH(isa, CrossEntropyForward, (logits_to_probs, targets, n, vocab));
}

void CrossEntropyBackward(KernelIsa isa, float* probs_to_dlogits, const int32_t* targets, int n,
                          int vocab, float loss_scale) {
  FSDP_ISA_DISPATCH(isa, CrossEntropyBackward, (probs_to_dlogits, targets, n, vocab, loss_scale));
}

float CrossEntropyForward(float* logits_to_probs, const int32_t* targets, int n, int vocab) {
  return CrossEntropyForward(BestKernelIsa(), logits_to_probs, targets, n, vocab);
}

void CrossEntropyBackward(float* probs_to_dlogits, const int32_t* targets, int n, int vocab,
                          float loss_scale) {
  CrossEntropyBackward(BestKernelIsa(), probs_to_dlogits, targets, n, vocab, loss_scale);
}

void CrossEntropyBackwardToBf16(KernelIsa isa, float* probs_to_dlogits, const int32_t* targets,
                                int n, int vocab, float loss_scale) {
  FSDP_ISA_DISPATCH(isa, CrossEntropyBackwardToBf16,
                    (probs_to_dlogits, targets, n, vocab, loss_scale));
}

void CrossEntropyBackwardToBf16(float* probs_to_dlogits, const int32_t* targets, int n,
                                int vocab, float loss_scale) {
  CrossEntropyBackwardToBf16(BestKernelIsa(), probs_to_dlogits, targets, n, vocab, loss_scale);
}

}  // namespace fsdp
