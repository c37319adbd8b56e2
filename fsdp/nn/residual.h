// File: fsdp/nn/residual.h
//
// Residual connection out = a + b. `out` may alias `a` (in-place add onto the
// residual stream). Backward ADDS dout into both da and db.
#ifndef FSDP_NN_RESIDUAL_H_
#define FSDP_NN_RESIDUAL_H_

#include <cstdint>

namespace fsdp {

void ResidualForward(float* out, const float* a, const float* b, int64_t n);
void ResidualBackward(float* da, float* db, const float* dout, int64_t n);

}  // namespace fsdp

#endif  // FSDP_NN_RESIDUAL_H_
