// File: fsdp/nn/attention_layout.h
//
// The scratch sizes of the standard attention's bf16 mode
// (fsdp/nn/attention.h), apart from its code so that the pure activation
// formulas (fsdp/nn/gpt_spec.h) can count them without linking the kernels.
#ifndef FSDP_NN_ATTENTION_LAYOUT_H_
#define FSDP_NN_ATTENTION_LAYOUT_H_

#include <algorithm>
#include <cstdint>

#include "fsdp/nn/flash_attention_layout.h"

namespace fsdp {

// bf16 elements: T x T for one head's column slabs of the probabilities,
// then its d scores (laid out as the probabilities), and its dense q, k, v
// and output gradient, T x hs each.
inline int64_t AttentionBf16ScratchElements(int seq_len, int head_size) {
  return int64_t{seq_len} * seq_len + 4 * int64_t{seq_len} * head_size;
}

// floats: a row block's scores (forward) or the head's d probabilities
// (backward, and after them the dk product's bf16 column slabs), within
// T x T, and one dense T x hs product.
inline int64_t AttentionBf16ScratchFloats(int seq_len, int head_size) {
  return int64_t{seq_len} * seq_len + int64_t{seq_len} * head_size;
}

// The attention scratch a model keeps, for the model and for the memory
// formulas alike: the per-head scratch of the standard or the flash
// attention once per thread that runs heads (`compute_threads` slots,
// [Note: heads on the compute threads] in fsdp/nn/heads_on_threads.h).
// fp32 keeps no bf16 scratch.
struct AttentionScratch {
  int slots = 1;
  int64_t floats = 0;         // slots x the per-slot floats
  int64_t bf16_elements = 0;  // slots x the per-slot bf16 elements
};

inline AttentionScratch AttentionScratchOf(bool flash, bool bf16, int seq_len, int head_size,
                                           int compute_threads) {
  AttentionScratch s;
  s.slots = std::max(1, compute_threads);
  int64_t floats = 0, bf16_elements = 0;
  if (flash) {
    floats = bf16 ? FlashAttentionBf16ScratchFloats(seq_len, head_size)
                  : FlashAttentionScratchFloats(seq_len, head_size);
    bf16_elements = bf16 ? FlashAttentionBf16ScratchElements(seq_len, head_size) : 0;
  } else {
    floats = bf16 ? AttentionBf16ScratchFloats(seq_len, head_size)
                  : int64_t{seq_len} * seq_len;  // AttentionBackwardScratchFloats
    bf16_elements = bf16 ? AttentionBf16ScratchElements(seq_len, head_size) : 0;
  }
  s.floats = s.slots * floats;
  s.bf16_elements = s.slots * bf16_elements;
  return s;
}

}  // namespace fsdp

#endif  // FSDP_NN_ATTENTION_LAYOUT_H_
