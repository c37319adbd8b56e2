// File: fsdp/nn/token_embedding.h
//
// A token embedding without positions (rotary positions enter inside
// attention): out[b, t, :] = wte[tokens[b, t], :], fp32 out, the table fp32
// or bf16 (widened exactly). Tokens are validated by the caller. Backward
// ADDS each dout row into the row of dwte the forward read, in token order.
#ifndef FSDP_NN_TOKEN_EMBEDDING_H_
#define FSDP_NN_TOKEN_EMBEDDING_H_

#include <cstdint>

#include "fsdp/nn/dtype_buffer.h"

namespace fsdp {

void TokenEmbeddingForward(float* out, const int32_t* tokens, ConstDtypeSpan wte, int64_t n,
                           int channels);

void TokenEmbeddingBackward(float* dwte, const float* dout, const int32_t* tokens, int64_t n,
                            int channels);

}  // namespace fsdp

#endif  // FSDP_NN_TOKEN_EMBEDDING_H_
