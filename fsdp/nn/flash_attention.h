// File: fsdp/nn/flash_attention.h
//
// Causal multi-head self-attention computed in blocks, keeping O(B H T)
// instead of the B H T^2 probabilities (the FlashAttention idea, Dao et al.
// 2022, written for a CPU: blocks of queries and keys are small matrix
// products through fsdp::Matmul, the softmax runs with a running maximum and
// sum per query row).
//
// Same layout and result as AttentionForward (fsdp/nn/attention.h): qkv is
// (B, T, 3C) holding [q | k | v] per token, head h uses channels
// [h*hs, (h+1)*hs), out is (B, T, C). Per (b, h), scale = 1/sqrt(hs):
//   out = softmax(scale * q k^T, causal) v
//
// Forward saves only lse (B, heads, T): the log of each query row's softmax
// denominator (plus its maximum). Backward recomputes each block's
// probabilities from q, k and lse, and needs the forward's output (the
// attention output is saved anyway: it is the input of the output
// projection). Keys after a query block's last row are never touched, so the
// causal half of the products is skipped, not masked.
//
// Deterministic: every sum runs in a fixed order for a given shape and
// block size. Equal to the naive attention within fp32 rounding (the
// softmax's sums are grouped differently), not bit for bit. Heads run on the
// compute threads with a scratch per thread, as the standard attention's
// (fsdp/nn/attention.h): `scratch` (and `scratch_bf16`) hold `scratch_slots`
// consecutive copies of the sizes below.
#ifndef FSDP_NN_FLASH_ATTENTION_H_
#define FSDP_NN_FLASH_ATTENTION_H_

#include <cstdint>

#include "fsdp/nn/flash_attention_layout.h"  // kFlashBlock, FlashAttentionScratchFloats

namespace fsdp {

void FlashAttentionForward(float* out, float* lse, float* scratch, const float* qkv, int batch,
                           int seq_len, int channels, int heads, int scratch_slots = 1);

// ADDS into dqkv. `out` and `lse` are the forward's.
void FlashAttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                            const float* out, const float* lse, int batch, int seq_len,
                            int channels, int heads, int scratch_slots = 1);

// The bf16 compute mode: the same attention with its products on bf16
// operands (fp32 accumulation): qkv, and in the backward the output
// gradient and the forward's output (written in bf16: only a product reads
// it), are bf16; the softmax, lse and dqkv stay fp32. `scratch`
// holds FlashAttentionBf16ScratchFloats, scratch_bf16
// FlashAttentionBf16ScratchElements (fsdp/nn/flash_attention_layout.h): one
// block's probabilities, then its d scores, as a product's operand, and the
// head's operands and gradients as dense blocks.
void FlashAttentionForwardBf16(uint16_t* out, float* lse, float* scratch, uint16_t* scratch_bf16,
                               const uint16_t* qkv, int batch, int seq_len, int channels, int heads,
                               int scratch_slots = 1);
void FlashAttentionBackwardBf16(float* dqkv, float* scratch, uint16_t* scratch_bf16,
                                const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                                const float* lse, int batch, int seq_len, int channels, int heads,
                                int scratch_slots = 1);

}  // namespace fsdp

#endif  // FSDP_NN_FLASH_ATTENTION_H_
