// File: fsdp/nn/gelu.cc
#include "fsdp/nn/gelu.h"

#include "base/parallel_for.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::F16;
using simd::kLanes;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// exp(-2u) beyond this is not needed: x / (1 + exp(80)) is below 1e-34 |x|,
// and s = 1 / (1 + exp(z)) stays a normal float (no subnormal slow path).
constexpr float kZHigh = 80.0f;

// [Note: GELU as a sigmoid] The tanh approximation
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
// is x * sigmoid(2u) = x / (1 + exp(z)) with z = -2u, and its derivative
//   gelu'(x) = s + x s (1 - s) du/dx * 2,  s = 1 / (1 + exp(z)),
// where 1 - s = exp(z) s exactly. One polynomial exp and one division per
// value, without the saturation lanes of simd::Exp: the argument is
// clamped here, and the formula saturates by itself (z at its low end makes
// 1 + exp(z) == 1, at its high end the result is ~0). About a third fewer
// vector operations than tanh through 1 - 2 / (exp(2u) + 1), which took
// 0.55 ns a value in the forward (compute-bound, 2026-12-06), and more
// accurate for negative x, where 1 + tanh(u) cancelled.
FSDP_SIMD_INLINE F16 ExpOfMinusTwoU(F16 x, F16 x2) {
  const F16 z = (-2.0f * kSqrt2OverPi * x) * (1.0f + kCubic * x2);
  // A NaN x clamps to kZHigh here, and x carries the NaN into the result.
  return simd::ExpInRange(simd::Max(simd::Min(z, simd::Splat(kZHigh)),
                                    simd::Splat(simd::kExpLow)));
}

FSDP_SIMD_INLINE F16 Gelu(F16 x) { return x / (1.0f + ExpOfMinusTwoU(x, x * x)); }

FSDP_SIMD_INLINE F16 GeluGrad(F16 x) {
  const F16 x2 = x * x;
  const F16 e = ExpOfMinusTwoU(x, x2);
  const F16 s = 1.0f / (1.0f + e);
  const F16 du_dx_times_2 = (2.0f * kSqrt2OverPi) + (6.0f * kSqrt2OverPi * kCubic) * x2;
  return s + (x * (e * s * s)) * du_dx_times_2;
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

// Element-wise: any cut into pieces gives the same bits (base/parallel_for.h).
constexpr int64_t kPiece = 16384;

}  // namespace

void GeluForward(KernelIsa isa, float* out, const float* inp, int64_t n) {
  base::ParallelFor(n, kPiece, [&](int64_t b, int64_t e) {
    FSDP_ISA_DISPATCH(isa, GeluForward, (out + b, inp + b, e - b));
  });
}

void GeluBackward(KernelIsa isa, float* dinp, const float* inp, const float* dout, int64_t n) {
  base::ParallelFor(n, kPiece, [&](int64_t b, int64_t e) {
    FSDP_ISA_DISPATCH(isa, GeluBackward, (dinp + b, inp + b, dout + b, e - b));
  });
}

void GeluBackwardOverwrite(KernelIsa isa, float* dinp, const float* inp, const float* dout,
                           int64_t n) {
  base::ParallelFor(n, kPiece, [&](int64_t b, int64_t e) {
    FSDP_ISA_DISPATCH(isa, GeluBackwardOverwrite, (dinp + b, inp + b, dout + b, e - b));
  });
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
