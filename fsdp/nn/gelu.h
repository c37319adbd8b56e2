// File: fsdp/nn/gelu.h
//
// GELU, tanh approximation (as GPT-2):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Backward ADDS dout * gelu'(inp) into dinp (dinp must not alias dout);
// BackwardOverwrite writes it (no zeroed dinp needed; the same bits as
// adding into zeros).
// Vectorized with a polynomial tanh (fsdp/nn/simd.h); the overloads taking a
// KernelIsa run one variant (the CPU must support it); all variants give
// bit-identical results, the plain ones use BestKernelIsa().
#ifndef FSDP_NN_GELU_H_
#define FSDP_NN_GELU_H_

#include <cstdint>

#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void GeluForward(float* out, const float* inp, int64_t n);
void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n);
void GeluBackwardOverwrite(float* dinp, const float* inp, const float* dout, int64_t n);

void GeluForward(KernelIsa isa, float* out, const float* inp, int64_t n);
void GeluBackward(KernelIsa isa, float* dinp, const float* inp, const float* dout, int64_t n);
void GeluBackwardOverwrite(KernelIsa isa, float* dinp, const float* inp, const float* dout,
                           int64_t n);

}  // namespace fsdp

#endif  // FSDP_NN_GELU_H_
