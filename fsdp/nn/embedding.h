// File: fsdp/nn/embedding.h
//
// Token plus position embedding: out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]
// with wte (vocab, C) and wpe (max_seq_len, C). Tokens are validated by the
// caller (the model checks the batch against its vocabulary). Backward ADDS
// dout rows into the rows of dwte and dwpe that forward read.
// Vectorized (fsdp/nn/simd.h). The overloads taking a KernelIsa run one
// variant (the CPU must support it); all variants give bit-identical results,
// the plain ones use BestKernelIsa().
#ifndef FSDP_NN_EMBEDDING_H_
#define FSDP_NN_EMBEDDING_H_

#include <cstdint>

#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                      int batch, int seq_len, int channels);

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                       int batch, int seq_len, int channels);

// The same forward with bf16 tables (the bf16 parameter layout): each row
// widened to fp32 exactly, then added in fp32 as above.
void EmbeddingForwardBf16(float* out, const int32_t* tokens, const uint16_t* wte,
                          const uint16_t* wpe, int batch, int seq_len, int channels);

void EmbeddingForward(KernelIsa isa, float* out, const int32_t* tokens, const float* wte,
                      const float* wpe, int batch, int seq_len, int channels);

void EmbeddingBackward(KernelIsa isa, float* dwte, float* dwpe, const float* dout,
                       const int32_t* tokens, int batch, int seq_len, int channels);

}  // namespace fsdp

#endif  // FSDP_NN_EMBEDDING_H_
