// File: fsdp/nn/gelu.cc
#include "fsdp/nn/gelu.h"

#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::F16;
using simd::kLanes;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// tanh by simd::Tanh (1 - 2 / (exp(2u) + 1) with a polynomial exp): glibc's
// tanhf goes through expm1f and was ~25% of a GPT step in a profile, and
// even the scalar expf form was 5% (issue 11).
FSDP_SIMD_INLINE F16 Gelu(F16 x) {
  const F16 u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 0.5f * x * (1.0f + simd::Tanh(u));
}

FSDP_SIMD_INLINE F16 GeluGrad(F16 x) {
  const F16 u = kSqrt2OverPi * (x + kCubic * x * x * x);
  const F16 th = simd::Tanh(u);
  const F16 sech2 = 1.0f - th * th;
  const F16 du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du_dx;
}

FSDP_SIMD_INLINE void GeluForwardBody(float* out, const float* inp, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(out + i, Gelu(simd::Load(inp + i)));
  if (i < n) simd::StorePartial(out + i, Gelu(simd::LoadPartial(inp + i, n - i, 0.0f)), n - i);
}

FSDP_SIMD_INLINE void GeluBackwardBody(float* dinp, const float* inp, const float* dout,
                                       int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    simd::Store(dinp + i,
                simd::Load(dinp + i) + GeluGrad(simd::Load(inp + i)) * simd::Load(dout + i));
  }
  if (i < n) {
    const int64_t rest = n - i;
    const F16 grad = GeluGrad(simd::LoadPartial(inp + i, rest, 0.0f));
    simd::StorePartial(dinp + i,
                       simd::LoadPartial(dinp + i, rest, 0.0f) +
                           grad * simd::LoadPartial(dout + i, rest, 0.0f),
                       rest);
  }
}

// dinp = 0 + gelu'(inp) * dout: GeluBackwardBody on a zeroed dinp without
// the zeroing pass and the load. The + 0 stays (it costs no memory): it turns
// a -0 product into +0, as adding into zeros did, so the bits are the same.
FSDP_SIMD_INLINE void GeluBackwardOverwriteBody(float* dinp, const float* inp, const float* dout,
                                                int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    simd::Store(dinp + i, 0.0f + GeluGrad(simd::Load(inp + i)) * simd::Load(dout + i));
  }
  if (i < n) {
    const int64_t rest = n - i;
    const F16 grad = GeluGrad(simd::LoadPartial(inp + i, rest, 0.0f));
    simd::StorePartial(dinp + i, 0.0f + grad * simd::LoadPartial(dout + i, rest, 0.0f), rest);
  }
}

FSDP_ISA_VARIANTS(void, GeluForward, (float* out, const float* inp, int64_t n), (out, inp, n))
FSDP_ISA_VARIANTS(void, GeluBackward, (float* dinp, const float* inp, const float* dout, int64_t n),
                  (dinp, inp, dout, n))
FSDP_ISA_VARIANTS(void, GeluBackwardOverwrite,
                  (float* dinp, const float* inp, const float* dout, int64_t n),
                  (dinp, inp, dout, n))

}  // namespace

void GeluForward(KernelIsa isa, float* out, const float* inp, int64_t n) {
  FSDP_ISA_DISPATCH(isa, GeluForward, (out, inp, n));
}

void GeluBackward(KernelIsa isa, float* dinp, const float* inp, const float* dout, int64_t n) {
  FSDP_ISA_DISPATCH(isa, GeluBackward, (dinp, inp, dout, n));
}

void GeluBackwardOverwrite(KernelIsa isa, float* dinp, const float* inp, const float* dout,
                           int64_t n) {
  FSDP_ISA_DISPATCH(isa, GeluBackwardOverwrite, (dinp, inp, dout, n));
}

void GeluForward(float* out, const float* inp, int64_t n) {
  GeluForward(BestKernelIsa(), out, inp, n);
}

void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
  GeluBackward(BestKernelIsa(), dinp, inp, dout, n);
}

void GeluBackwardOverwrite(float* dinp, const float* inp, const float* dout, int64_t n) {
  GeluBackwardOverwrite(BestKernelIsa(), dinp, inp, dout, n);
}

}  // namespace fsdp
