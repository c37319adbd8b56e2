// File: fsdp/train/dtype_kernels.cc
#include "fsdp/train/dtype_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/status_macros.h"
#include "base/bf16_convert.h"
#include "base/bfloat16.h"

namespace fsdp {
namespace {

// Eight independent double lanes (element i in lane i % 8), added in lane
// order at the end: a fixed order that the compiler can still vectorize.
template <typename Element, typename Widen>
double LaneSumOfSquares(absl::Span<const Element> values, Widen widen) {
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  const int64_t n = static_cast<int64_t>(values.size());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double x = widen(values[i + l]);
      lanes[l] += x * x;
    }
  }
  for (; i < n; ++i) {
    const double x = widen(values[i]);
    lanes[i % kLanes] += x * x;
  }
  double sum = 0.0;
  for (double lane : lanes) sum += lane;
  return sum;
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
      return LaneSumOfSquares(values.as<float>(), [](float x) { return double{x}; });
    case comm::Dtype::kBFloat16:
      return LaneSumOfSquares(values.as<uint16_t>(),
                              [](uint16_t x) { return double{base::FromBf16Bits(x)}; });
    case comm::Dtype::kInt64:
      RefuseInt64("SquaredNormForStatistics");
  }
  return 0.0;
}

}  // namespace fsdp
