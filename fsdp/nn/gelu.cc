// File: fsdp/nn/gelu.cc
#include "fsdp/nn/gelu.h"

#include <cmath>

namespace fsdp {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// tanh(u) = 1 - 2 / (exp(2u) + 1). glibc's tanhf goes through expm1f and was
// ~25% of a GPT step in a profile; expf is several times cheaper. Absolute
// error stays ~1e-7 (relative error grows only for |u| < 1e-3, where GELU's
// 0.5 x (1 + tanh) is dominated by the 1). Saturates correctly: exp
// overflowing to inf gives 1, underflowing to 0 gives -1.
inline float Tanh(float u) { return 1.0f - 2.0f / (std::exp(2.0f * u) + 1.0f); }
}  // namespace

void GeluForward(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + Tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
}

void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float th = Tanh(u);
    const float sech2 = 1.0f - th * th;
    const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * du_dx;
    dinp[i] += grad * dout[i];
  }
}

}  // namespace fsdp
