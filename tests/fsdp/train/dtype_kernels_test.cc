// File: tests/fsdp/train/dtype_kernels_test.cc
//
// The two sums of squares over dtype-tagged spans: the exact one
// (SumOfSquaresOf) repeats bit for bit and its parts add within rounding; the
// statistics one (SquaredNormForStatistics) is within double rounding of a
// long-double reference, repeats bit for bit, and widens bf16 exactly.
#include "fsdp/train/dtype_kernels.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/bf16_convert.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

std::vector<float> RandomGradients(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  values[n / 3] = 0.5f;  // one large element, as a gradient often has
  return values;
}

ConstDtypeSpan Fp32(const std::vector<float>& values) {
  return ConstDtypeSpan::Of(comm::Dtype::kFloat32,
                            reinterpret_cast<const std::byte*>(values.data()),
                            static_cast<int64_t>(values.size()));
}

long double Reference(const std::vector<float>& values) {
  long double sum = 0;
  for (float v : values) sum += static_cast<long double>(v) * v;
  return sum;
}

TEST(DtypeKernelsTest, StatisticsNormIsCloseToTheReferenceAndRepeats) {
  for (int64_t n : {1, 7, 8, 9, 1000, 100003}) {
    const std::vector<float> values = RandomGradients(n, static_cast<uint32_t>(n));
    const double norm = SquaredNormForStatistics(Fp32(values));
    const long double reference = Reference(values);
    EXPECT_NEAR(norm, static_cast<double>(reference), 1e-13 * static_cast<double>(reference))
        << n;
    EXPECT_EQ(norm, SquaredNormForStatistics(Fp32(values))) << "must repeat bit for bit";
    // The exact sum agrees to its own precision.
    EXPECT_NEAR(SumOfSquaresOf(Fp32(values)), norm, 1e-6 * norm) << n;
  }
}

// The statistic's order is part of its contract (the noise scale it feeds is
// in the metrics): eight double lanes, element i in lane i % 8, each lane
// summed in index order, the lanes added 0 to 7. The vector kernel must give
// exactly the bits of this plain loop, tail lengths included.
double EightLaneLoop(const std::vector<float>& values) {
  double lanes[8] = {};
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    lanes[i % 8] += x * x;
  }
  double sum = 0.0;
  for (double lane : lanes) sum += lane;
  return sum;
}

TEST(DtypeKernelsTest, StatisticsNormHasTheBitsOfTheEightLaneLoop) {
  for (int64_t n : {1, 5, 8, 15, 16, 17, 31, 33, 1000, 100003}) {
    const std::vector<float> values = RandomGradients(n, static_cast<uint32_t>(n + 11));
    EXPECT_EQ(SquaredNormForStatistics(Fp32(values)), EightLaneLoop(values)) << "n = " << n;
  }
}

TEST(DtypeKernelsTest, StatisticsNormWidensBf16Exactly) {
  const std::vector<float> values = RandomGradients(4099, 3);
  std::vector<uint16_t> bf16(values.size());
  base::ToBf16(bf16.data(), values.data(), static_cast<int64_t>(values.size()));
  std::vector<float> widened(values.size());
  base::FromBf16(widened.data(), bf16.data(), static_cast<int64_t>(values.size()));
  const ConstDtypeSpan bf16_span = ConstDtypeSpan::Of(
      comm::Dtype::kBFloat16, reinterpret_cast<const std::byte*>(bf16.data()),
      static_cast<int64_t>(bf16.size()));
  EXPECT_EQ(SquaredNormForStatistics(bf16_span), SquaredNormForStatistics(Fp32(widened)));
}

TEST(DtypeKernelsTest, StatisticsNormOfEmptyAndZeroIsZero) {
  EXPECT_EQ(SquaredNormForStatistics(Fp32({})), 0.0);
  EXPECT_EQ(SquaredNormForStatistics(Fp32(std::vector<float>(17, 0.0f))), 0.0);
}

TEST(DtypeKernelsTest, ExactSumRepeatsAndItsPartsAddWithinRounding) {
  const std::vector<float> values = RandomGradients(1001, 9);
  const double whole = SumOfSquaresOf(Fp32(values));
  for (int64_t cut : {1, 100, 500, 1000}) {
    const std::vector<float> head(values.begin(), values.begin() + cut);
    const std::vector<float> tail(values.begin() + cut, values.end());
    // Each part's exact sum is rounded once, so parts add only within
    // rounding; the integer units are what add exactly (grad_clip.h). Here:
    // the whole is reproduced by the whole, and parts are close.
    EXPECT_NEAR(SumOfSquaresOf(Fp32(head)) + SumOfSquaresOf(Fp32(tail)), whole, 1e-12 * whole);
  }
  EXPECT_EQ(whole, SumOfSquaresOf(Fp32(values)));
}

}  // namespace
}  // namespace fsdp
