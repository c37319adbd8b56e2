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

// [Note: row tails in registers] A row's last, partial vector (i < n <
// i + 16) goes through the stack in LoadPartial / StorePartial: a memcpy
// call and a 64-byte reload that cannot be forwarded from the smaller
// stores. Once per long row that is nothing; the causal softmax has a tail
// in every row (row t has t + 1 entries), several per row, and there it was
// a visible share of the kernel. When the row's storage reaches i + 16 (its
// `capacity`: the causal rows are row_length long and hold `valid` <=
// row_length entries), the tail is read whole and the lanes at or past n are
// replaced in registers, and written whole where the caller allows the
// extra lanes to be overwritten. The lanes hold the same values either way.

// The first `rest` lanes of `whole`, the others `fill`.
FSDP_SIMD_INLINE F16 KeepFirstLanes(F16 whole, int64_t rest, float fill) {
  F16 v;
  for (int j = 0; j < kLanes; ++j) v[j] = j < rest ? whole[j] : fill;
  return v;
}

// row[i, i + 16) with the lanes at or past n (i < n < i + 16) set to `fill`.
FSDP_SIMD_INLINE F16 LoadTail(const float* row, int64_t i, int64_t n, int64_t capacity,
                              float fill) {
  if (i + kLanes > capacity) return LoadPartial(row + i, n - i, fill);
  return KeepFirstLanes(Load(row + i), n - i, fill);
}

// The same over bf16 values, widened.
FSDP_SIMD_INLINE F16 LoadTail(const uint16_t* row, int64_t i, int64_t n, int64_t capacity,
                              float fill) {
  const F16 whole = i + kLanes > capacity ? LoadBf16Partial(row + i, n - i) : LoadBf16(row + i);
  return KeepFirstLanes(whole, n - i, fill);
}

// Writes lanes [0, n - i) of v at row + i, or all 16 when capacity allows.
FSDP_SIMD_INLINE void StoreTail(float* row, int64_t i, int64_t n, int64_t capacity, F16 v) {
  if (i + kLanes > capacity) {
    StorePartial(row + i, v, n - i);
  } else {
    Store(row + i, v);
  }
}

// The same, rounded to bf16.
FSDP_SIMD_INLINE void StoreTail(uint16_t* row, int64_t i, int64_t n, int64_t capacity,
                                    F16 v) {
  if (i + kLanes > capacity) {
    StoreBf16Partial(row + i, v, n - i);
  } else {
    StoreBf16(row + i, v);
  }
}

// max over row[0, n), in 16 lanes and one fixed tree (padding: -inf). The
// row's storage holds `capacity` >= n floats.
FSDP_SIMD_INLINE float RowMax(const float* row, int64_t n, int64_t capacity) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  F16 max = Splat(kMinusInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) max = Max(max, Load(row + i));
  if (i < n) max = Max(max, LoadTail(row, i, n, capacity, kMinusInf));
  return ReduceMax(max);
}

FSDP_SIMD_INLINE float RowMax(const float* row, int64_t n) { return RowMax(row, n, n); }

// row[i] = exp(row[i] - shift) for i < n; returns their sum, in 16 float
// lanes and one fixed tree. Padded lanes hold -inf, whose exp is 0. With a
// `capacity` beyond n, row[n, capacity) may be overwritten with zeros.
FSDP_SIMD_INLINE float ExpShiftedInPlace(float* row, int64_t n, float shift, int64_t capacity) {
  F16 sum = Splat(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F16 e = Exp(Load(row + i) - shift);
    Store(row + i, e);
    sum += e;
  }
  if (i < n) {
    const F16 e =
        Exp(LoadTail(row, i, n, capacity, -std::numeric_limits<float>::infinity()) - shift);
    StoreTail(row, i, n, capacity, e);
    sum += e;
  }
  return ReduceAdd(sum);
}

FSDP_SIMD_INLINE float ExpShiftedInPlace(float* row, int64_t n, float shift) {
  return ExpShiftedInPlace(row, n, shift, n);
}

FSDP_SIMD_INLINE void ScaleRow(float* row, int64_t n, float scale) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(row + i, Load(row + i) * scale);
  if (i < n) StorePartial(row + i, LoadPartial(row + i, n - i, 0.0f) * scale, n - i);
}

// Where a softmax (or a scaled row) writes its result: fp32, or bf16 rounded
// as it is stored (the bf16 compute mode, whose products and saved
// probabilities take bf16: no fp32 copy to round in a second pass).
FSDP_SIMD_INLINE void StoreRow(float* p, F16 v) { Store(p, v); }
FSDP_SIMD_INLINE void StoreRow(uint16_t* p, F16 v) { StoreBf16(p, v); }

// out[i] = row[i] * scale for i < n, in fp32 or rounded to bf16 (ScaleRow
// and ToBf16 in one pass); out[n, capacity) may be overwritten (capacity = n:
// nothing past the row). out may start where row does (the row itself, or
// the bf16 half of an array rounded in place): each 16 values are read
// before their results, which land on values already read, are written.
template <typename Out>
FSDP_SIMD_INLINE void ScaleRowInto(Out* out, const float* row, int64_t n, int64_t capacity,
                                   float scale) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) StoreRow(out + i, Load(row + i) * scale);
  if (i < n) StoreTail(out, i, n, capacity, LoadTail(row, i, n, capacity, 0.0f) * scale);
}

}  // namespace simd
}  // namespace fsdp

#endif  // FSDP_NN_SOFTMAX_ROW_H_
