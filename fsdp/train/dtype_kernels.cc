// File: fsdp/train/dtype_kernels.cc
#include "fsdp/train/dtype_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/bf16_convert.h"
#include "base/bfloat16.h"
#include "base/kernel_isa.h"
#include "base/status_macros.h"
#include "fsdp/nn/simd.h"

namespace fsdp {
namespace {

// Eight independent double lanes (element i in lane i % 8), added in lane
// order at the end: a fixed order. One D8 vector holds the eight lanes; the
// 16 values of a load go in as two halves (elements i..i+7, then i+8..i+15),
// which is each lane's index order, and the tail is padded with zeros
// (adding +0 to a sum of squares leaves it as it is). So every instruction
// set gives the bits of the plain scalar loop over lanes[i % 8]. The scalar
// loop (not vectorized for the SSE2 baseline) took 4.9% of a bf16 step at
// 2 ranks x 1 thread (2026-12-08).
template <typename Element>
FSDP_SIMD_INLINE double LaneSumOfSquaresBody(const Element* values, int64_t n) {
  simd::D8 lanes{};
  int64_t i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    const simd::D16 x = simd::ToDouble(simd::LoadAsFloat(values + i));
    lanes = lanes + x.lo * x.lo;
    lanes = lanes + x.hi * x.hi;
  }
  if (i < n) {
    const simd::D16 x = simd::ToDouble(simd::LoadAsFloatPartial(values + i, n - i));
    lanes = lanes + x.lo * x.lo;
    lanes = lanes + x.hi * x.hi;
  }
  double sum = 0.0;
  for (int l = 0; l < simd::kLanes / 2; ++l) sum += lanes[l];
  return sum;
}

FSDP_SIMD_INLINE double LaneSumOfSquaresFp32Body(const float* values, int64_t n) {
  return LaneSumOfSquaresBody(values, n);
}
FSDP_SIMD_INLINE double LaneSumOfSquaresBf16Body(const uint16_t* values, int64_t n) {
  return LaneSumOfSquaresBody(values, n);
}
FSDP_ISA_VARIANTS(double, LaneSumOfSquaresFp32, (const float* values, int64_t n), (values, n))
FSDP_ISA_VARIANTS(double, LaneSumOfSquaresBf16, (const uint16_t* values, int64_t n), (values, n))

double LaneSumOfSquares(absl::Span<const float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  FSDP_ISA_DISPATCH(base::BestKernelIsa(), LaneSumOfSquaresFp32, (values.data(), n));
}
double LaneSumOfSquares(absl::Span<const uint16_t> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  FSDP_ISA_DISPATCH(base::BestKernelIsa(), LaneSumOfSquaresBf16, (values.data(), n));
}

// int64 spans hold exact fixed-point sums (fsdp/nn/fixed_point_sum.h), not values these
// kernels can read or write: passing one is a programmer bug.
[[noreturn]] void RefuseInt64(const char* kernel) {
  std::fprintf(stderr, "%s: an int64 span holds exact sums, not values; convert it with "
               "ExactSumToFloats first\n", kernel);
  std::abort();
}

}  // namespace

void StoreFloats(DtypeSpan dst, absl::Span<const float> src) {
  FSDP_CHECK(dst.size() == static_cast<int64_t>(src.size()));
  switch (dst.dtype()) {
    case comm::Dtype::kFloat32: {
      const absl::Span<float> out = dst.as<float>();
      if (out.data() != src.data()) std::copy(src.begin(), src.end(), out.begin());
      return;
    }
    case comm::Dtype::kBFloat16:
      base::ToBf16(dst.as<uint16_t>().data(), src.data(), dst.size());
      return;
    case comm::Dtype::kInt64:
      RefuseInt64("StoreFloats");
  }
}

void AccumulateFloats(DtypeSpan dst, absl::Span<const float> add) {
  FSDP_CHECK(dst.size() == static_cast<int64_t>(add.size()));
  switch (dst.dtype()) {
    case comm::Dtype::kFloat32: {
      const absl::Span<float> out = dst.as<float>();
      for (size_t i = 0; i < out.size(); ++i) out[i] += add[i];
      return;
    }
    case comm::Dtype::kBFloat16:
      base::AccumulateToBf16(dst.as<uint16_t>().data(), add.data(), dst.size());
      return;
    case comm::Dtype::kInt64:
      RefuseInt64("AccumulateFloats");
  }
}

void ScaleElements(DtypeSpan values, float scale) {
  switch (values.dtype()) {
    case comm::Dtype::kFloat32:
      ScaleInPlace(values.as<float>(), scale);
      return;
    case comm::Dtype::kBFloat16:
      base::ScaleBf16InPlace(values.as<uint16_t>().data(), values.size(), scale);
      return;
    case comm::Dtype::kInt64:
      RefuseInt64("ScaleElements");
  }
}

void ZeroElements(DtypeSpan values) {
  if (!values.empty()) std::memset(values.data(), 0, static_cast<size_t>(values.num_bytes()));
}

float MaxAbsOf(ConstDtypeSpan values) {
  switch (values.dtype()) {
    case comm::Dtype::kFloat32:
      return MaxAbs(values.as<float>());
    case comm::Dtype::kBFloat16:
      return MaxAbsBf16(values.as<uint16_t>());
    case comm::Dtype::kInt64:
      RefuseInt64("MaxAbsOf");
  }
  return 0.0f;
}

SquareUnits SumOfSquareUnitsOf(ConstDtypeSpan values, int exponent) {
  switch (values.dtype()) {
    case comm::Dtype::kFloat32:
      return SumOfSquareUnits(values.as<float>(), exponent);
    case comm::Dtype::kBFloat16:
      return SumOfSquareUnitsBf16(values.as<uint16_t>(), exponent);
    case comm::Dtype::kInt64:
      RefuseInt64("SumOfSquareUnitsOf");
  }
  return 0;
}

double SumOfSquaresOf(ConstDtypeSpan values) {
  const float max_abs = MaxAbsOf(values);
  if (!std::isfinite(max_abs)) return double{max_abs} * max_abs;
  if (max_abs == 0.0f) return 0.0;
  const int exponent = SquareUnitExponent(max_abs);
  return SquareSumFromUnits(SumOfSquareUnitsOf(values, exponent), exponent);
}

double SquaredNormForStatistics(ConstDtypeSpan values) {
  switch (values.dtype()) {
    case comm::Dtype::kFloat32:
      return LaneSumOfSquares(values.as<float>());
    case comm::Dtype::kBFloat16:
      return LaneSumOfSquares(values.as<uint16_t>());
    case comm::Dtype::kInt64:
      RefuseInt64("SquaredNormForStatistics");
  }
  return 0.0;
}

}  // namespace fsdp
