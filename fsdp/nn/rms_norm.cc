// File: fsdp/nn/rms_norm.cc
//
// In 16 float lanes (fsdp/nn/simd.h), each row's sums in 16 double lanes
// reduced by the fixed tree of simd::ReduceAdd, so the bits depend on the
// shape only, not on the instruction set ([Note: ISA-independent results]).
// Per element the order of the scalar formulas: (x r) w forward;
// ((r g) w) - c x and (g x) r backward.
#include "fsdp/nn/rms_norm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/parallel_for.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::D16;
using simd::F16;
using simd::kLanes;

// sum_c (a_c b_c) z_c in double lanes (b null: a_c^2; z null: no third
// factor), padded lanes 0.
FSDP_SIMD_INLINE double RowDot(const float* a, const float* b, const float* z, int channels) {
  D16 sum{};
  for (int c = 0; c < channels; c += kLanes) {
    const int64_t n = channels - c < kLanes ? channels - c : kLanes;
    const D16 x = simd::ToDouble(simd::LoadUpTo(a + c, n));
    const D16 y = b == nullptr ? x : simd::ToDouble(simd::LoadUpTo(b + c, n));
    D16 p{x.lo * y.lo, x.hi * y.hi};
    if (z != nullptr) {
      const D16 w = simd::ToDouble(simd::LoadUpTo(z + c, n));
      p.lo *= w.lo;
      p.hi *= w.hi;
    }
    sum.lo += p.lo;
    sum.hi += p.hi;
  }
  return simd::ReduceAdd(sum);
}

template <typename Out>
FSDP_SIMD_INLINE void ForwardBody(Out* out, float* rstd, const float* inp, const float* weight,
                                  int n, int channels, float eps) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<int64_t>(i) * channels;
    Out* o = out + static_cast<int64_t>(i) * channels;
    const double squares = RowDot(x, nullptr, nullptr, channels);
    const float r = static_cast<float>(1.0 / std::sqrt(squares / channels + eps));
    rstd[i] = r;
    for (int c = 0; c < channels; c += kLanes) {
      const int64_t m = channels - c < kLanes ? channels - c : kLanes;
      simd::StoreUpTo(o + c, simd::LoadUpTo(x + c, m) * r * simd::LoadUpTo(weight + c, m), m);
    }
  }
}

FSDP_SIMD_INLINE void RmsNormForwardFp32Body(float* out, float* rstd, const float* inp,
                                             const float* weight, int n, int channels, float eps) {
  ForwardBody(out, rstd, inp, weight, n, channels, eps);
}
FSDP_SIMD_INLINE void RmsNormForwardBf16Body(uint16_t* out, float* rstd, const float* inp,
                                             const float* weight, int n, int channels, float eps) {
  ForwardBody(out, rstd, inp, weight, n, channels, eps);
}

// The input gradient, its bf16 copy (when copy16 is set) and, with
// kWithWeight, the weight gradient, row by row.
template <bool kWithWeight>
FSDP_SIMD_INLINE void RmsNormBackwardRows(float* dinp, uint16_t* copy16, float* dweight,
                                          const float* dout, const float* inp, const float* weight,
                                          const float* rstd, int n, int channels) {
  for (int i = 0; i < n; ++i) {
    const int64_t row = static_cast<int64_t>(i) * channels;
    const float* x = inp + row;
    const float* g = dout + row;
    float* dx = dinp + row;
    const float r = rstd[i];
    const double dot = RowDot(g, weight, x, channels);  // sum_c g w x
    const float coefficient = static_cast<float>(dot * r * r * r / channels);
    for (int c = 0; c < channels; c += kLanes) {
      const int64_t m = channels - c < kLanes ? channels - c : kLanes;
      const F16 gv = simd::LoadUpTo(g + c, m), xv = simd::LoadUpTo(x + c, m);
      const F16 d = simd::LoadUpTo(dx + c, m) + (r * gv * simd::LoadUpTo(weight + c, m) - coefficient * xv);
      simd::StoreUpTo(dx + c, d, m);
      if (kWithWeight)
        simd::StoreUpTo(dweight + c, simd::LoadUpTo(dweight + c, m) + gv * xv * r, m);
      if (copy16 != nullptr) simd::StoreUpTo(copy16 + row + c, d, m);
    }
  }
}

FSDP_SIMD_INLINE void RmsNormBackwardBody(float* dinp, uint16_t* copy16, float* dweight,
                                          const float* dout, const float* inp, const float* weight,
                                          const float* rstd, int n, int channels) {
  RmsNormBackwardRows<true>(dinp, copy16, dweight, dout, inp, weight, rstd, n, channels);
}

// The backward cut in two for the compute threads, each value the fused
// loop's expression: the input gradient (and its bf16 copy) per row, and the
// weight gradient per column, each column adding its rows in order.
FSDP_SIMD_INLINE void RmsNormInputGradBody(float* dinp, uint16_t* copy16, const float* dout,
                                           const float* inp, const float* weight, const float* rstd,
                                           int n, int channels) {
  RmsNormBackwardRows<false>(dinp, copy16, nullptr, dout, inp, weight, rstd, n, channels);
}

// `columns` columns of rows `stride` floats apart; rows outer, so each row's
// part is read once and in order, with the sums of up to kWeightGradVectors
// vectors of columns held at once.
constexpr int kWeightGradVectors = 8;

FSDP_SIMD_INLINE void RmsNormWeightGradBody(float* dweight, const float* dout, const float* inp,
                                            const float* rstd, int n, int columns, int stride) {
  for (int c0 = 0; c0 < columns; c0 += kWeightGradVectors * kLanes) {
    const int width = std::min(columns - c0, kWeightGradVectors * kLanes);
    const int vectors = (width + kLanes - 1) / kLanes;
    F16 dw[kWeightGradVectors];
    for (int v = 0; v < vectors; ++v) {
      dw[v] = simd::LoadUpTo(dweight + c0 + v * kLanes, std::min(kLanes, width - v * kLanes));
    }
    for (int i = 0; i < n; ++i) {
      const int64_t row = static_cast<int64_t>(i) * stride + c0;
      for (int v = 0; v < vectors; ++v) {
        const int64_t m = std::min(kLanes, width - v * kLanes);
        dw[v] = dw[v] + simd::LoadUpTo(dout + row + v * kLanes, m) *
                            simd::LoadUpTo(inp + row + v * kLanes, m) * rstd[i];
      }
    }
    for (int v = 0; v < vectors; ++v) {
      simd::StoreUpTo(dweight + c0 + v * kLanes, dw[v], std::min(kLanes, width - v * kLanes));
    }
  }
}

FSDP_ISA_VARIANTS(void, RmsNormInputGrad,
                  (float* dinp, uint16_t* copy16, const float* dout, const float* inp,
                   const float* weight, const float* rstd, int n, int channels),
                  (dinp, copy16, dout, inp, weight, rstd, n, channels))
FSDP_ISA_VARIANTS(void, RmsNormWeightGrad,
                  (float* dweight, const float* dout, const float* inp, const float* rstd, int n,
                   int columns, int stride),
                  (dweight, dout, inp, rstd, n, columns, stride))
FSDP_ISA_VARIANTS(void, RmsNormForwardFp32,
                  (float* out, float* rstd, const float* inp, const float* weight, int n,
                   int channels, float eps),
                  (out, rstd, inp, weight, n, channels, eps))
FSDP_ISA_VARIANTS(void, RmsNormForwardBf16,
                  (uint16_t * out, float* rstd, const float* inp, const float* weight, int n,
                   int channels, float eps),
                  (out, rstd, inp, weight, n, channels, eps))
FSDP_ISA_VARIANTS(void, RmsNormBackward,
                  (float* dinp, uint16_t* copy16, float* dweight, const float* dout,
                   const float* inp, const float* weight, const float* rstd, int n, int channels),
                  (dinp, copy16, dweight, dout, inp, weight, rstd, n, channels))

}  // namespace

// Rows per piece and columns per piece of the weight gradient on the compute
// threads (base/parallel_for.h).
constexpr int64_t kRowsPerPiece = 16;
constexpr int64_t kColumnsPerPiece = 128;

void RmsNormForward(KernelIsa isa, DtypeSpan out, float* rstd, const float* inp,
                    const float* weight, int n, int channels, float eps) {
  base::ParallelFor(n, kRowsPerPiece, [&](int64_t b, int64_t e) {
    const int64_t offset = b * channels;
    const int rows = static_cast<int>(e - b);
    if (out.dtype() == comm::Dtype::kBFloat16) {
      uint16_t* o = out.as<uint16_t>().data() + offset;
      FSDP_ISA_DISPATCH(isa, RmsNormForwardBf16,
                        (o, rstd + b, inp + offset, weight, rows, channels, eps));
    } else {
      float* o = out.as<float>().data() + offset;
      FSDP_ISA_DISPATCH(isa, RmsNormForwardFp32,
                        (o, rstd + b, inp + offset, weight, rows, channels, eps));
    }
  });
}

void RmsNormBackward(KernelIsa isa, float* dinp, DtypeSpan dinp_copy, float* dweight,
                     const float* dout, const float* inp, const float* weight, const float* rstd,
                     int n, int channels) {
  uint16_t* copy16 =
      dinp_copy.dtype() == comm::Dtype::kBFloat16 ? dinp_copy.as<uint16_t>().data() : nullptr;
  if (base::ParallelThreads() == 1 || n < 2 * kRowsPerPiece) {
    // One pass, the weight gradient fused in (the dispatch returns).
    FSDP_ISA_DISPATCH(isa, RmsNormBackward,
                      (dinp, copy16, dweight, dout, inp, weight, rstd, n, channels));
  }
  base::ParallelFor(n, kRowsPerPiece, [&](int64_t b, int64_t e) {
    const int64_t offset = b * channels;
    FSDP_ISA_DISPATCH(isa, RmsNormInputGrad,
                      (dinp + offset, copy16 == nullptr ? nullptr : copy16 + offset, dout + offset,
                       inp + offset, weight, rstd + b, static_cast<int>(e - b), channels));
  });
  base::ParallelFor(channels, kColumnsPerPiece, [&](int64_t b, int64_t e) {
    FSDP_ISA_DISPATCH(isa, RmsNormWeightGrad,
                      (dweight + b, dout + b, inp + b, rstd, n, static_cast<int>(e - b), channels));
  });
}

void RmsNormForward(DtypeSpan out, float* rstd, const float* inp, const float* weight, int n,
                    int channels, float eps) {
  RmsNormForward(BestKernelIsa(), out, rstd, inp, weight, n, channels, eps);
}

void RmsNormBackward(float* dinp, DtypeSpan dinp_copy, float* dweight, const float* dout,
                     const float* inp, const float* weight, const float* rstd, int n,
                     int channels) {
  RmsNormBackward(BestKernelIsa(), dinp, dinp_copy, dweight, dout, inp, weight, rstd, n, channels);
}

}  // namespace fsdp
