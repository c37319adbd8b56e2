// File: fsdp/nn/attention.h
//
// Causal multi-head self-attention core (the part between the qkv and the
// output projections). Input qkv is (B, T, 3C) holding [q | k | v] per token,
// as the fused qkv linear produces it; head h uses channels [h*hs, (h+1)*hs)
// of each, hs = C / heads. Per (b, h), with scale = 1/sqrt(hs):
//   probs = softmax(scale * q k^T, causal: key t2 > query t is excluded)   (T, T)
//   out   = probs v                                                         (T, hs)
// Both products run as fsdp::Matmul directly on the strided qkv layout (leading
// dimension 3C), so nothing is gathered or copied per head.
//
// Forward saves probs (B, heads, T, T) for backward. Backward ADDS into dqkv
// and needs a scratch of T*T floats (AttentionBackwardScratchFloats).
// The softmax and its backward are vectorized (fsdp/nn/simd.h). The overloads
// taking a KernelIsa run one variant of them (the CPU must support it); all
// variants give bit-identical results, the plain ones use BestKernelIsa().
#ifndef FSDP_NN_ATTENTION_H_
#define FSDP_NN_ATTENTION_H_

#include <cstdint>

#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void AttentionForward(float* out, float* probs, const float* qkv, int batch, int seq_len,
                      int channels, int heads);

int64_t AttentionBackwardScratchFloats(int seq_len);

void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* probs, int batch, int seq_len, int channels, int heads);

void AttentionForward(KernelIsa isa, float* out, float* probs, const float* qkv, int batch,
                      int seq_len, int channels, int heads);

void AttentionBackward(KernelIsa isa, float* dqkv, float* scratch, const float* dout,
                       const float* qkv, const float* probs, int batch, int seq_len, int channels,
                       int heads);

}  // namespace fsdp

#endif  // FSDP_NN_ATTENTION_H_
