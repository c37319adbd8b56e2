// File: fsdp/nn/attention_layout.h
//
// The scratch sizes of the standard attention's bf16 mode
// (fsdp/nn/attention.h), apart from its code so that the pure activation
// formulas (fsdp/nn/gpt_spec.h) can count them without linking the kernels.
#ifndef FSDP_NN_ATTENTION_LAYOUT_H_
#define FSDP_NN_ATTENTION_LAYOUT_H_

#include <cstdint>

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

}  // namespace fsdp

#endif  // FSDP_NN_ATTENTION_LAYOUT_H_
