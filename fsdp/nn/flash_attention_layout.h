// File: fsdp/nn/flash_attention_layout.h
//
// The sizes of the blocked attention (fsdp/nn/flash_attention.h), apart from
// its code so that the pure activation formulas (fsdp/nn/gpt_spec.h) can
// count its scratch without linking the kernels.
#ifndef FSDP_NN_FLASH_ATTENTION_LAYOUT_H_
#define FSDP_NN_FLASH_ATTENTION_LAYOUT_H_

#include <cstdint>

namespace fsdp {

// Rows of queries and keys per block; T need not be a multiple.
inline constexpr int kFlashBlock = 128;

// Scratch floats the forward and the backward need (allocate once): the
// scores and their gradient of one block pair, one query block's unnormalized
// output, its running maximum and sum, and one value per query row.
inline int64_t FlashAttentionScratchFloats(int seq_len, int head_size) {
  return int64_t{2} * kFlashBlock * kFlashBlock + int64_t{kFlashBlock} * head_size +
         2 * kFlashBlock + seq_len;
}

// bf16 scratch of the bf16 compute mode: one block pair's probabilities
// (then d scores) as a product's operand, and one head's q, k, v and output
// gradient as dense T x hs blocks ([Note: contiguous bf16 heads] in
// fsdp/nn/attention.cc: oneDNN's bf16 kernels want dense operands).
inline int64_t FlashAttentionBf16ScratchElements(int seq_len, int head_size) {
  return int64_t{kFlashBlock} * kFlashBlock + 4 * int64_t{seq_len} * head_size;
}

// fp32 scratch of the bf16 compute mode: FlashAttentionScratchFloats and one
// head's dense dq, dk, dv (T x hs each), added into dqkv after the head.
inline int64_t FlashAttentionBf16ScratchFloats(int seq_len, int head_size) {
  return FlashAttentionScratchFloats(seq_len, head_size) + 3 * int64_t{seq_len} * head_size;
}

}  // namespace fsdp

#endif  // FSDP_NN_FLASH_ATTENTION_LAYOUT_H_
