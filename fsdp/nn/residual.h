// File: fsdp/nn/residual.h
//
// Residual connection out = a + b. `out` may alias `a` (in-place add onto the
// residual stream). Backward ADDS dout into both da and db.
// Vectorized (fsdp/nn/simd.h). The overloads taking a KernelIsa run one
// variant (the CPU must support it); all variants give bit-identical results,
// the plain ones use BestKernelIsa().
#ifndef FSDP_NN_RESIDUAL_H_
#define FSDP_NN_RESIDUAL_H_

#include <cstdint>

#include "fsdp/nn/kernel_isa.h"

namespace fsdp {

void ResidualForward(float* out, const float* a, const float* b, int64_t n);
void ResidualBackward(float* da, float* db, const float* dout, int64_t n);

void ResidualForward(KernelIsa isa, float* out, const float* a, const float* b, int64_t n);
void ResidualBackward(KernelIsa isa, float* da, float* db, const float* dout, int64_t n);

}  // namespace fsdp

#endif  // FSDP_NN_RESIDUAL_H_
