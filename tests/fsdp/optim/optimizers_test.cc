// File: tests/fsdp/optim/optimizers_test.cc
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/bf16_convert.h"
#include "fsdp/optim/adamw.h"
#include "fsdp/optim/grad_clip.h"
#include "fsdp/optim/sgd.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

std::vector<float> Random(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(AdamWTest, MatchesADoublePrecisionReferenceOverSeveralSteps) {
  const int n = 33;
  const AdamWOptions o{0.9f, 0.95f, 1e-8f, 0.1f};
  MemoryTracker tracker;
  absl::StatusOr<AdamW> adam = AdamW::Create(o, n, &tracker);
  ASSERT_TRUE(adam.ok()) << adam.status();
  EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kOptimizerState), 2 * 4 * n);
  std::vector<float> p = Random(n, 1);
  std::vector<double> ref_p(p.begin(), p.end()), m(n, 0.0), v(n, 0.0);
  for (int t = 1; t <= 4; ++t) {
    const std::vector<float> g = Random(n, 100 + t);
    const float lr = 0.01f * t;
    ASSERT_TRUE(adam->Step(lr, absl::MakeSpan(p), g).ok());
    for (int i = 0; i < n; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.95 * v[i] + 0.05 * double{g[i]} * g[i];
      const double m_hat = m[i] / (1 - std::pow(0.9, t));
      const double v_hat = v[i] / (1 - std::pow(0.95, t));
      ref_p[i] -= lr * (m_hat / (std::sqrt(v_hat) + 1e-8) + 0.1 * ref_p[i]);
    }
  }
  for (int i = 0; i < n; ++i) EXPECT_NEAR(p[i], ref_p[i], 1e-5 * (1 + std::fabs(ref_p[i])));
  EXPECT_EQ(adam->step(), 4);
}

TEST(AdamWTest, FirstStepMovesEachParameterByLrTimesTheGradientSign) {
  // With bias correction, m_hat = g and v_hat = g^2 on step 1.
  MemoryTracker tracker;
  absl::StatusOr<AdamW> adam = AdamW::Create(AdamWOptions{}, 4, &tracker);
  ASSERT_TRUE(adam.ok());
  std::vector<float> p = {1, 1, 1, 1};
  const std::vector<float> g = {3.0f, -0.001f, 50.0f, -7.0f};
  ASSERT_TRUE(adam->Step(0.1f, absl::MakeSpan(p), g).ok());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p[i], 1.0f - 0.1f * (g[i] > 0 ? 1 : -1), 1e-5);
}

TEST(AdamWTest, UpdatingInArbitrarySlicesIsBitIdenticalToTheWholeVector) {
  const int n = 1001;
  const AdamWOptions o{0.9f, 0.999f, 1e-8f, 0.01f};
  std::vector<float> whole_p = Random(n, 2), whole_m(n), whole_v(n);
  std::vector<float> sliced_p = whole_p, sliced_m(n), sliced_v(n);
  std::mt19937 rng(5);
  for (int t = 1; t <= 5; ++t) {
    const std::vector<float> g = Random(n, 200 + t);
    AdamWUpdate(o, 1e-3f, t, absl::MakeSpan(whole_p), g, absl::MakeSpan(whole_m),
                absl::MakeSpan(whole_v));
    // Random cut points, different every step (like changing shard layouts).
    int start = 0;
    while (start < n) {
      const int len = std::min<int>(n - start, 1 + rng() % 97);
      AdamWUpdate(o, 1e-3f, t, absl::MakeSpan(sliced_p).subspan(start, len),
                  absl::MakeConstSpan(g).subspan(start, len),
                  absl::MakeSpan(sliced_m).subspan(start, len),
                  absl::MakeSpan(sliced_v).subspan(start, len));
      start += len;
    }
  }
  EXPECT_EQ(0, std::memcmp(whole_p.data(), sliced_p.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(whole_m.data(), sliced_m.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(whole_v.data(), sliced_v.data(), n * sizeof(float)));
}

TEST(AdamWTest, RejectsBadOptionsAndMismatchedSpans) {
  MemoryTracker tracker;
  EXPECT_EQ(AdamW::Create(AdamWOptions{1.0f, 0.9f, 1e-8f, 0}, 4, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdamW::Create(AdamWOptions{0.9f, 0.9f, 0.0f, 0}, 4, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<AdamW> adam = AdamW::Create(AdamWOptions{}, 4, &tracker);
  ASSERT_TRUE(adam.ok());
  std::vector<float> p(5), g(5);
  EXPECT_EQ(adam->Step(0.1f, absl::MakeSpan(p), g).code(), absl::StatusCode::kInvalidArgument);
  MemoryTracker small(16);
  EXPECT_EQ(AdamW::Create(AdamWOptions{}, 4, &small).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(SgdTest, MomentumMatchesReferenceAndSlicingIsBitIdentical) {
  const int n = 50;
  const SgdOptions o{0.9f, 0.01f};
  MemoryTracker tracker;
  absl::StatusOr<Sgd> sgd = Sgd::Create(o, n, &tracker);
  ASSERT_TRUE(sgd.ok());
  EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kOptimizerState), 4 * n);
  std::vector<float> p = Random(n, 3), sliced = p, buf(n);
  std::vector<double> ref(p.begin(), p.end()), ref_buf(n);
  for (int t = 0; t < 4; ++t) {
    const std::vector<float> g = Random(n, 300 + t);
    ASSERT_TRUE(sgd->Step(0.05f, absl::MakeSpan(p), g).ok());
    SgdUpdate(o, 0.05f, t == 0, absl::MakeSpan(sliced).subspan(0, 17),
              absl::MakeConstSpan(g).subspan(0, 17), absl::MakeSpan(buf).subspan(0, 17));
    SgdUpdate(o, 0.05f, t == 0, absl::MakeSpan(sliced).subspan(17),
              absl::MakeConstSpan(g).subspan(17), absl::MakeSpan(buf).subspan(17));
    for (int i = 0; i < n; ++i) {
      const double d = g[i] + 0.01 * ref[i];
      ref_buf[i] = t == 0 ? d : 0.9 * ref_buf[i] + d;
      ref[i] -= 0.05 * ref_buf[i];
    }
  }
  for (int i = 0; i < n; ++i) EXPECT_NEAR(p[i], ref[i], 1e-5);
  EXPECT_EQ(p, sliced);
  // No momentum: no state.
  MemoryTracker plain_tracker;
  ASSERT_TRUE(Sgd::Create(SgdOptions{0.0f, 0.0f}, n, &plain_tracker).ok());
  EXPECT_EQ(plain_tracker.Snapshot().current_total_bytes, 0);
}

// The sharded form of [Note: exact sum of squares]: the ranks' shards of
// one vector, the maximum and the integer sums combined across them.
double ShardedSumOfSquares(const std::vector<absl::Span<const float>>& shards) {
  float max_abs = 0.0f;
  for (auto shard : shards) max_abs = LargerMagnitude(max_abs, MaxAbs(shard));
  if (!std::isfinite(max_abs)) return static_cast<double>(max_abs) * max_abs;
  if (max_abs == 0.0f) return 0.0;
  const int exponent = SquareUnitExponent(max_abs);
  SquareUnits total = 0;
  for (auto shard : shards) total += SumOfSquareUnits(shard, exponent);
  return SquareSumFromUnits(total, exponent);
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

TEST(GradClipTest, SumOfSquaresIsTheSameForEverySplit) {
  // Magnitudes over 12 binades, so the partial sums round differently.
  std::vector<float> g = Random(1000, 4);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::ldexp(g[i], static_cast<int>(i % 12) - 6);
  const absl::Span<const float> all(g);
  const double whole = SumOfSquares(all);
  long double exact = 0.0L;
  for (float x : g) exact += static_cast<long double>(x) * x;
  // Within n 2^-51 of the largest square (the documented bound).
  const double max_sq = double{MaxAbs(all)} * MaxAbs(all);
  EXPECT_NEAR(whole, static_cast<double>(exact), 1000 * std::ldexp(max_sq, -51));
  // Two, three and many shards, every cut point: bit-identical, where the
  // double sums of the old kernel added as floats differed.
  int float_sums_differ = 0;
  for (int cut = 0; cut <= 1000; ++cut) {
    const double two = ShardedSumOfSquares({all.subspan(0, cut), all.subspan(cut)});
    ASSERT_TRUE(SameBits(two, whole)) << "cut at " << cut;
    const int third = cut / 3;
    ASSERT_TRUE(SameBits(ShardedSumOfSquares({all.subspan(0, third),
                                              all.subspan(third, cut - third),
                                              all.subspan(cut)}),
                         whole))
        << "cuts at " << third << ", " << cut;
    double head = 0.0, tail = 0.0;
    for (int i = 0; i < cut; ++i) head += double{g[i]} * g[i];
    for (int i = cut; i < 1000; ++i) tail += double{g[i]} * g[i];
    const float as_floats = static_cast<float>(head) + static_cast<float>(tail);
    if (as_floats != static_cast<float>(head + tail)) ++float_sums_differ;
  }
  EXPECT_GT(float_sums_differ, 0) << "the split this test guards against never mattered";
  std::vector<absl::Span<const float>> singles;
  for (size_t i = 0; i < g.size(); ++i) singles.push_back(all.subspan(i, 1));
  EXPECT_TRUE(SameBits(ShardedSumOfSquares(singles), whole));
}

TEST(GradClipTest, LongSpansFlushTheLaneSums) {
  // 1024 vectors of 16 per flush: 300,001 elements flush 18 times, with
  // every square close to the largest one (the lanes' worst case).
  std::vector<float> g(300001);
  for (size_t i = 0; i < g.size(); ++i) g[i] = (i % 2 ? -1.0f : 1.0f) * (1.0f - 1e-7f * (i % 7));
  const absl::Span<const float> all(g);
  // The exact sum, in integers: every |g_i| is k 2^-24 with k < 2^24, so
  // g_i^2 = k^2 2^-48 (a long double sum would be off by up to 4e-9 here).
  unsigned __int128 k_squares = 0;
  for (float x : g) {
    const auto k = static_cast<uint64_t>(std::ldexp(std::fabs(x), 24));
    k_squares += static_cast<unsigned __int128>(k * k);
  }
  const long double exact = std::ldexp(static_cast<long double>(k_squares), -48);
  const double whole = SumOfSquares(all);
  EXPECT_NEAR(whole, static_cast<double>(exact), 300001 * std::ldexp(1.0, -51));
  for (int cut : {1, 16384, 16385, 150000, 299999}) {
    EXPECT_TRUE(SameBits(ShardedSumOfSquares({all.subspan(0, cut), all.subspan(cut)}), whole))
        << "cut at " << cut;
  }
}

TEST(GradClipTest, LargestMagnitudeAndSpecialValues) {
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> g = {1.0f, -3.0f, 2.0f};
  EXPECT_EQ(MaxAbs(g), 3.0f);
  EXPECT_EQ(MaxAbs(absl::Span<const float>()), 0.0f);
  EXPECT_EQ(LargerMagnitude(-5.0f, 4.0f), 5.0f);
  EXPECT_EQ(LargerMagnitude(inf, 4.0f), inf);
  EXPECT_TRUE(std::isnan(LargerMagnitude(inf, nan)));
  EXPECT_TRUE(std::isnan(LargerMagnitude(nan, inf)));
  EXPECT_TRUE(std::isnan(SumOfSquares(std::vector<float>{1.0f, nan, -inf})));
  EXPECT_EQ(SumOfSquares(std::vector<float>{1.0f, -inf}), inf);
  EXPECT_EQ(SumOfSquares(std::vector<float>{0.0f, -0.0f}), 0.0);
  // The extremes of the float range keep their squares.
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(SumOfSquares(std::vector<float>{tiny, -tiny}), 2.0 * tiny * tiny);
  const float huge = std::numeric_limits<float>::max();
  EXPECT_EQ(SumOfSquares(std::vector<float>{huge}), double{huge} * huge);
  // Squares (0.75^2 = 0.5625) exactly representable in the units come out exact.
  EXPECT_EQ(SumOfSquares(std::vector<float>{0.75f, -0.5f, 0.25f}), 0.5625 + 0.25 + 0.0625);
}

// What --precision=bf16 did before the one-pass step: widen the whole bf16
// gradient, scale it, step, round the parameters to bf16.
std::vector<uint16_t> RoundedToBf16(const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  base::ToBf16(out.data(), values.data(), static_cast<int64_t>(values.size()));
  return out;
}

std::vector<float> WidenedAndScaled(const std::vector<uint16_t>& grads, float scale) {
  std::vector<float> out(grads.size());
  base::FromBf16(out.data(), grads.data(), static_cast<int64_t>(grads.size()));
  if (scale != 1.0f) {
    for (float& g : out) g *= scale;
  }
  return out;
}

// Three steps from the same start: `fused` given the clip scale, `plain`
// given gradients scaled beforehand. True if the parameters end the same bits.
template <typename Opt>
bool ScaleInTheUpdateMatches(Opt& fused, Opt& plain, float lr, float scale, int n, uint32_t seed) {
  std::vector<float> p_fused = Random(n, seed), p_plain = p_fused;
  for (int t = 0; t < 3; ++t) {
    const std::vector<float> g = Random(n, seed + 1 + t);
    std::vector<float> scaled = g;
    for (float& x : scaled) x *= scale;
    if (!fused.Step(lr, absl::MakeSpan(p_fused), g, scale).ok()) return false;
    if (!plain.Step(lr, absl::MakeSpan(p_plain), scaled).ok()) return false;
  }
  return std::memcmp(p_fused.data(), p_plain.data(), n * sizeof(float)) == 0;
}

// The clip scale given to the update equals scaling the gradients in place
// first, bit for bit (AdamW; SGD with and without momentum), and a scale of
// 1 changes nothing.
TEST(GradScaleTest, ScaleInTheUpdateEqualsScaledGradients) {
  const int n = 1000;
  for (const float scale : {0.37f, 1.0f, 1e-3f}) {
    MemoryTracker tracker;
    const AdamWOptions adam{0.9f, 0.999f, 1e-8f, 0.01f};
    absl::StatusOr<AdamW> adam_fused = AdamW::Create(adam, n, &tracker);
    absl::StatusOr<AdamW> adam_plain = AdamW::Create(adam, n, &tracker);
    ASSERT_TRUE(adam_fused.ok() && adam_plain.ok());
    EXPECT_TRUE(ScaleInTheUpdateMatches(*adam_fused, *adam_plain, 1e-3f, scale, n, 70)) << scale;
    for (const SgdOptions o : {SgdOptions{0.9f, 0.01f}, SgdOptions{0.0f, 0.0f}}) {
      absl::StatusOr<Sgd> sgd_fused = Sgd::Create(o, n, &tracker);
      absl::StatusOr<Sgd> sgd_plain = Sgd::Create(o, n, &tracker);
      ASSERT_TRUE(sgd_fused.ok() && sgd_plain.ok());
      EXPECT_TRUE(ScaleInTheUpdateMatches(*sgd_fused, *sgd_plain, 0.05f, scale, n, 80))
          << scale << ", momentum " << o.momentum;
    }
  }
}

// Several blocks of ForEachWidenedBlock and a ragged tail, three steps with
// and without a clip scale: StepBf16 equals the widened Step bit for bit,
// in the parameters, their bf16 copies and the moments.
TEST(AdamWTest, Bf16StepEqualsWideningThenStepThenRounding) {
  const int n = 3 * static_cast<int>(base::kWidenBlock) + 37;
  const AdamWOptions o{0.9f, 0.999f, 1e-8f, 0.01f};
  MemoryTracker tracker;
  absl::StatusOr<AdamW> fused = AdamW::Create(o, n, &tracker);
  absl::StatusOr<AdamW> plain = AdamW::Create(o, n, &tracker);
  ASSERT_TRUE(fused.ok() && plain.ok());
  std::vector<float> p_fused = Random(n, 41), p_plain = p_fused;
  std::vector<uint16_t> p16_fused(n), p16_plain(n);
  const float scales[] = {1.0f, 0.37f, 1.0f};
  for (int t = 0; t < 3; ++t) {
    const std::vector<uint16_t> g16 = RoundedToBf16(Random(n, 400 + t));
    ASSERT_TRUE(fused->StepBf16(1e-3f, absl::MakeSpan(p_fused), g16, scales[t],
                                absl::MakeSpan(p16_fused)).ok());
    ASSERT_TRUE(plain->Step(1e-3f, absl::MakeSpan(p_plain), WidenedAndScaled(g16, scales[t])).ok());
    p16_plain = RoundedToBf16(p_plain);
  }
  EXPECT_EQ(0, std::memcmp(p_fused.data(), p_plain.data(), n * sizeof(float)));
  EXPECT_EQ(p16_fused, p16_plain);
  EXPECT_EQ(0, std::memcmp(fused->first_moment().data(), plain->first_moment().data(),
                           n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(fused->second_moment().data(), plain->second_moment().data(),
                           n * sizeof(float)));
  EXPECT_EQ(fused->step(), 3);
  // A span of the wrong length changes nothing and says which.
  std::vector<uint16_t> short16(n - 1);
  const absl::Status bad =
      fused->StepBf16(1e-3f, absl::MakeSpan(p_fused), short16, 1.0f, absl::MakeSpan(p16_fused));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("bf16 gradients"), std::string::npos) << bad.message();
  EXPECT_EQ(fused->step(), 3);
}

TEST(SgdTest, Bf16StepEqualsWideningThenStepThenRounding) {
  const int n = 2 * static_cast<int>(base::kWidenBlock) + 5;
  for (const SgdOptions o : {SgdOptions{0.9f, 0.01f}, SgdOptions{0.0f, 0.0f}}) {
    MemoryTracker tracker;
    absl::StatusOr<Sgd> fused = Sgd::Create(o, n, &tracker);
    absl::StatusOr<Sgd> plain = Sgd::Create(o, n, &tracker);
    ASSERT_TRUE(fused.ok() && plain.ok());
    std::vector<float> p_fused = Random(n, 51), p_plain = p_fused;
    std::vector<uint16_t> p16_fused(n);
    for (int t = 0; t < 3; ++t) {
      const std::vector<uint16_t> g16 = RoundedToBf16(Random(n, 500 + t));
      ASSERT_TRUE(fused->StepBf16(0.05f, absl::MakeSpan(p_fused), g16, 0.5f,
                                  absl::MakeSpan(p16_fused)).ok());
      ASSERT_TRUE(plain->Step(0.05f, absl::MakeSpan(p_plain), WidenedAndScaled(g16, 0.5f)).ok());
    }
    EXPECT_EQ(0, std::memcmp(p_fused.data(), p_plain.data(), n * sizeof(float)))
        << "momentum " << o.momentum;
    EXPECT_EQ(p16_fused, RoundedToBf16(p_plain)) << "momentum " << o.momentum;
  }
}

// The norm's two passes read bf16 gradients directly: the same maximum and
// the same integer sum as on the widened values, special values included,
// in every ISA variant the CPU runs (a ragged tail after the whole vectors).
TEST(GradClipTest, Bf16PassesEqualTheWidenedOnes) {
  for (KernelIsa isa : SupportedKernelIsas()) {
    SCOPED_TRACE(KernelIsaName(isa));
    std::vector<float> g = Random(2 * static_cast<int>(base::kWidenBlock) + 300 + 7, 61);
    std::vector<uint16_t> g16 = RoundedToBf16(g);
    std::vector<float> widened = WidenedAndScaled(g16, 1.0f);
    const float max_abs = MaxAbs(widened);
    EXPECT_EQ(MaxAbsBf16(isa, g16), max_abs);
    const int e = SquareUnitExponent(max_abs);
    EXPECT_TRUE(SumOfSquareUnitsBf16(isa, g16, e) == SumOfSquareUnits(widened, e));
    EXPECT_EQ(MaxAbsBf16(isa, {}), 0.0f);
    // The largest magnitude in the tail; then an infinity, then a NaN.
    g16.back() = RoundedToBf16({-1000.0f})[0];
    EXPECT_EQ(MaxAbsBf16(isa, g16), 1000.0f);
    widened = WidenedAndScaled(g16, 1.0f);
    const int e_tail = SquareUnitExponent(1000.0f);
    EXPECT_TRUE(SumOfSquareUnitsBf16(isa, g16, e_tail) == SumOfSquareUnits(widened, e_tail));
    g16[5] = RoundedToBf16({-std::numeric_limits<float>::infinity()})[0];
    EXPECT_EQ(MaxAbsBf16(isa, g16), std::numeric_limits<float>::infinity());
    g16[base::kWidenBlock + 1] = RoundedToBf16({std::nanf("")})[0];
    EXPECT_TRUE(std::isnan(MaxAbsBf16(isa, g16)));
  }
}

TEST(GradClipTest, ClipScale) {
  const std::vector<float> g = Random(100, 4);
  const double whole = SumOfSquares(g);
  const double norm = std::sqrt(whole);
  EXPECT_EQ(ClipScale(whole, static_cast<float>(norm * 2)), 1.0f);
  EXPECT_NEAR(ClipScale(whole, static_cast<float>(norm / 4)), 0.25f, 1e-5);
  EXPECT_EQ(ClipScale(whole, 0.0f), 1.0f);  // disabled
  std::vector<float> clipped = g;
  ScaleInPlace(absl::MakeSpan(clipped), ClipScale(whole, 1.0f));
  EXPECT_NEAR(std::sqrt(SumOfSquares(clipped)), 1.0, 1e-4);
}

}  // namespace
}  // namespace fsdp
