// File: fsdp/nn/layer_norm.cc
#include "fsdp/nn/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "base/parallel_for.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::D16;
using simd::F16;
using simd::kLanes;

// Two passes in double lanes: the mean first, then the variance around it,
// so rows with a large offset do not lose precision. The deviation x - mean
// is rounded to float before squaring, as the scalar version did.
FSDP_SIMD_INLINE void LayerNormRowStats(const float* x, int channels, float* mean_out,
                                        float* rstd_out) {
  D16 sum{};
  int c = 0;
  for (; c + kLanes <= channels; c += kLanes) {
    const D16 v = simd::ToDouble(simd::Load(x + c));
    sum.lo += v.lo;
    sum.hi += v.hi;
  }
  if (c < channels) {
    const D16 v = simd::ToDouble(simd::LoadPartial(x + c, channels - c, 0.0f));
    sum.lo += v.lo;
    sum.hi += v.hi;
  }
  const float m = static_cast<float>(simd::ReduceAdd(sum) / channels);
  D16 var{};
  for (c = 0; c + kLanes <= channels; c += kLanes) {
    const D16 d = simd::ToDouble(simd::Load(x + c) - m);
    var.lo += d.lo * d.lo;
    var.hi += d.hi * d.hi;
  }
  if (c < channels) {
    // Padding with the mean makes the padded deviations exactly 0.
    const D16 d = simd::ToDouble(simd::LoadPartial(x + c, channels - c, m) - m);
    var.lo += d.lo * d.lo;
    var.hi += d.hi * d.hi;
  }
  *mean_out = m;
  *rstd_out =
      1.0f / std::sqrt(static_cast<float>(simd::ReduceAdd(var) / channels) + kLayerNormEpsilon);
}

FSDP_SIMD_INLINE void LayerNormForwardBody(float* out, float* mean, float* rstd, const float* inp,
                                           const float* weight, const float* bias, int n,
                                           int channels) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * channels;
    float* o = out + static_cast<long>(i) * channels;
    float m, s;
    LayerNormRowStats(x, channels, &m, &s);
    int c = 0;
    for (; c + kLanes <= channels; c += kLanes) {
      simd::Store(o + c, (simd::Load(x + c) - m) * s * simd::Load(weight + c) +
                             simd::Load(bias + c));
    }
    if (c < channels) {
      const int rest = channels - c;
      simd::StorePartial(o + c,
                         (simd::LoadPartial(x + c, rest, 0.0f) - m) * s *
                                 simd::LoadPartial(weight + c, rest, 0.0f) +
                             simd::LoadPartial(bias + c, rest, 0.0f),
                         rest);
    }
    mean[i] = m;
    rstd[i] = s;
  }
}

// One row of backward: the two means over the row, then the three updates
// (only dx's without kWithParams). Padded lanes load dout = 0, so they add
// nothing to either mean.
template <bool kWithParams>
FSDP_SIMD_INLINE void LayerNormBackwardRow(float* dx, float* dweight, float* dbias, const float* d,
                                           const float* x, const float* weight, float m, float s,
                                           int channels) {
  F16 g_sum = simd::Splat(0.0f);
  F16 g_xhat_sum = simd::Splat(0.0f);
  int c = 0;
  for (; c + kLanes <= channels; c += kLanes) {
    const F16 xhat = (simd::Load(x + c) - m) * s;
    const F16 g = simd::Load(d + c) * simd::Load(weight + c);
    g_sum += g;
    g_xhat_sum += g * xhat;
  }
  const int rest = channels - c;
  if (rest > 0) {
    const F16 xhat = (simd::LoadPartial(x + c, rest, 0.0f) - m) * s;
    const F16 g = simd::LoadPartial(d + c, rest, 0.0f) * simd::LoadPartial(weight + c, rest, 0.0f);
    g_sum += g;
    g_xhat_sum += g * xhat;
  }
  const float g_mean = simd::ReduceAdd(g_sum) / channels;
  const float g_xhat_mean = simd::ReduceAdd(g_xhat_sum) / channels;
  for (c = 0; c + kLanes <= channels; c += kLanes) {
    const F16 dv = simd::Load(d + c);
    const F16 xhat = (simd::Load(x + c) - m) * s;
    const F16 g = dv * simd::Load(weight + c);
    if (kWithParams) {
      simd::Store(dbias + c, simd::Load(dbias + c) + dv);
      simd::Store(dweight + c, simd::Load(dweight + c) + xhat * dv);
    }
    simd::Store(dx + c, simd::Load(dx + c) + s * (g - g_mean - xhat * g_xhat_mean));
  }
  if (rest > 0) {
    const F16 dv = simd::LoadPartial(d + c, rest, 0.0f);
    const F16 xhat = (simd::LoadPartial(x + c, rest, 0.0f) - m) * s;
    const F16 g = dv * simd::LoadPartial(weight + c, rest, 0.0f);
    if (kWithParams) {
      simd::StorePartial(dbias + c, simd::LoadPartial(dbias + c, rest, 0.0f) + dv, rest);
      simd::StorePartial(dweight + c, simd::LoadPartial(dweight + c, rest, 0.0f) + xhat * dv, rest);
    }
    simd::StorePartial(dx + c,
                       simd::LoadPartial(dx + c, rest, 0.0f) +
                           s * (g - g_mean - xhat * g_xhat_mean),
                       rest);
  }
}

FSDP_SIMD_INLINE void LayerNormBackwardBody(float* dinp, float* dweight, float* dbias,
                                            const float* dout, const float* inp,
                                            const float* weight, const float* mean,
                                            const float* rstd, int n, int channels) {
  for (int i = 0; i < n; ++i) {
    const long offset = static_cast<long>(i) * channels;
    LayerNormBackwardRow<true>(dinp + offset, dweight, dbias, dout + offset, inp + offset, weight,
                               mean[i], rstd[i], channels);
  }
}

// The backward cut in two for the compute threads: the input gradient per
// row (rows independent), and the weight and bias gradients per column, each
// column adding its rows in order. Every value is the expression the fused
// row above computes, so the two give its bits.
FSDP_SIMD_INLINE void LayerNormInputGradBody(float* dinp, const float* dout, const float* inp,
                                             const float* weight, const float* mean,
                                             const float* rstd, int n, int channels) {
  for (int i = 0; i < n; ++i) {
    const long offset = static_cast<long>(i) * channels;
    LayerNormBackwardRow<false>(dinp + offset, nullptr, nullptr, dout + offset, inp + offset,
                                weight, mean[i], rstd[i], channels);
  }
}

// `columns` columns of rows `stride` floats apart.
// Rows outer, so each row's part is read once and in order (walking one
// column vector down every row first took 1.9% of a bf16 step per thread),
// with the sums of up to kParamGradVectors vectors of columns held at once.
constexpr int kParamGradVectors = 8;

FSDP_SIMD_INLINE void LayerNormParamGradBody(float* dweight, float* dbias, const float* dout,
                                             const float* inp, const float* mean, const float* rstd,
                                             int n, int columns, int stride) {
  for (int c0 = 0; c0 < columns; c0 += kParamGradVectors * kLanes) {
    const int width = std::min(columns - c0, kParamGradVectors * kLanes);
    const int vectors = (width + kLanes - 1) / kLanes;
    F16 dw[kParamGradVectors], db[kParamGradVectors];
    for (int v = 0; v < vectors; ++v) {
      const int lanes = std::min(kLanes, width - v * kLanes);
      dw[v] = simd::LoadPartial(dweight + c0 + v * kLanes, lanes, 0.0f);
      db[v] = simd::LoadPartial(dbias + c0 + v * kLanes, lanes, 0.0f);
    }
    for (int i = 0; i < n; ++i) {
      const long row = static_cast<long>(i) * stride + c0;
      const float m = mean[i], s = rstd[i];
      for (int v = 0; v < vectors; ++v) {
        const int lanes = std::min(kLanes, width - v * kLanes);
        // LoadUpTo: a whole vector is one load; LoadPartial's variable-length
        // copy through the stack called memmove for every vector of every
        // row (1.8% of a bf16 step at 1 rank x 2 threads, 2026-12-08).
        const F16 dv = simd::LoadUpTo(dout + row + v * kLanes, lanes);
        const F16 xhat = (simd::LoadUpTo(inp + row + v * kLanes, lanes) - m) * s;
        db[v] = db[v] + dv;
        dw[v] = dw[v] + xhat * dv;
      }
    }
    for (int v = 0; v < vectors; ++v) {
      const int lanes = std::min(kLanes, width - v * kLanes);
      simd::StorePartial(dweight + c0 + v * kLanes, dw[v], lanes);
      simd::StorePartial(dbias + c0 + v * kLanes, db[v], lanes);
    }
  }
}

FSDP_ISA_VARIANTS(void, LayerNormForward,
                  (float* out, float* mean, float* rstd, const float* inp, const float* weight,
                   const float* bias, int n, int channels),
                  (out, mean, rstd, inp, weight, bias, n, channels))
FSDP_ISA_VARIANTS(void, LayerNormBackward,
                  (float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, const float* mean, const float* rstd, int n,
                   int channels),
                  (dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, channels))

FSDP_ISA_VARIANTS(void, LayerNormInputGrad,
                  (float* dinp, const float* dout, const float* inp, const float* weight,
                   const float* mean, const float* rstd, int n, int channels),
                  (dinp, dout, inp, weight, mean, rstd, n, channels))
FSDP_ISA_VARIANTS(void, LayerNormParamGrad,
                  (float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* mean, const float* rstd, int n, int columns, int stride),
                  (dweight, dbias, dout, inp, mean, rstd, n, columns, stride))

// Rows per piece on the compute threads, and columns per piece of the
// weight and bias gradients (whole vectors) (base/parallel_for.h).
constexpr int64_t kRowsPerPiece = 16;
constexpr int64_t kColumnsPerPiece = 128;

}  // namespace

void LayerNormForward(KernelIsa isa, float* out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels) {
  // Rows are independent: pieces of rows give the same bits.
  base::ParallelFor(n, kRowsPerPiece, [&](int64_t first, int64_t end) {
    const long offset = static_cast<long>(first) * channels;
    FSDP_ISA_DISPATCH(isa, LayerNormForward,
                      (out + offset, mean + first, rstd + first, inp + offset, weight, bias,
                       static_cast<int>(end - first), channels));
  });
}

// With xhat = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
void LayerNormBackward(KernelIsa isa, float* dinp, float* dweight, float* dbias,
                       const float* dout, const float* inp, const float* weight,
                       const float* mean, const float* rstd, int n, int channels) {
  if (base::ParallelThreads() == 1 || n < 2 * kRowsPerPiece) {
    // One pass over the rows, the parameter gradients fused in (the
    // dispatch returns).
    FSDP_ISA_DISPATCH(isa, LayerNormBackward,
                      (dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, channels));
  }
  base::ParallelFor(n, kRowsPerPiece, [&](int64_t first, int64_t end) {
    const long offset = static_cast<long>(first) * channels;
    FSDP_ISA_DISPATCH(isa, LayerNormInputGrad,
                      (dinp + offset, dout + offset, inp + offset, weight, mean + first,
                       rstd + first, static_cast<int>(end - first), channels));
  });
  base::ParallelFor(channels, kColumnsPerPiece, [&](int64_t first, int64_t end) {
    FSDP_ISA_DISPATCH(isa, LayerNormParamGrad,
                      (dweight + first, dbias + first, dout + first, inp + first, mean, rstd, n,
                       static_cast<int>(end - first), channels));
  });
}

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp,
                      const float* weight, const float* bias, int n, int channels) {
  LayerNormForward(BestKernelIsa(), out, mean, rstd, inp, weight, bias, n, channels);
}

void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean,
                       const float* rstd, int n, int channels) {
  LayerNormBackward(BestKernelIsa(), dinp, dweight, dbias, dout, inp, weight, mean, rstd, n,
                    channels);
}

}  // namespace fsdp
