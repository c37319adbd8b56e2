// File: fsdp/nn/linear.h
//
// Fully connected layer, PyTorch layout: out[N, OC] = inp[N, C] @ weight[OC, C]^T
// + bias[OC]. Every product is one fsdp::Matmul (fsdp/nn/matmul.h: oneDNN or
// OpenBLAS, the bias added in its epilogue). `bias` may be null.
// Backward adds into dweight and dbias (either may be null when not wanted),
// so parameter gradients accumulate across micro-batches, or writes them
// fresh (the first micro-batch); the input gradient dinp (may be null) is
// added to or written over: each as the caller says (fsdp/nn/grad_write.h).
#ifndef FSDP_NN_LINEAR_H_
#define FSDP_NN_LINEAR_H_

#include <cstdint>

#include "fsdp/nn/grad_write.h"

namespace fsdp {

void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int n,
                   int in_features, int out_features);

void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                    const float* inp, const float* weight, int n, int in_features,
                    int out_features, GradWrite dinp_write = GradWrite::kAdd,
                    GradWrite param_write = GradWrite::kAdd);

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

// `dweight16`, when set, takes the weight gradient instead of dweight (which
// may then be null): written in bf16 from the product's fp32 accumulators,
// rounded once, the bits ToBf16 gives the fp32 gradient, without writing and
// reading that fp32 gradient (the first micro-batch under 2-byte gradients,
// [Note: bf16 gradients] in fsdp/train/unit_state.h). Needs param_write
// kOverwrite: a bf16 gradient is not accumulated into.
void LinearBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                        const uint16_t* dout_bf16, const uint16_t* inp, const uint16_t* weight,
                        int n, int in_features, int out_features,
                        GradWrite dinp_write = GradWrite::kAdd,
                        GradWrite param_write = GradWrite::kAdd, uint16_t* dweight16 = nullptr);

// dbias (+)= the column sums of dout, the bits LinearBackwardBf16 gives them,
// and dout16 = bf16(dout), in one pass over dout (the unfused way reads it
// twice: ToBf16, then the sums). For output gradients that arrive in fp32;
// call LinearBackwardBf16 with a null dbias after it. dbias may be null.
void BiasGradientWithBf16(float* dbias, uint16_t* dout16, const float* dout, int n,
                          int out_features, GradWrite write);

// dbias += the column sums of `rows` consecutive rows of an output gradient.
// Called for a gradient's row blocks in order, it gives the bits of the bias
// gradient over all rows at once (each column adds its rows in order), so a
// layer that makes the gradient block by block can sum each block while it is
// in L1 and never write the whole gradient (bf16_outputs.h's GELU backward).
void AddBiasGradientRows(float* dbias, const float* dout_rows, int rows, int out_features);

}  // namespace fsdp

#endif  // FSDP_NN_LINEAR_H_
