// File: tests/fsdp/nn/vector_math_test.cc
//
// Sweeps the polynomial exp and tanh of fsdp/nn/simd.h against libm in
// double, for every ISA variant this CPU runs, and checks they agree bit for
// bit across variants; and simd.h's bf16 load and store over bit patterns.
#include "fsdp/nn/vector_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "base/bf16_convert.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

// Distance in units in the last place between two finite positive floats.
int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof(ia));
  std::memcpy(&ib, &b, sizeof(ib));
  return std::llabs(int64_t{ia} - int64_t{ib});
}

std::vector<float> Sweep(float lo, float hi, int count) {
  std::vector<float> x(count);
  for (int i = 0; i < count; ++i) x[i] = lo + (hi - lo) * (static_cast<float>(i) / (count - 1));
  return x;
}

TEST(VectorMathTest, ExpIsWithinTwoUlpOverTheNormalRange) {
  // An odd count: the last block is partial.
  const std::vector<float> x = Sweep(-87.3f, 88.0f, 200001);
  for (KernelIsa isa : SupportedKernelIsas()) {
    std::vector<float> y(x.size());
    VectorExp(isa, y.data(), x.data(), x.size());
    int64_t worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float exact = static_cast<float>(std::exp(double{x[i]}));
      worst = std::max(worst, UlpDistance(y[i], exact));
    }
    EXPECT_LE(worst, 2) << KernelIsaName(isa);
  }
}

TEST(VectorMathTest, ExpEdgesUnderflowOverflowAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf, -1000.0f, -87.5f, 0.0f, 88.5f, 1000.0f, inf, nan};
  for (KernelIsa isa : SupportedKernelIsas()) {
    std::vector<float> y(x.size());
    VectorExp(isa, y.data(), x.data(), x.size());
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_EQ(y[2], 0.0f);  // would be subnormal: flushed to 0
    EXPECT_EQ(y[3], 1.0f);
    EXPECT_EQ(y[4], inf);  // above 88: documented as +inf
    EXPECT_EQ(y[5], inf);
    EXPECT_EQ(y[6], inf);
    EXPECT_TRUE(std::isnan(y[7])) << KernelIsaName(isa);
  }
}

TEST(VectorMathTest, TanhIsWithinThreeTenthsOfAMillionthAbsolute) {
  const std::vector<float> x = Sweep(-12.0f, 12.0f, 100003);
  std::vector<float> generic(x.size());
  VectorTanh(KernelIsa::kGeneric, generic.data(), x.data(), x.size());
  for (KernelIsa isa : SupportedKernelIsas()) {
    std::vector<float> y(x.size());
    VectorTanh(isa, y.data(), x.data(), x.size());
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(y[i] - std::tanh(double{x[i]})));
    }
    EXPECT_LE(worst, 3e-7) << KernelIsaName(isa);
    EXPECT_EQ(std::memcmp(y.data(), generic.data(), y.size() * sizeof(float)), 0)
        << KernelIsaName(isa);
  }
  const std::vector<float> big = {-100.0f, 100.0f};
  std::vector<float> out(2);
  VectorTanh(KernelIsa::kGeneric, out.data(), big.data(), 2);
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], 1.0f);
}

// Every bf16 bit pattern (NaNs and infinities included) widened by the
// vector load becomes the float whose top half it is; 65,536 + 7 values, so
// the last block goes through the partial load.
TEST(VectorMathTest, WidenBf16GivesEveryPatternItsExactFloat) {
  std::vector<uint16_t> bits(65536 + 7);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i * 40503u);
  for (KernelIsa isa : SupportedKernelIsas()) {
    std::vector<float> y(bits.size());
    VectorWidenBf16(isa, y.data(), bits.data(), static_cast<int64_t>(bits.size()));
    for (size_t i = 0; i < bits.size(); ++i) {
      uint32_t got;
      std::memcpy(&got, &y[i], sizeof(got));
      ASSERT_EQ(got, uint32_t{bits[i]} << 16) << KernelIsaName(isa) << " at " << i;
    }
  }
}

// The rounding store against base::ToBf16 (itself checked against the integer
// formula over bit patterns in matmul_test): every top half with low halves
// around the rounding boundaries (ties to even and odd, just below and above)
// and at the ends, so NaNs, infinities, denormals, zeros and the largest
// finite values are all there; 2^16 * 8 + 5 values, the last block partial.
TEST(VectorMathTest, RoundBf16EqualsToBf16OverBitPatterns) {
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xc000, 0xffff};
  std::vector<float> x;
  for (uint32_t top = 0; top < 65536; ++top) {
    for (uint32_t low : lows) {
      const uint32_t bits = (top << 16) | low;
      float f;
      std::memcpy(&f, &bits, sizeof(f));
      x.push_back(f);
    }
  }
  for (int i = 0; i < 5; ++i) x.push_back(x[i * 1000 + 3]);
  std::vector<uint16_t> expected(x.size());
  base::ToBf16(expected.data(), x.data(), static_cast<int64_t>(x.size()));
  for (KernelIsa isa : SupportedKernelIsas()) {
    std::vector<uint16_t> got(x.size());
    VectorRoundBf16(isa, got.data(), x.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(got[i], expected[i]) << KernelIsaName(isa) << " at " << i;
    }
  }
}

TEST(KernelIsaTest, BestIsSupportedAndGenericAlwaysIs) {
  EXPECT_TRUE(KernelIsaSupported(KernelIsa::kGeneric));
  EXPECT_TRUE(KernelIsaSupported(BestKernelIsa()));
  EXPECT_EQ(SupportedKernelIsas().front(), KernelIsa::kGeneric);
  EXPECT_EQ(SupportedKernelIsas().back(), BestKernelIsa());
}

}  // namespace
}  // namespace fsdp
