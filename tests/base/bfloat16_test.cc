// File: tests/base/bfloat16_test.cc
//
// The bf16 value type and every conversion path against an independent
// reference: round to nearest, ties to even, decided in double arithmetic
// from the two bf16 neighbours of each float (not the integer formula under
// test). Swept over every sign and exponent and the mantissa tails that
// decide a rounding (exact, just below, at and just above the half), plus
// NaN, infinities and denormals; the bulk paths (AVX512_BF16, AVX-512
// integer, scalar, in place) must give the scalar bits on the same sweep.
#include "base/bfloat16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/bf16_convert.h"
#include "gtest/gtest.h"

namespace base {
namespace {

float FloatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint32_t BitsOfFloat(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// A bf16 pattern's value in double; the pattern just past the largest finite
// magnitude (the infinity's) counts as 2^128, the value it stands for when
// deciding a rounding.
double ValueOf(uint16_t b) {
  if ((b & 0x7fffu) == 0x7f80u) return (b & 0x8000u) ? -std::ldexp(1.0, 128) : std::ldexp(1.0, 128);
  return static_cast<double>(FloatOfBits(static_cast<uint32_t>(b) << 16));
}

uint16_t ReferenceRound(uint32_t bits) {
  const float f = FloatOfBits(bits);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  if (std::isinf(f)) return static_cast<uint16_t>(bits >> 16);
  const uint16_t toward_zero = static_cast<uint16_t>(bits >> 16);
  if ((bits & 0xffffu) == 0) return toward_zero;
  const uint16_t away = static_cast<uint16_t>(toward_zero + 1);
  const double x = static_cast<double>(f);
  const double below = std::fabs(x - ValueOf(toward_zero));
  const double above = std::fabs(ValueOf(away) - x);
  if (below < above) return toward_zero;
  if (above < below) return away;
  return (toward_zero & 1u) == 0 ? toward_zero : away;
}

// Every sign and exponent and the top mantissa bits (all 65536 top halves),
// each with the low halves that matter for rounding.
std::vector<uint32_t> SweepBits() {
  std::vector<uint32_t> out;
  for (uint32_t high = 0; high < 0x10000u; ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      out.push_back((high << 16) | low);
    }
  }
  return out;
}

TEST(Bf16Test, IsATwoByteTriviallyCopyableValue) {
  static_assert(sizeof(Bf16) == 2, "");
  static_assert(std::is_trivially_copyable<Bf16>::value, "");
  static_assert(!std::is_convertible<float, Bf16>::value, "no implicit rounding");
  static_assert(!std::is_convertible<Bf16, float>::value, "no implicit widening");
  const Bf16 h = Bf16::FromFloat(0.1f);
  EXPECT_EQ(h.bits, 0x3dcd);
  EXPECT_EQ(h.ToFloat(), 0.10009765625f);
  EXPECT_EQ(Bf16::FromBits(0x3f80).ToFloat(), 1.0f);
  EXPECT_EQ(Bf16::FromFloat(-2.0f), Bf16::FromBits(0xc000));
  EXPECT_NE(Bf16::FromFloat(0.0f), Bf16::FromFloat(-0.0f));
}

TEST(Bf16Test, RoundsToNearestTiesToEvenAgainstTheReference) {
  for (uint32_t bits : SweepBits()) {
    ASSERT_EQ(ToBf16Bits(FloatOfBits(bits)), ReferenceRound(bits)) << std::hex << bits;
  }
}

TEST(Bf16Test, TiesGoToTheEvenNeighbour) {
  // 1 + 2^-8 is halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81).
  EXPECT_EQ(ToBf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // Halfway between 0x3f81 (odd) and 0x3f82: up.
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x3f818000u)), 0x3f82);
  // Just past the half goes up, just below down.
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x3f807fffu)), 0x3f80);
  // Negative values mirror; denormals round the same way.
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0xbf818000u)), 0xbf82);
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x00008000u)), 0x0000);
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x00018000u)), 0x0002);
}

TEST(Bf16Test, NanStaysNanInfinityStaysInfinityAndOverflowRoundsToInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ToBf16Bits(inf), 0x7f80);
  EXPECT_EQ(ToBf16Bits(-inf), 0xff80);
  EXPECT_TRUE(std::isinf(FromBf16Bits(0x7f80)));
  // A signalling NaN whose top half alone would read as infinity is quieted.
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0xffc00000u)), 0xffc0);
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x7fffffffu)), 0x7fff);  // no carry into the sign
  EXPECT_TRUE(std::isnan(Bf16::FromFloat(std::nanf("")).ToFloat()));
  // The largest float is past the largest bf16's half ulp: infinity.
  EXPECT_EQ(ToBf16Bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(ToBf16Bits(FloatOfBits(0x7f7f7fffu)), 0x7f7f);
}

TEST(Bf16Test, WideningIsExactAndEveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = FromBf16Bits(bits);
    EXPECT_EQ(BitsOfFloat(f), b << 16);
    if (std::isnan(f)) {
      EXPECT_EQ(ToBf16Bits(f), bits | 0x0040u) << std::hex << b;  // quieted, still NaN
    } else {
      EXPECT_EQ(ToBf16Bits(f), bits) << std::hex << b;
    }
  }
}

// Lengths that leave a tail after the 16-lane blocks.
TEST(Bf16BulkTest, EveryPathGivesTheScalarBits) {
  const std::vector<uint32_t> sweep = SweepBits();
  for (const size_t n : {sweep.size(), sweep.size() - 7, size_t{15}, size_t{1}}) {
    std::vector<float> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = FloatOfBits(sweep[i]);
    std::vector<uint16_t> expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = ToBf16Bits(in[i]);
    std::vector<uint16_t> best(n), integer(n);
    ToBf16(best.data(), in.data(), static_cast<int64_t>(n));
    ToBf16IntegerPath(integer.data(), in.data(), static_cast<int64_t>(n));
    EXPECT_EQ(best, expected) << ToBf16PathName() << ", n " << n;
    EXPECT_EQ(integer, expected) << "n " << n;
    std::vector<float> in_place = in;
    ToBf16InPlace(in_place.data(), static_cast<int64_t>(n));
    EXPECT_EQ(std::memcmp(in_place.data(), expected.data(), 2 * n), 0) << "n " << n;

    std::vector<float> widened(n);
    FromBf16(widened.data(), expected.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(BitsOfFloat(widened[i]), static_cast<uint32_t>(expected[i]) << 16) << i;
    }
  }
}

TEST(Bf16BulkTest, ScaleAccumulateAndRoundThroughMatchTheScalarFormulas) {
  const std::vector<uint32_t> sweep = SweepBits();
  const size_t n = 100003;  // a tail after the blocks of 16 and of kWidenBlock
  std::vector<uint16_t> data(n), acc(n);
  std::vector<float> add(n), through(n);
  for (size_t i = 0; i < n; ++i) {
    data[i] = static_cast<uint16_t>(sweep[(i * 7919) % sweep.size()] >> 16);
    acc[i] = data[(i * 31) % n];
    add[i] = FloatOfBits(sweep[(i * 104729) % sweep.size()]);
    through[i] = add[i];
  }
  std::vector<uint16_t> scaled = data, accumulated = acc;
  ScaleBf16InPlace(scaled.data(), static_cast<int64_t>(n), 0.37f);
  AccumulateToBf16(accumulated.data(), add.data(), static_cast<int64_t>(n));
  RoundThroughBf16(through.data(), static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(scaled[i], ToBf16Bits(FromBf16Bits(data[i]) * 0.37f)) << i;
    ASSERT_EQ(accumulated[i], ToBf16Bits(FromBf16Bits(acc[i]) + add[i])) << i;
    ASSERT_EQ(BitsOfFloat(through[i]), static_cast<uint32_t>(ToBf16Bits(add[i])) << 16) << i;
  }
}

}  // namespace
}  // namespace base
