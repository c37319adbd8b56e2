// File: tests/fsdp/nn/reference_kernels.h
//
// The scalar element-wise kernels as they were before vectorization (issue
// 11), kept verbatim as the "old" side of //tests/fsdp/nn:kernel_benchmark
// and as a second reference in tests (AdamW, residual and embedding must
// equal them bit for bit). Same contracts as the fsdp/nn and fsdp/optim
// functions of the same names.
#ifndef TESTS_FSDP_NN_REFERENCE_KERNELS_H_
#define TESTS_FSDP_NN_REFERENCE_KERNELS_H_

#include <cstdint>

#include "fsdp/optim/adamw.h"

namespace fsdp {
namespace reference {

void GeluForward(float* out, const float* inp, int64_t n);
void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n);

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels);
void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean,
                       const float* rstd, int n, int channels);

// Scalar softmax (libm expf) between the same sgemm calls.
void AttentionForward(float* out, float* probs, const float* qkv, int batch, int seq_len,
                      int channels, int heads);
void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* probs, int batch, int seq_len, int channels, int heads);

float CrossEntropyForward(float* logits_to_probs, const int32_t* targets, int n, int vocab);
void CrossEntropyBackward(float* probs_to_dlogits, const int32_t* targets, int n, int vocab,
                          float loss_scale);

void ResidualForward(float* out, const float* a, const float* b, int64_t n);
void ResidualBackward(float* da, float* db, const float* dout, int64_t n);

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                      int batch, int seq_len, int channels);
void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                       int batch, int seq_len, int channels);

void AdamWUpdate(const AdamWOptions& o, float lr, int64_t step, float* params,
                 const float* grads, float* m, float* v, int64_t n);

double SumOfSquares(const float* grads, int64_t n);

}  // namespace reference
}  // namespace fsdp

#endif  // TESTS_FSDP_NN_REFERENCE_KERNELS_H_
