// File: fsdp/nn/softmax_row.h
//
// Softmax over one row, vectorized (fsdp/nn/simd.h), shared by attention
// (causal rows: only the first `valid` entries take part) and cross-entropy
// (whole vocabulary rows). Include only from kernel .cc files built with the
// kernel copts; the functions are always inlined into each ISA variant.
#ifndef FSDP_NN_SOFTMAX_ROW_H_
#define FSDP_NN_SOFTMAX_ROW_H_

#include <cstdint>

#include "fsdp/nn/simd.h"

namespace fsdp {
namespace simd {

// max over row[0, n), in 16 lanes and one fixed tree (padding: -inf).
FSDP_SIMD_INLINE float RowMax(const float* row, int64_t n) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  F16 max = Splat(kMinusInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) max = Max(max, Load(row + i));
  if (i < n) max = Max(max, LoadPartial(row + i, n - i, kMinusInf));
  return ReduceMax(max);
}

// row[i] = exp(row[i] - shift) for i < n; returns their sum, in 16 float
// lanes and one fixed tree. Padded lanes hold -inf, whose exp is 0.
FSDP_SIMD_INLINE float ExpShiftedInPlace(float* row, int64_t n, float shift) {
  F16 sum = Splat(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F16 e = Exp(Load(row + i) - shift);
    Store(row + i, e);
    sum += e;
  }
  if (i < n) {
    const F16 e = Exp(LoadPartial(row + i, n - i, -std::numeric_limits<float>::infinity()) - shift);
    StorePartial(row + i, e, n - i);
    sum += e;
  }
  return ReduceAdd(sum);
}

FSDP_SIMD_INLINE void ScaleRow(float* row, int64_t n, float scale) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(row + i, Load(row + i) * scale);
  if (i < n) StorePartial(row + i, LoadPartial(row + i, n - i, 0.0f) * scale, n - i);
}

// out[i] = bf16(row[i] * scale) for i < n: ScaleRow and ToBf16 in one pass.
// out may start where row does (the bf16 half of an array rounded in place):
// each 16 values are read before their bf16 bits, which land on values
// already read, are written.
FSDP_SIMD_INLINE void ScaleRowToBf16(uint16_t* out, const float* row, int64_t n, float scale) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) StoreBf16(out + i, Load(row + i) * scale);
  if (i < n) StoreBf16Partial(out + i, LoadPartial(row + i, n - i, 0.0f) * scale, n - i);
}

}  // namespace simd
}  // namespace fsdp

#endif  // FSDP_NN_SOFTMAX_ROW_H_
