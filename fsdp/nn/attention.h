// File: fsdp/nn/attention.h
//
// Causal multi-head self-attention core (the part between the qkv and the
// output projections). Input qkv is (B, T, 3C) holding [q | k | v] per token,
// as the fused qkv linear produces it; head h uses channels [h*hs, (h+1)*hs)
// of each, hs = C / heads. Per (b, h), with scale = 1/sqrt(hs):
//   probs = softmax(scale * q k^T, causal: key t2 > query t is excluded)   (T, T)
//   out   = probs v                                                         (T, hs)
// In fp32 both products run as fsdp::Matmul directly on the strided qkv
// layout (leading dimension 3C), so nothing is gathered or copied per head;
// bf16 copies each head into dense blocks (see below).
//
// Forward saves probs (B, heads, T, T) for backward. Backward writes every
// element of dqkv (whatever it held: no zeroing pass before) and needs a
// scratch of T*T floats (AttentionBackwardScratchFloats). The fp32 products
// skip the masked upper triangle in blocks of query rows ([Note: causal row
// blocks] in the .cc).
// Heads run on the compute threads (base/parallel_for.h), each thread with
// its own scratch: a scratch holding `scratch_slots` consecutive copies of
// the sizes above lets up to that many threads work (with fewer slots than
// threads the heads run in order on the caller). The bits do not depend on
// either ([Note: heads on the compute threads] in the .cc).
// The softmax and its backward are vectorized (fsdp/nn/simd.h). The overloads
// taking a KernelIsa run one variant of them (the CPU must support it); all
// variants give bit-identical results, the plain ones use BestKernelIsa().
#ifndef FSDP_NN_ATTENTION_H_
#define FSDP_NN_ATTENTION_H_

#include <cstdint>

#include "fsdp/nn/attention_layout.h"
#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void AttentionForward(float* out, float* probs, const float* qkv, int batch, int seq_len,
                      int channels, int heads);

int64_t AttentionBackwardScratchFloats(int seq_len);

void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* probs, int batch, int seq_len, int channels, int heads,
                       int scratch_slots = 1);

void AttentionForward(KernelIsa isa, float* out, float* probs, const float* qkv, int batch,
                      int seq_len, int channels, int heads);

// The bf16 compute mode: the same attention with its four products on bf16
// operands (fp32 accumulation), qkv and the output gradient in bf16; the
// scores and the softmax are fp32, the probabilities it saves (B, heads, T, T)
// bf16, as the products read them ([Note: bf16 probabilities] in the .cc).
// Each head's operands are copied into dense blocks first ([Note: contiguous
// bf16 heads] in the .cc): `scratch_bf16` holds AttentionBf16ScratchElements
// (one head's column slabs of probabilities, then its d scores, and its q, k,
// v and output gradient), `scratch` AttentionBf16ScratchFloats (a row block's
// scores or the head's d probabilities, and one dense T x hs result); both
// sizes are in fsdp/nn/attention_layout.h. Forward writes the bf16 output (only a
// product reads it), backward the fp32 dqkv.
void AttentionForwardBf16(uint16_t* out, uint16_t* probs, float* scratch, uint16_t* scratch_bf16,
                          const uint16_t* qkv, int batch, int seq_len, int channels, int heads,
                          int scratch_slots = 1);
void AttentionBackwardBf16(float* dqkv, float* scratch, uint16_t* scratch_bf16,
                           const uint16_t* dout, const uint16_t* qkv, const uint16_t* probs,
                           int batch, int seq_len, int channels, int heads, int scratch_slots = 1);

void AttentionBackward(KernelIsa isa, float* dqkv, float* scratch, const float* dout,
                       const float* qkv, const float* probs, int batch, int seq_len, int channels,
                       int heads, int scratch_slots = 1);

}  // namespace fsdp

#endif  // FSDP_NN_ATTENTION_H_
