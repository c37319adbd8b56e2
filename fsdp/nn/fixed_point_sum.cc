// File: fsdp/nn/fixed_point_sum.cc
#include "fsdp/nn/fixed_point_sum.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {
using simd::D16;
using simd::D8;
using simd::F16;
using simd::I16;
using simd::AbsBits;
using simd::kLanes;
using simd::MaxLanes;

typedef int64_t L8 __attribute__((vector_size(64)));
typedef uint64_t U8 __attribute__((vector_size(64)));

constexpr int32_t kAbsMask = 0x7fffffff;

// 1.5 * 2^52: for |y| <= 2^51, y + kRound lies in [2^52, 2^53), where the
// ulp is 1, so the IEEE addition rounds y to an integer (nearest, ties to
// even), and the difference of the two doubles' bits is that integer, sign
// included. The same addition in every ISA variant, unlike a conversion
// instruction (double to int64 needs avx512dq). |y| <= 2^43 here for any
// contribution within the bound; beyond it the bits are garbage that the
// caller discards (ExactSumStateOf), never undefined behaviour: the adds
// wrap as unsigned integers.
constexpr double kRound = 6755399441055744.0;

FSDP_SIMD_INLINE U8 Rounded(D8 x, double scale) {
  const D8 y = x * scale + kRound;  // x * scale is exact: a power of two
  U8 bits, magic;
  std::memcpy(&bits, &y, sizeof(bits));
  const D8 zero_point = D8{} + kRound;
  std::memcpy(&magic, &zero_point, sizeof(magic));
  return bits - magic;
}

FSDP_SIMD_INLINE void AddLanes(int64_t* sum, U8 add) {
  U8 s;
  std::memcpy(&s, sum, sizeof(s));
  s += add;
  std::memcpy(sum, &s, sizeof(s));
}

// One pass: the rounded contributions go into the sums and |x|'s bits into
// a running maximum (a non-negative float's bits order like the float, and
// NaN's above +inf's, so NaN wins as in MaxAbs).
FSDP_SIMD_INLINE float AddToExactSumBody(const float* x, int64_t* sum, int64_t n,
                                         int exponent) {
  const double scale = std::ldexp(1.0, kExactFractionBits - exponent);
  I16 largest{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F16 v = simd::Load(x + i);
    largest = MaxLanes(largest, AbsBits(v));
    const D16 d = simd::ToDouble(v);
    AddLanes(sum + i, Rounded(d.lo, scale));
    AddLanes(sum + i + kLanes / 2, Rounded(d.hi, scale));
  }
  for (; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    largest[0] = largest[0] > (bits & kAbsMask) ? largest[0] : (bits & kAbsMask);
    const double y = static_cast<double>(x[i]) * scale + kRound;
    uint64_t y_bits, magic_bits;
    std::memcpy(&y_bits, &y, sizeof(y_bits));
    std::memcpy(&magic_bits, &kRound, sizeof(magic_bits));
    sum[i] = static_cast<int64_t>(static_cast<uint64_t>(sum[i]) + (y_bits - magic_bits));
  }
  int32_t top = 0;
  for (int j = 0; j < kLanes; ++j) top = largest[j] > top ? largest[j] : top;
  float result;
  std::memcpy(&result, &top, sizeof(result));
  return result;
}

FSDP_ISA_VARIANTS(float, AddToExactSum, (const float* x, int64_t* sum, int64_t n, int exponent),
                  (x, sum, n, exponent))

}  // namespace

float LargerMagnitude(float a, float b) {
  int32_t a_bits, b_bits;
  std::memcpy(&a_bits, &a, sizeof(a_bits));
  std::memcpy(&b_bits, &b, sizeof(b_bits));
  return (a_bits & kAbsMask) >= (b_bits & kAbsMask) ? std::fabs(a) : std::fabs(b);
}

float AddToExactSum(KernelIsa isa, int exponent, absl::Span<const float> contribution,
                    absl::Span<int64_t> sum) {
  FSDP_CHECK(contribution.size() == sum.size());
  FSDP_ISA_DISPATCH(isa, AddToExactSum,
                    (contribution.data(), sum.data(), static_cast<int64_t>(sum.size()),
                     exponent));
}

float AddToExactSum(int exponent, absl::Span<const float> contribution,
                    absl::Span<int64_t> sum) {
  return AddToExactSum(BestKernelIsa(), exponent, contribution, sum);
}

const char* ExactSumStateName(ExactSumState state) {
  switch (state) {
    case ExactSumState::kExact:
      return "exact";
    case ExactSumState::kOverflow:
      return "overflow";
    case ExactSumState::kNonFinite:
      return "non-finite";
  }
  return "unknown";
}

ExactSumState ExactSumStateOf(float max_abs, int exponent) {
  if (!std::isfinite(max_abs)) return ExactSumState::kNonFinite;
  return std::fabs(double{max_abs}) > std::ldexp(1.0, exponent) ? ExactSumState::kOverflow
                                                                 : ExactSumState::kExact;
}

int ExactExponentFor(float max_abs, int headroom_bits) {
  FSDP_CHECK(std::isfinite(max_abs) && max_abs >= 0.0f && headroom_bits >= 0);
  int e = kExactMinExponent;
  if (max_abs > 0.0f) {
    int m = 0;
    const float mantissa = std::frexp(max_abs, &m);  // max_abs = mantissa 2^m, mantissa in [0.5, 1)
    e = mantissa == 0.5f ? m - 1 : m;                // smallest e with max_abs <= 2^e
    if (e < kExactMinExponent) e = kExactMinExponent;
  }
  e += headroom_bits;
  return e > kExactMaxExponent ? kExactMaxExponent : e;
}

absl::Status ExactSumToFloats(int exponent, absl::Span<const int64_t> sum, int64_t divisor,
                              float max_abs, absl::Span<float> out) {
  if (sum.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat("exact sum of ", sum.size(),
                                                   " elements into ", out.size(),
                                                   " outputs: the sizes must match"));
  }
  if (divisor < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("exact sum divided by ", divisor, ": the divisor (global tokens) must be >= 1"));
  }
  switch (ExactSumStateOf(max_abs, exponent)) {
    case ExactSumState::kExact:
      break;
    case ExactSumState::kOverflow:
      return absl::FailedPreconditionError(absl::StrCat(
          "exact sum with bound 2^", exponent, " had a contribution of magnitude ", max_abs,
          ": redo it with exponent ", ExactExponentFor(max_abs, 0)));
    case ExactSumState::kNonFinite:
      for (float& v : out) v = std::numeric_limits<float>::quiet_NaN();
      return absl::OkStatus();
  }
  const double factor =
      std::ldexp(1.0 / static_cast<double>(divisor), exponent - kExactFractionBits);
  for (size_t i = 0; i < sum.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(sum[i]) * factor);
  }
  return absl::OkStatus();
}

int64_t ExactSumOfValues(int exponent, absl::Span<const float> values) {
  int64_t sum = 0;
  for (const float& v : values) {
    AddToExactSum(exponent, absl::MakeConstSpan(&v, 1), absl::MakeSpan(&sum, 1));
  }
  return sum;
}

absl::Status ExactSumsToFloatsInPlace(absl::Span<int64_t> region,
                                      absl::Span<const ExactSegment> segments, int64_t divisor) {
  if (divisor < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("exact sums divided by ", divisor, ": the divisor (global tokens) must be >= 1"));
  }
  const int64_t n = static_cast<int64_t>(region.size());
  int64_t previous_end = 0;
  for (const ExactSegment& s : segments) {
    if (s.begin < previous_end || s.end < s.begin || s.end > n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "exact segment [", s.begin, ", ", s.end, ") of a region of ", n, " sums: segments must "
          "be ascending, disjoint and inside the region"));
    }
    if (ExactSumStateOf(s.max_abs, s.exponent) == ExactSumState::kOverflow) {
      return absl::FailedPreconditionError(absl::StrCat(
          "exact sums [", s.begin, ", ", s.end, ") with bound 2^", s.exponent,
          " had a contribution of magnitude ", s.max_abs, ": redo them with exponent ",
          ExactExponentFor(s.max_abs, 0)));
    }
    previous_end = s.end;
  }
  // Float i is written over bytes [4i, 4i + 4), which belong to sum i / 2,
  // already read: ascending order never overwrites a sum before it is read.
  // Both go through memcpy (byte access), so the compiler knows they alias.
  std::byte* bytes = reinterpret_cast<std::byte*>(region.data());
  auto put = [bytes](int64_t i, float v) { std::memcpy(bytes + 4 * i, &v, sizeof(v)); };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int64_t i = 0;
  for (const ExactSegment& s : segments) {
    for (; i < s.begin; ++i) put(i, 0.0f);
    if (ExactSumStateOf(s.max_abs, s.exponent) == ExactSumState::kNonFinite) {
      for (; i < s.end; ++i) put(i, nan);
      continue;
    }
    const double factor =
        std::ldexp(1.0 / static_cast<double>(divisor), s.exponent - kExactFractionBits);
    for (; i < s.end; ++i) {
      int64_t sum;
      std::memcpy(&sum, bytes + 8 * i, sizeof(sum));
      put(i, static_cast<float>(static_cast<double>(sum) * factor));
    }
  }
  for (; i < n; ++i) put(i, 0.0f);
  return absl::OkStatus();
}

absl::Status CheckExactContributionCount(int64_t count) {
  if (count >= 1 && count <= kExactMaxContributions) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "an exact sum of ", count, " contributions per element: between 1 and ",
      kExactMaxContributions, " (2^", 63 - kExactFractionBits,
      " - 1) fit its int64 sum; use fewer sequences per step"));
}

}  // namespace fsdp
