// File: fsdp/nn/vector_math.h
//
// exp and tanh over arrays with the polynomial kernels of fsdp/nn/simd.h
// (the ones inside softmax, cross-entropy and GELU), for tests that sweep
// their accuracy against libm and for the kernel benchmark, and simd.h's
// bf16 widening load and rounding store, for tests over bit patterns. out
// may alias inp.
#ifndef FSDP_NN_VECTOR_MATH_H_
#define FSDP_NN_VECTOR_MATH_H_

#include <cstdint>

#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void VectorExp(KernelIsa isa, float* out, const float* inp, int64_t n);
void VectorTanh(KernelIsa isa, float* out, const float* inp, int64_t n);
void VectorWidenBf16(KernelIsa isa, float* out, const uint16_t* inp, int64_t n);
void VectorRoundBf16(KernelIsa isa, uint16_t* out, const float* inp, int64_t n);

}  // namespace fsdp

#endif  // FSDP_NN_VECTOR_MATH_H_
