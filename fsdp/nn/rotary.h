// File: fsdp/nn/rotary.h
//
// Rotary position embeddings in Hugging Face's rotate-half convention (the
// one LlamaForCausalLM's weights are trained with): within each head of hs
// channels, channel i < hs/2 is paired with channel i + hs/2, and the pair at
// position t is rotated by the angle t * inv_freq[i],
// inv_freq[i] = theta^(-2i / hs):
//   out[i]        = x[i] cos - x[i + hs/2] sin
//   out[i + hs/2] = x[i + hs/2] cos + x[i] sin
// The backward is the inverse rotation (the transpose).
//
// The cos and sin values live in a table, RotaryTableFloats(T, hs) floats
// ([cos | sin], each T x hs/2), filled once per model: inv_freq and the angle
// t * inv_freq are fp32 products as Hugging Face's forms them, cos and sin
// are taken of that fp32 angle.
#ifndef FSDP_NN_ROTARY_H_
#define FSDP_NN_ROTARY_H_

#include <cstdint>

namespace fsdp {

inline int64_t RotaryTableFloats(int seq_len, int head_size) {
  return int64_t{seq_len} * head_size;  // T x hs/2 cos, then as many sin
}

// `head_size` must be even (ValidateLlamaConfig checks it).
void FillRotaryTable(float* table, int seq_len, int head_size, float theta);

// `heads` consecutive heads of one token row at position `position`,
// rotated from `src` into `dst` (fp32, or bf16 bits rounded as they are
// written; dst must not overlap src), and the inverse rotation in place (the
// backward's, on a gradient). `seq_len` is the table's.
void RotateHeadsInto(float* dst, const float* src, int heads, int head_size, int position,
                     const float* table, int seq_len);
void RotateHeadsInto(uint16_t* dst, const float* src, int heads, int head_size, int position,
                     const float* table, int seq_len);
void RotateHeadsInverse(float* row, int heads, int head_size, int position, const float* table,
                        int seq_len);

}  // namespace fsdp

#endif  // FSDP_NN_ROTARY_H_
