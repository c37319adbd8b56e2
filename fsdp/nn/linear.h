// File: fsdp/nn/linear.h
//
// Fully connected layer, PyTorch layout: out[N, OC] = inp[N, C] @ weight[OC, C]^T
// + bias[OC]. Every product is one fsdp::Matmul (fsdp/nn/matmul.h: oneDNN or
// OpenBLAS, the bias added in its epilogue). `bias` may be null.
// Backward ADDS into dweight and dbias (either may be null when not wanted),
// so parameter gradients accumulate across micro-batches. The input gradient
// dinp (may be null) is added to or written over, as the caller says
// (InputGradWrite).
#ifndef FSDP_NN_LINEAR_H_
#define FSDP_NN_LINEAR_H_

#include <cstdint>

namespace fsdp {

// How backward writes the input gradient. kAdd: dinp += ..., for a branch that
// joins others (a residual stream). kOverwrite: dinp = ..., for a buffer that
// holds nothing yet; it saves the caller's zeroing pass, and the product runs
// without oneDNN's sum post-op, which made the same shapes 1.2-2x slower in
// the training step (docs/compute.md).
enum class InputGradWrite { kAdd, kOverwrite };

void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int n,
                   int in_features, int out_features);

void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                    const float* inp, const float* weight, int n, int in_features,
                    int out_features, InputGradWrite dinp_write = InputGradWrite::kAdd);

// The bf16 compute mode: the same products on bf16 operands (raw bits) with
// fp32 accumulation and fp32 results; bias and gradients stay fp32. Backward
// takes the output gradient twice: in bf16 for the products and in fp32 for
// the bias gradient.
void LinearForwardBf16(float* out, const uint16_t* inp, const uint16_t* weight, const float* bias,
                       int n, int in_features, int out_features);

// The same with a bf16 result (rounded once, after the fp32 accumulation and
// the bias), for outputs that only feed further bf16 products.
void LinearForwardBf16Out(uint16_t* out, const uint16_t* inp, const uint16_t* weight,
                          const float* bias, int n, int in_features, int out_features);

void LinearBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                        const uint16_t* dout_bf16, const uint16_t* inp, const uint16_t* weight,
                        int n, int in_features, int out_features,
                        InputGradWrite dinp_write = InputGradWrite::kAdd);

}  // namespace fsdp

#endif  // FSDP_NN_LINEAR_H_
