// File: fsdp/nn/residual.cc
#include "fsdp/nn/residual.h"

namespace fsdp {

void ResidualForward(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void ResidualBackward(float* da, float* db, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

}  // namespace fsdp
