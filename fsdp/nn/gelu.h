// File: fsdp/nn/gelu.h
//
// GELU, tanh approximation (as GPT-2):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Backward ADDS dout * gelu'(inp) into dinp (dinp must not alias dout).
#ifndef FSDP_NN_GELU_H_
#define FSDP_NN_GELU_H_

#include <cstdint>

namespace fsdp {

void GeluForward(float* out, const float* inp, int64_t n);
void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n);

}  // namespace fsdp

#endif  // FSDP_NN_GELU_H_
