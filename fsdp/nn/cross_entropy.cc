// File: fsdp/nn/cross_entropy.cc
#include "fsdp/nn/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "base/parallel_for.h"
#include "fsdp/nn/softmax_row.h"

namespace fsdp {
namespace {

// Per row: max, exp(l - max) with its 16-lane sum, scale by 1 / sum
// (fsdp/nn/softmax_row.h). The loss is summed over rows in double.
//
// One row: its probabilities in place, and its loss
// log(sum_v exp(l_v - max)) - (l_target - max), the target's logit read before
// the row is overwritten so a tiny probability never becomes log(0).
FSDP_SIMD_INLINE double CrossEntropyRow(float* row, int32_t target, int vocab) {
  const float max_logit = simd::RowMax(row, vocab);
  const double target_shifted = static_cast<double>(row[target]) - max_logit;
  const float sum = simd::ExpShiftedInPlace(row, vocab, max_logit);
  simd::ScaleRow(row, vocab, static_cast<float>(1.0 / sum));
  return std::log(static_cast<double>(sum)) - target_shifted;
}

FSDP_SIMD_INLINE float CrossEntropyForwardBody(float* logits_to_probs, const int32_t* targets,
                                               int n, int vocab) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    total += CrossEntropyRow(logits_to_probs + static_cast<long>(i) * vocab, targets[i], vocab);
  }
  return static_cast<float>(total / n);
}

// The forward's rows without the sum: terms[i] = row i's loss, the double
// the loop above adds, so adding them in row order gives its bits.
FSDP_SIMD_INLINE void CrossEntropyRowTermsBody(float* logits_to_probs, const int32_t* targets,
                                               int n, int vocab, double* terms) {
  for (int i = 0; i < n; ++i) {
    terms[i] = CrossEntropyRow(logits_to_probs + static_cast<long>(i) * vocab, targets[i], vocab);
  }
}

// `factor` is loss_scale / (all the rows of the call), for every piece.
FSDP_SIMD_INLINE void CrossEntropyBackwardBody(float* probs_to_dlogits, const int32_t* targets,
                                               int n, int vocab, float factor) {
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
// Rows first .. end - 1 of the whole buffer.
FSDP_SIMD_INLINE void CrossEntropyBackwardToBf16Body(float* probs_to_dlogits,
                                                     const int32_t* targets, int64_t first,
                                                     int64_t end, int vocab, float factor) {
  uint16_t* dlogits16 = reinterpret_cast<uint16_t*>(probs_to_dlogits);
  for (int64_t i = first; i < end; ++i) {
    float* row = probs_to_dlogits + static_cast<long>(i) * vocab;
    row[targets[i]] -= 1.0f;
    simd::ScaleRowInto(dlogits16 + static_cast<long>(i) * vocab, row, vocab, vocab, factor);
  }
}

FSDP_ISA_VARIANTS(float, CrossEntropyForward,
                  (float* logits_to_probs, const int32_t* targets, int n, int vocab),
                  (logits_to_probs, targets, n, vocab))
FSDP_ISA_VARIANTS(void, CrossEntropyRowTerms,
                  (float* logits_to_probs, const int32_t* targets, int n, int vocab, double* terms),
                  (logits_to_probs, targets, n, vocab, terms))
FSDP_ISA_VARIANTS(void, CrossEntropyBackward,
                  (float* probs_to_dlogits, const int32_t* targets, int n, int vocab, float factor),
                  (probs_to_dlogits, targets, n, vocab, factor))
FSDP_ISA_VARIANTS(void, CrossEntropyBackwardToBf16,
                  (float* probs_to_dlogits, const int32_t* targets, int64_t first, int64_t end,
                   int vocab, float factor),
                  (probs_to_dlogits, targets, first, end, vocab, factor))

// Rows per piece on the compute threads (base/parallel_for.h), and rows whose
// losses the threaded forward holds at once (on the stack) before adding
// them in order.
constexpr int64_t kRowsPerPiece = 8;
constexpr int kTermRows = 1024;

}  // namespace

float CrossEntropyForward(KernelIsa isa, float* logits_to_probs, const int32_t* targets, int n,
                          int vocab) {
  if (base::ParallelThreads() == 1 || n < 2 * kRowsPerPiece) {
    FSDP_ISA_DISPATCH(isa, CrossEntropyForward, (logits_to_probs, targets, n, vocab));
  }
  // Rows on the threads, their losses added here in row order: the bits of
  // the one-thread loop.
  double terms[kTermRows];
  double total = 0.0;
  for (int first = 0; first < n; first += kTermRows) {
    const int rows = std::min(kTermRows, n - first);
    base::ParallelFor(rows, kRowsPerPiece, [&](int64_t b, int64_t e) {
      FSDP_ISA_DISPATCH(isa, CrossEntropyRowTerms,
                        (logits_to_probs + static_cast<long>(first + b) * vocab,
                         targets + first + b, static_cast<int>(e - b), vocab, terms + b));
    });
    for (int i = 0; i < rows; ++i) total += terms[i];
  }
  return static_cast<float>(total / n);
}

void CrossEntropyBackward(KernelIsa isa, float* probs_to_dlogits, const int32_t* targets, int n,
                          int vocab, float loss_scale) {
  // Rows are independent; the factor is over all n rows in every piece.
  const float factor = loss_scale / static_cast<float>(n);
  base::ParallelFor(n, kRowsPerPiece, [&](int64_t b, int64_t e) {
    FSDP_ISA_DISPATCH(
        isa, CrossEntropyBackward,
        (probs_to_dlogits + b * vocab, targets + b, static_cast<int>(e - b), vocab, factor));
  });
}

float CrossEntropyForward(float* logits_to_probs, const int32_t* targets, int n, int vocab) {
  return CrossEntropyForward(BestKernelIsa(), logits_to_probs, targets, n, vocab);
}

void CrossEntropyBackward(float* probs_to_dlogits, const int32_t* targets, int n, int vocab,
                          float loss_scale) {
  CrossEntropyBackward(BestKernelIsa(), probs_to_dlogits, targets, n, vocab, loss_scale);
}

// In waves of rows [1, 2), [2, 4), [4, 8), ...: row r's bf16 gradient lands in
// float rows r / 2 .. (r + 1) / 2, all of an earlier wave (consumed), and row
// 0 in its own first half (read before written). Rows within a wave are
// independent, so they run on the threads.
void CrossEntropyBackwardToBf16(KernelIsa isa, float* probs_to_dlogits, const int32_t* targets,
                                int n, int vocab, float loss_scale) {
  const float factor = loss_scale / static_cast<float>(n);
  for (int64_t first = 0; first < n;) {
    const int64_t end = std::min<int64_t>(n, first == 0 ? 1 : 2 * first);
    base::ParallelFor(end - first, kRowsPerPiece, [&](int64_t b, int64_t e) {
      FSDP_ISA_DISPATCH(isa, CrossEntropyBackwardToBf16,
                        (probs_to_dlogits, targets, first + b, first + e, vocab, factor));
    });
    first = end;
  }
}

void CrossEntropyBackwardToBf16(float* probs_to_dlogits, const int32_t* targets, int n,
                                int vocab, float loss_scale) {
  CrossEntropyBackwardToBf16(BestKernelIsa(), probs_to_dlogits, targets, n, vocab, loss_scale);
}

}  // namespace fsdp
