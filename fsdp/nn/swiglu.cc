// File: fsdp/nn/swiglu.cc
//
// [Note: SiLU as a sigmoid] silu(g) = g s with s = 1 / (1 + e), e =
// exp(-g), and 1 - s = e s exactly, so the derivative
// s (1 + g (1 - s)) needs no cancelling subtraction. One polynomial exp and
// one division per value in 16 float lanes (fsdp/nn/simd.h), the argument
// clamped to [kExpLow, kZHigh]: at the low end e underflows to about
// 1e-38 and s is 1; at the high end s is about 1.8e-35, so silu(g) is 0 to
// within g 1.8e-35 for g < -80, where the exact value is below 80 e^-80.
// The same bits for every ISA variant ([Note: ISA-independent results]).
#include "fsdp/nn/swiglu.h"

#include <cstdint>

#include "base/parallel_for.h"
#include "fsdp/nn/kernel_isa.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::F16;
using simd::kLanes;

constexpr float kZHigh = 80.0f;

FSDP_SIMD_INLINE F16 ExpOfMinus(F16 g) {
  return simd::ExpInRange(
      simd::Max(simd::Min(-g, simd::Splat(kZHigh)), simd::Splat(simd::kExpLow)));
}

template <typename Out>
FSDP_SIMD_INLINE void ForwardLanes(Out* out, const float* gate, const float* up, int64_t n) {
  const F16 g = simd::LoadUpTo(gate, n);
  const F16 s = 1.0f / (1.0f + ExpOfMinus(g));
  simd::StoreUpTo(out, g * s * simd::LoadUpTo(up, n), n);
}

template <typename Out>
FSDP_SIMD_INLINE void SwigluForwardBody(Out* out, const float* gate_up, int rows, int hidden) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = gate_up + r * 2 * hidden;
    const float* up = gate + hidden;
    Out* o = out + r * hidden;
    int64_t i = 0;
    for (; i + kLanes <= hidden; i += kLanes) ForwardLanes(o + i, gate + i, up + i, kLanes);
    if (i < hidden) ForwardLanes(o + i, gate + i, up + i, hidden - i);
  }
}

FSDP_SIMD_INLINE void BackwardLanes(float* dgate, float* dup, const float* d, const float* gate,
                                    const float* up, int64_t n) {
  const F16 g = simd::LoadUpTo(gate, n);
  const F16 e = ExpOfMinus(g);
  const F16 s = 1.0f / (1.0f + e);
  const F16 dv = simd::LoadUpTo(d, n);
  simd::StoreUpTo(dgate, dv * simd::LoadUpTo(up, n) * (s * (1.0f + g * (e * s))), n);
  simd::StoreUpTo(dup, dv * g * s, n);
}

FSDP_SIMD_INLINE void SwigluBackwardBody(float* dgate_up, const float* dout, const float* gate_up,
                                         int rows, int hidden) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = gate_up + r * 2 * hidden;
    const float* up = gate + hidden;
    const float* d = dout + r * hidden;
    float* dgate = dgate_up + r * 2 * hidden;
    float* dup = dgate + hidden;
    int64_t i = 0;
    for (; i + kLanes <= hidden; i += kLanes) {
      BackwardLanes(dgate + i, dup + i, d + i, gate + i, up + i, kLanes);
    }
    if (i < hidden) BackwardLanes(dgate + i, dup + i, d + i, gate + i, up + i, hidden - i);
  }
}

FSDP_SIMD_INLINE void SwigluForwardFp32Body(float* out, const float* gate_up, int rows,
                                            int hidden) {
  SwigluForwardBody(out, gate_up, rows, hidden);
}
FSDP_SIMD_INLINE void SwigluForwardBf16Body(uint16_t* out, const float* gate_up, int rows,
                                            int hidden) {
  SwigluForwardBody(out, gate_up, rows, hidden);
}

FSDP_ISA_VARIANTS(void, SwigluForwardFp32, (float* out, const float* gate_up, int rows, int hidden),
                  (out, gate_up, rows, hidden))
FSDP_ISA_VARIANTS(void, SwigluForwardBf16,
                  (uint16_t * out, const float* gate_up, int rows, int hidden),
                  (out, gate_up, rows, hidden))
FSDP_ISA_VARIANTS(void, SwigluBackward,
                  (float* dgate_up, const float* dout, const float* gate_up, int rows, int hidden),
                  (dgate_up, dout, gate_up, rows, hidden))

}  // namespace

// Rows are independent: pieces of rows on the compute threads give the same
// bits (base/parallel_for.h).
constexpr int64_t kRowsPerPiece = 8;

void SwigluForward(KernelIsa isa, DtypeSpan out, const float* gate_up, int rows, int hidden) {
  base::ParallelFor(rows, kRowsPerPiece, [&](int64_t b, int64_t e) {
    const float* in = gate_up + b * 2 * hidden;
    const int n = static_cast<int>(e - b);
    if (out.dtype() == comm::Dtype::kBFloat16) {
      uint16_t* o = out.as<uint16_t>().data() + b * hidden;
      FSDP_ISA_DISPATCH(isa, SwigluForwardBf16, (o, in, n, hidden));
    } else {
      float* o = out.as<float>().data() + b * hidden;
      FSDP_ISA_DISPATCH(isa, SwigluForwardFp32, (o, in, n, hidden));
    }
  });
}

void SwigluBackward(KernelIsa isa, float* dgate_up, const float* dout, const float* gate_up,
                    int rows, int hidden) {
  base::ParallelFor(rows, kRowsPerPiece, [&](int64_t b, int64_t e) {
    FSDP_ISA_DISPATCH(isa, SwigluBackward,
                      (dgate_up + b * 2 * hidden, dout + b * hidden, gate_up + b * 2 * hidden,
                       static_cast<int>(e - b), hidden));
  });
}

void SwigluForward(DtypeSpan out, const float* gate_up, int rows, int hidden) {
  SwigluForward(BestKernelIsa(), out, gate_up, rows, hidden);
}

void SwigluBackward(float* dgate_up, const float* dout, const float* gate_up, int rows,
                    int hidden) {
  SwigluBackward(BestKernelIsa(), dgate_up, dout, gate_up, rows, hidden);
}

}  // namespace fsdp
