// File: tests/fsdp/nn/fixed_point_sum_test.cc
//
// The exact fixed-point sums ([Note: exact fixed-point sums]): every
// partition and order of the same contributions gives the same bits, in
// every ISA variant; the result is within the documented rounding of an
// independent long-double sum; and the edge cases (underflow, the bound,
// overflow and its redo, NaN and infinity, the contribution count) do what
// the header says.
#include "fsdp/nn/fixed_point_sum.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "fsdp/optim/grad_clip.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

using Contributions = std::vector<std::vector<float>>;

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// `count` contributions of `n` elements, magnitudes spread over 2^-30..2^5
// with random signs, a few exact zeros: every rounding case is exercised.
Contributions RandomContributions(int count, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(0.5f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 5);
  std::uniform_int_distribution<int> pick(0, 19);
  Contributions out(count, std::vector<float>(n));
  for (auto& c : out) {
    for (float& v : c) {
      const int kind = pick(rng);
      v = kind == 0 ? 0.0f : std::ldexp(mantissa(rng), exponent(rng)) * (kind % 2 ? 1 : -1);
    }
  }
  return out;
}

struct Summed {
  std::vector<int64_t> sum;
  float max_abs = 0.0f;
};

// The contributions in `order`, each added over the element range in pieces
// cut at `cuts` (so spans start at every alignment), with `isa`.
Summed AddInOrder(const Contributions& c, const std::vector<int>& order, int exponent,
                  const std::vector<size_t>& cuts, KernelIsa isa) {
  const size_t n = c.empty() ? 0 : c[0].size();
  Summed s{std::vector<int64_t>(n, 0), 0.0f};
  for (int k : order) {
    size_t begin = 0;
    for (size_t cut : cuts) {
      const size_t end = std::min(cut, n);
      if (end > begin) {
        s.max_abs = LargerMagnitude(
            s.max_abs, AddToExactSum(isa, exponent,
                                     absl::MakeConstSpan(c[k]).subspan(begin, end - begin),
                                     absl::MakeSpan(s.sum).subspan(begin, end - begin)));
        begin = end;
      }
    }
    if (begin < n) {
      s.max_abs = LargerMagnitude(
          s.max_abs, AddToExactSum(isa, exponent, absl::MakeConstSpan(c[k]).subspan(begin),
                                   absl::MakeSpan(s.sum).subspan(begin)));
    }
  }
  return s;
}

std::vector<float> ToFloats(int exponent, const Summed& s, int64_t divisor) {
  std::vector<float> out(s.sum.size());
  const absl::Status status = ExactSumToFloats(exponent, s.sum, divisor, s.max_abs,
                                               absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

float GlobalMax(const Contributions& c) {
  float m = 0.0f;
  for (const auto& v : c) m = LargerMagnitude(m, MaxAbs(v));
  return m;
}

TEST(ExactSumTest, EveryPartitionAndOrderGivesTheSameBits) {
  constexpr int kCount = 160, kElements = 53;  // 3 vectors of 16 lanes and a tail
  constexpr int64_t kDivisor = 160 * 7;
  const Contributions c = RandomContributions(kCount, kElements, 7);
  const int exponent = ExactExponentFor(GlobalMax(c), kExactHeadroomBits);
  std::vector<int> natural(kCount);
  for (int k = 0; k < kCount; ++k) natural[k] = k;
  const std::vector<float> reference =
      ToFloats(exponent, AddInOrder(c, natural, exponent, {}, KernelIsa::kGeneric), kDivisor);

  const std::vector<KernelIsa> isas = SupportedKernelIsas();
  std::mt19937 rng(11);
  int float_sums_differed = 0;  // the splits are real: plain fp32 sums move
  for (int trial = 0; trial < 200; ++trial) {
    // A random number of "ranks", each holding a random subset of the
    // contributions in a shuffled order, each adding with a random ISA and
    // random span cuts; their integer sums combined in a random order.
    const int parts = 1 + static_cast<int>(rng() % 9);
    std::vector<std::vector<int>> part_order(parts);
    for (int k = 0; k < kCount; ++k) part_order[rng() % parts].push_back(k);
    Summed total{std::vector<int64_t>(kElements, 0), 0.0f};
    std::vector<std::vector<float>> part_float(parts, std::vector<float>(kElements, 0.0f));
    std::vector<int> combine(parts);
    for (int p = 0; p < parts; ++p) combine[p] = p;
    std::shuffle(combine.begin(), combine.end(), rng);
    for (int p : combine) {
      std::shuffle(part_order[p].begin(), part_order[p].end(), rng);
      std::vector<size_t> cuts;
      for (size_t at = rng() % 20; at < kElements; at += 1 + rng() % 20) cuts.push_back(at);
      const Summed s = AddInOrder(c, part_order[p], exponent, cuts, isas[rng() % isas.size()]);
      for (int i = 0; i < kElements; ++i) total.sum[i] += s.sum[i];
      for (int k : part_order[p]) {
        for (int i = 0; i < kElements; ++i) part_float[p][i] += c[k][i];
      }
      total.max_abs = LargerMagnitude(total.max_abs, s.max_abs);
    }
    const std::vector<float> got = ToFloats(exponent, total, kDivisor);
    for (int i = 0; i < kElements; ++i) {
      ASSERT_EQ(Bits(got[i]), Bits(reference[i]))
          << "trial " << trial << ", " << parts << " parts, element " << i;
    }
    std::vector<float> float_total(kElements, 0.0f);
    for (int p : combine) {
      for (int i = 0; i < kElements; ++i) float_total[i] += part_float[p][i];
    }
    for (int i = 0; i < kElements; ++i) {
      float natural_sum = 0.0f;
      for (int k = 0; k < kCount; ++k) natural_sum += c[k][i];
      if (Bits(float_total[i]) != Bits(natural_sum)) {
        ++float_sums_differed;
        break;
      }
    }
  }
  EXPECT_GT(float_sums_differed, 100) << "the partitions hardly change a plain fp32 sum";
}

TEST(ExactSumTest, WithinTheRoundingOfAnIndependentSum) {
  constexpr int kCount = 300, kElements = 40;
  constexpr int64_t kDivisor = 300 * 64;
  const Contributions c = RandomContributions(kCount, kElements, 3);
  const int exponent = ExactExponentFor(GlobalMax(c), kExactHeadroomBits);
  std::vector<int> order(kCount);
  for (int k = 0; k < kCount; ++k) order[k] = k;
  const std::vector<float> got =
      ToFloats(exponent, AddInOrder(c, order, exponent, {}, BestKernelIsa()), kDivisor);
  const long double quantum = std::ldexp(1.0L, exponent - kExactFractionBits);
  for (int i = 0; i < kElements; ++i) {
    long double exact = 0;
    for (const auto& v : c) exact += v[i];
    exact /= kDivisor;
    // Each contribution rounds by at most half a quantum; the conversion to
    // fp32 by half an ulp (and a few double roundings far below it).
    const long double bound = kCount * quantum / 2 / kDivisor +
                              std::fabs(exact) * std::ldexp(1.0L, -23);
    EXPECT_LE(std::fabs(static_cast<long double>(got[i]) - exact), bound) << "element " << i;
  }
}

TEST(ExactSumTest, UnderflowRoundsToNearestEven) {
  const int e = 0;  // quantum 2^-43
  const float q = std::ldexp(1.0f, -kExactFractionBits);
  const std::vector<float> x = {q / 4, q / 2, 3 * q / 2, -3 * q / 2, 5 * q / 2, -q / 2, q};
  const std::vector<int64_t> expected = {0, 0, 2, -2, 2, 0, 1};
  for (KernelIsa isa : SupportedKernelIsas()) {
    std::vector<int64_t> sum(x.size(), 0);
    EXPECT_EQ(AddToExactSum(isa, e, x, absl::MakeSpan(sum)), 5 * q / 2);
    EXPECT_EQ(sum, expected) << KernelIsaName(isa);
  }
  // A tensor of contributions all under half a quantum sums to exactly 0,
  // however many there are.
  std::vector<int64_t> sum(1, 0);
  for (int k = 0; k < 1000; ++k) AddToExactSum(e, std::vector<float>{q / 3}, absl::MakeSpan(sum));
  EXPECT_EQ(sum[0], 0);
}

TEST(ExactSumTest, TheBoundItselfFitsAndAnythingAboveOverflows) {
  for (int e : {-20, 0, 7}) {
    const float bound = std::ldexp(1.0f, e);
    std::vector<int64_t> sum(2, 0);
    const float m = AddToExactSum(e, std::vector<float>{bound, -bound}, absl::MakeSpan(sum));
    EXPECT_EQ(ExactSumStateOf(m, e), ExactSumState::kExact);
    EXPECT_EQ(sum[0], int64_t{1} << kExactFractionBits);
    EXPECT_EQ(sum[1], -(int64_t{1} << kExactFractionBits));
    const float above = std::nextafter(bound, 1e30f);
    EXPECT_EQ(ExactSumStateOf(above, e), ExactSumState::kOverflow);
  }
}

TEST(ExactSumTest, OverflowIsRefusedAndOneRedoFitsEveryContribution) {
  const Contributions c = RandomContributions(50, 21, 5);
  const float max_abs = GlobalMax(c);
  const int too_small = ExactExponentFor(max_abs, 0) - 4;
  std::vector<int> order(c.size());
  for (size_t k = 0; k < c.size(); ++k) order[k] = static_cast<int>(k);
  const Summed first = AddInOrder(c, order, too_small, {}, BestKernelIsa());
  EXPECT_EQ(first.max_abs, max_abs);
  EXPECT_EQ(ExactSumStateOf(first.max_abs, too_small), ExactSumState::kOverflow);
  std::vector<float> out(21, 123.0f);
  const absl::Status refused =
      ExactSumToFloats(too_small, first.sum, 50, first.max_abs, absl::MakeSpan(out));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(out, std::vector<float>(21, 123.0f)) << "written on error";

  // The redo's exponent comes from the agreed maximum alone, so every split
  // of the contributions redoes with the same one, and it fits all of them.
  const int redo = ExactExponentFor(first.max_abs, 0);
  const Summed second = AddInOrder(c, order, redo, {}, BestKernelIsa());
  EXPECT_EQ(ExactSumStateOf(second.max_abs, redo), ExactSumState::kExact);
  std::reverse(order.begin(), order.end());
  const Summed reversed = AddInOrder(c, order, redo, {5, 17}, KernelIsa::kGeneric);
  EXPECT_EQ(ToFloats(redo, second, 50), ToFloats(redo, reversed, 50));
}

TEST(ExactSumTest, NanOrInfinityMakesTheWholeTensorNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {nan, inf, -inf}) {
    for (KernelIsa isa : SupportedKernelIsas()) {
      Contributions c = RandomContributions(6, 19, 9);
      c[3][17] = bad;  // in the scalar tail
      c[4][2] = bad;   // in a vector
      std::vector<int> order = {5, 3, 0, 4, 1, 2};
      const Summed s = AddInOrder(c, order, 10, {}, isa);
      EXPECT_EQ(ExactSumStateOf(s.max_abs, 10), ExactSumState::kNonFinite);
      if (std::isnan(bad)) {
        EXPECT_TRUE(std::isnan(s.max_abs));
      }
      const std::vector<float> out = ToFloats(10, s, 6);
      for (float v : out) EXPECT_TRUE(std::isnan(v)) << KernelIsaName(isa);
    }
  }
  // NaN wins over infinity in whichever order the maxima meet.
  EXPECT_TRUE(std::isnan(LargerMagnitude(inf, nan)));
  EXPECT_TRUE(std::isnan(LargerMagnitude(nan, -inf)));
}

TEST(ExactSumTest, TheLargestCountOfContributionsAtTheBoundDoesNotOverflow) {
  const int e = 2;
  std::vector<int64_t> sum(2, 0);
  const std::vector<float> x = {4.0f, -4.0f};
  for (int64_t k = 0; k < kExactMaxContributions; ++k) AddToExactSum(e, x, absl::MakeSpan(sum));
  const int64_t expected = kExactMaxContributions << kExactFractionBits;
  EXPECT_EQ(sum[0], expected);
  EXPECT_EQ(sum[1], -expected);
  std::vector<float> out(2);
  ASSERT_TRUE(ExactSumToFloats(e, sum, 1, 4.0f, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out[0], 4.0f * static_cast<float>(kExactMaxContributions));
  EXPECT_EQ(out[1], -out[0]);
  EXPECT_TRUE(CheckExactContributionCount(kExactMaxContributions).ok());
  EXPECT_EQ(CheckExactContributionCount(kExactMaxContributions + 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckExactContributionCount(0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExactSumTest, ExponentForAMaximum) {
  EXPECT_EQ(ExactExponentFor(1.0f, 0), 0);
  EXPECT_EQ(ExactExponentFor(1.5f, 0), 1);
  EXPECT_EQ(ExactExponentFor(0.75f, 0), 0);
  EXPECT_EQ(ExactExponentFor(0.5f, 0), -1);
  EXPECT_EQ(ExactExponentFor(1.0f, kExactHeadroomBits), kExactHeadroomBits);
  EXPECT_EQ(ExactExponentFor(std::ldexp(1.0f, -149), 0), -149);
  EXPECT_EQ(ExactExponentFor(0.0f, 0), kExactMinExponent);
  EXPECT_EQ(ExactExponentFor(FLT_MAX, 0), 128);
  EXPECT_EQ(ExactExponentFor(FLT_MAX, 100), kExactMaxExponent);
  // The exponent of a maximum always holds it, and one less would not.
  for (float m : {3.0f, 1e-20f, 6.5e7f, 1.0f / 3}) {
    const int e = ExactExponentFor(m, 0);
    EXPECT_EQ(ExactSumStateOf(m, e), ExactSumState::kExact) << m;
    EXPECT_EQ(ExactSumStateOf(m, e - 1), ExactSumState::kOverflow) << m;
  }
}

TEST(ExactSumTest, BadArgumentsAreRefused) {
  std::vector<int64_t> sum(3, 0);
  std::vector<float> out(2);
  EXPECT_EQ(ExactSumToFloats(0, sum, 1, 0.0f, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  out.resize(3);
  EXPECT_EQ(ExactSumToFloats(0, sum, 0, 0.0f, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_STREQ(ExactSumStateName(ExactSumState::kNonFinite), "non-finite");
}

TEST(ExactSumTest, InPlaceConversionMatchesTheSeparateOneSegmentBySegment) {
  // A region of 3 tensors with a gap before, between and after them.
  std::mt19937 rng(17);
  std::uniform_int_distribution<int64_t> value(-(int64_t{1} << 50), int64_t{1} << 50);
  const int64_t n = 41;
  std::vector<int64_t> region(n, 0);
  const std::vector<ExactSegment> segments = {
      {2, 11, 3, 5.0f}, {11, 20, -4, 0.05f}, {25, 38, 7, std::numeric_limits<float>::infinity()}};
  for (const ExactSegment& seg : segments) {
    for (int64_t i = seg.begin; i < seg.end; ++i) region[i] = value(rng);
  }
  const std::vector<int64_t> sums = region;
  ASSERT_TRUE(ExactSumsToFloatsInPlace(absl::MakeSpan(region), segments, 96).ok());
  std::vector<float> converted(n);
  std::memcpy(converted.data(), region.data(), n * sizeof(float));
  int64_t next = 0;
  for (const ExactSegment& seg : segments) {
    for (; next < seg.begin; ++next) EXPECT_EQ(Bits(converted[next]), Bits(0.0f)) << next;
    const int64_t len = seg.end - seg.begin;
    std::vector<float> want(len);
    ASSERT_TRUE(ExactSumToFloats(seg.exponent, absl::MakeConstSpan(sums).subspan(seg.begin, len),
                                 96, seg.max_abs, absl::MakeSpan(want))
                    .ok());
    for (int64_t i = 0; i < len; ++i) {
      EXPECT_EQ(Bits(converted[seg.begin + i]), Bits(want[i])) << seg.begin + i;
    }
    next = seg.end;
  }
  for (; next < n; ++next) EXPECT_EQ(Bits(converted[next]), Bits(0.0f)) << next;
}

TEST(ExactSumTest, InPlaceConversionRefusesOverflowAndBadSegmentsWritingNothing) {
  std::vector<int64_t> region(8, 5);
  const std::vector<int64_t> before = region;
  const std::vector<ExactSegment> overflow = {{0, 4, 0, 0.5f}, {4, 8, 0, 3.0f}};
  absl::Status s = ExactSumsToFloatsInPlace(absl::MakeSpan(region), overflow, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(region, before);
  const std::vector<ExactSegment> overlapping = {{0, 5, 0, 0.5f}, {4, 8, 0, 0.5f}};
  s = ExactSumsToFloatsInPlace(absl::MakeSpan(region), overlapping, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  const std::vector<ExactSegment> outside = {{4, 9, 0, 0.5f}};
  s = ExactSumsToFloatsInPlace(absl::MakeSpan(region), outside, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = ExactSumsToFloatsInPlace(absl::MakeSpan(region), {}, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(region, before);
}

}  // namespace
}  // namespace fsdp
