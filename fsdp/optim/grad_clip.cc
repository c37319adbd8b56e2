// File: fsdp/optim/grad_clip.cc
#include "fsdp/optim/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "base/bf16_convert.h"
#include "base/parallel_for.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::D16;
using simd::D8;
using simd::F16;
using simd::I16;
using simd::kLanes;

typedef int64_t L8 __attribute__((vector_size(64)));

using simd::AbsBits;
using simd::MaxLanes;

// fp32 or bf16 values (widened in registers, so either is read once).
template <typename T>
FSDP_SIMD_INLINE float MaxAbsBody(const T* values, int64_t n) {
  I16 best{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    best = MaxLanes(best, AbsBits(simd::LoadAsFloat(values + i)));
  }
  if (i < n) best = MaxLanes(best, AbsBits(simd::LoadAsFloatPartial(values + i, n - i)));
  int32_t largest = 0;
  for (int j = 0; j < kLanes; ++j) largest = best[j] > largest ? best[j] : largest;
  float result;
  std::memcpy(&result, &largest, sizeof(result));
  return result;
}

// 2^52: adding it to a double in [0, 2^52) rounds it to an integer (to
// nearest, ties to even: the ulp there is 1), which then sits in the low
// mantissa bits (a sum rounded up to 2^53 reads as 2^52, also right). The same IEEE addition in every ISA variant, unlike a
// double-to-int64 conversion instruction (avx512dq only).
constexpr double kRoundToInteger = 4503599627370496.0;

FSDP_SIMD_INLINE L8 Units(D8 g, double scale) {
  const D8 rounded = (g * g) * scale + kRoundToInteger;
  L8 bits, magic;
  std::memcpy(&bits, &rounded, sizeof(bits));
  const D8 zero_point = D8{} + kRoundToInteger;
  std::memcpy(&magic, &zero_point, sizeof(magic));
  return bits - magic;
}

// Each lane adds at most 2^52 per vector; 1024 of them stay below 2^63.
constexpr int64_t kVectorsPerFlush = 1024;

FSDP_SIMD_INLINE SquareUnits LaneTotal(L8 lanes) {
  SquareUnits total = 0;
  for (int j = 0; j < kLanes / 2; ++j) total += static_cast<uint64_t>(lanes[j]);
  return total;
}

// The lanes are flushed into the 128-bit total after each chunk of
// kVectorsPerFlush vectors, outside the loop over the chunk: with the flush
// inside it (a branch every vector) GCC kept the two accumulators in memory,
// a store and a reload on the loop's critical path. Integer sums, so the
// grouping does not change the result.
FSDP_SIMD_INLINE SquareUnits SumOfSquareUnitsBody(const float* values, int64_t n, int exponent) {
  const double scale = std::ldexp(1.0, -exponent);
  SquareUnits total = 0;
  const int64_t whole = n - n % kLanes;
  int64_t i = 0;
  while (i < whole) {
    const int64_t chunk_end = std::min(whole, i + kVectorsPerFlush * kLanes);
    L8 lo{}, hi{};
    for (; i < chunk_end; i += kLanes) {
      const D16 g = simd::ToDouble(simd::Load(values + i));
      lo += Units(g.lo, scale);
      hi += Units(g.hi, scale);
    }
    total += LaneTotal(lo) + LaneTotal(hi);
  }
  if (i < n) {
    const D16 g = simd::ToDouble(simd::LoadPartial(values + i, n - i, 0.0f));
    total += LaneTotal(Units(g.lo, scale)) + LaneTotal(Units(g.hi, scale));
  }
  return total;
}

FSDP_SIMD_INLINE void ScaleInPlaceBody(float* values, int64_t n, float scale) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::Store(values + i, simd::Load(values + i) * scale);
  for (; i < n; ++i) values[i] *= scale;
}

FSDP_SIMD_INLINE float MaxAbsBf16Body(const uint16_t* values, int64_t n) {
  return MaxAbsBody(values, n);
}

FSDP_ISA_VARIANTS(float, MaxAbs, (const float* values, int64_t n), (values, n))
FSDP_ISA_VARIANTS(SquareUnits, SumOfSquareUnits, (const float* values, int64_t n, int exponent),
                  (values, n, exponent))
FSDP_ISA_VARIANTS(float, MaxAbsBf16, (const uint16_t* values, int64_t n), (values, n))

FSDP_ISA_VARIANTS(void, ScaleInPlace, (float* values, int64_t n, float scale), (values, n, scale))

// Pieces on the compute threads (base/parallel_for.h). The reductions here
// are exact (a largest bit pattern, an integer sum), so the pieces' results
// combine to the one-thread result in any order.
constexpr int64_t kPiece = 16384;

// The larger of two |x| as bit patterns (NaN's above infinity's, as in
// MaxAbsBody).
float LargerBits(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, sizeof(x));
  std::memcpy(&y, &b, sizeof(y));
  return x >= y ? a : b;
}

SquareUnits SquareUnitsOfPiece(KernelIsa isa, const float* values, int64_t n, int exponent) {
  FSDP_ISA_DISPATCH(isa, SumOfSquareUnits, (values, n, exponent));
}

template <typename T, typename PieceMax>
float MaxAbsOnThreads(const T* values, int64_t n, PieceMax piece_max) {
  std::mutex mu;
  float largest = 0.0f;
  base::ParallelFor(n, kPiece, [&](int64_t b, int64_t e) {
    const float mine = piece_max(values + b, e - b);
    std::lock_guard<std::mutex> lock(mu);
    largest = LargerBits(largest, mine);
  });
  return largest;
}

}  // namespace

float MaxAbs(KernelIsa isa, absl::Span<const float> values) {
  return MaxAbsOnThreads(
      values.data(), static_cast<int64_t>(values.size()),
      [isa](const float* v, int64_t m) -> float { FSDP_ISA_DISPATCH(isa, MaxAbs, (v, m)); });
}

float MaxAbs(absl::Span<const float> values) { return MaxAbs(BestKernelIsa(), values); }

int SquareUnitExponent(float max_abs) {
  int m = 0;
  std::frexp(max_abs, &m);  // 2^(m-1) <= max_abs < 2^m
  return 2 * m - 52;
}

SquareUnits SumOfSquareUnits(KernelIsa isa, absl::Span<const float> values, int exponent) {
  std::mutex mu;
  SquareUnits total = 0;
  base::ParallelFor(static_cast<int64_t>(values.size()), kPiece, [&](int64_t b, int64_t e) {
    const SquareUnits mine = SquareUnitsOfPiece(isa, values.data() + b, e - b, exponent);
    std::lock_guard<std::mutex> lock(mu);
    total += mine;
  });
  return total;
}

SquareUnits SumOfSquareUnits(absl::Span<const float> values, int exponent) {
  return SumOfSquareUnits(BestKernelIsa(), values, exponent);
}

float MaxAbsBf16(KernelIsa isa, absl::Span<const uint16_t> values) {
  return MaxAbsOnThreads(
      values.data(), static_cast<int64_t>(values.size()),
      [isa](const uint16_t* v, int64_t m) -> float { FSDP_ISA_DISPATCH(isa, MaxAbsBf16, (v, m)); });
}

float MaxAbsBf16(absl::Span<const uint16_t> values) {
  return MaxAbsBf16(BestKernelIsa(), values);
}

// Widened block by block in L1, not in registers as MaxAbsBf16: with the
// widening inside its loop the sum ran slower (4.5-4.6 against 3.5-3.6 ms
// for both passes over 16.9 M, kernel_benchmark, AMD EPYC, 2026-12-06). An
// integer sum, so the blocks do not change it.
SquareUnits SumOfSquareUnitsBf16(KernelIsa isa, absl::Span<const uint16_t> values,
                                 int exponent) {
  std::mutex mu;
  SquareUnits units = 0;
  base::ParallelFor(static_cast<int64_t>(values.size()), kPiece, [&](int64_t b, int64_t e) {
    SquareUnits mine = 0;
    base::ForEachWidenedBlock(values.data() + b, e - b,
                              [&](const float* block, int64_t, int64_t len) {
                                mine += SquareUnitsOfPiece(isa, block, len, exponent);
                              });
    std::lock_guard<std::mutex> lock(mu);
    units += mine;
  });
  return units;
}

SquareUnits SumOfSquareUnitsBf16(absl::Span<const uint16_t> values, int exponent) {
  return SumOfSquareUnitsBf16(BestKernelIsa(), values, exponent);
}

double SquareSumFromUnits(SquareUnits units, int exponent) {
  return std::ldexp(static_cast<double>(units), exponent);
}

double SumOfSquares(KernelIsa isa, absl::Span<const float> values) {
  const float max_abs = MaxAbs(isa, values);
  if (!std::isfinite(max_abs)) return static_cast<double>(max_abs) * max_abs;
  if (max_abs == 0.0f) return 0.0;
  const int exponent = SquareUnitExponent(max_abs);
  return SquareSumFromUnits(SumOfSquareUnits(isa, values, exponent), exponent);
}

double SumOfSquares(absl::Span<const float> values) {
  return SumOfSquares(BestKernelIsa(), values);
}

void ScaleInPlace(KernelIsa isa, absl::Span<float> values, float scale) {
  if (scale == 1.0f) return;
  base::ParallelFor(static_cast<int64_t>(values.size()), kPiece, [&](int64_t b, int64_t e) {
    FSDP_ISA_DISPATCH(isa, ScaleInPlace, (values.data() + b, e - b, scale));
  });
}

void ScaleInPlace(absl::Span<float> values, float scale) {
  ScaleInPlace(BestKernelIsa(), values, scale);
}

float ClipScale(double global_sq_norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const double norm = std::sqrt(global_sq_norm);
  const double scale = max_norm / (norm + 1e-6);
  return scale < 1.0 ? static_cast<float>(scale) : 1.0f;
}

}  // namespace fsdp
