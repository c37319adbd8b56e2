// The noise-scale estimators on a synthetic problem whose gradient
// covariance is known: per-example gradients G + noise with a diagonal
// covariance, averaged over each rank's examples and over the ranks exactly
// as a data-parallel step averages them.
#include "fsdp/optim/gradient_noise_scale.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

struct SyntheticProblem {
  std::vector<double> true_gradient;
  std::vector<double> noise_std;  // per coordinate; Sigma = diag(noise_std^2)

  double true_noise_scale() const {
    double trace = 0, sq = 0;
    for (double s : noise_std) trace += s * s;
    for (double g : true_gradient) sq += g * g;
    return trace / sq;
  }
};

SyntheticProblem MakeProblem() {
  SyntheticProblem p;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> g(-1, 1), s(1.0, 4.0);
  for (int i = 0; i < 64; ++i) {
    p.true_gradient.push_back(g(rng));
    p.noise_std.push_back(s(rng));
  }
  return p;
}

double SqNorm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return s;
}

// One data-parallel step: `ranks` ranks with `per_rank` examples each.
GradientNormPair Step(const SyntheticProblem& p, int ranks, int per_rank, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0, 1);
  const size_t d = p.true_gradient.size();
  std::vector<double> global(d, 0);
  double local_sq_sum = 0;
  for (int r = 0; r < ranks; ++r) {
    std::vector<double> local(d, 0);
    for (int e = 0; e < per_rank; ++e) {
      for (size_t i = 0; i < d; ++i) {
        local[i] += p.true_gradient[i] + p.noise_std[i] * normal(rng);
      }
    }
    for (size_t i = 0; i < d; ++i) {
      local[i] /= per_rank;
      global[i] += local[i] / ranks;
    }
    local_sq_sum += SqNorm(local);
  }
  return {local_sq_sum / ranks, per_rank, SqNorm(global), int64_t{per_rank} * ranks};
}

TEST(GradientNoiseScaleTest, RecoversAKnownNoiseScale) {
  const SyntheticProblem problem = MakeProblem();
  const double truth = problem.true_noise_scale();
  ASSERT_GT(truth, 10);  // the batch sizes below straddle it
  ASSERT_LT(truth, 200);
  std::mt19937_64 rng(11);
  GradientNoiseScale noise;
  for (int step = 0; step < 3000; ++step) {
    ASSERT_TRUE(noise.Add(Step(problem, /*ranks=*/4, /*per_rank=*/8, rng)).ok());
  }
  std::optional<NoiseScaleValue> mean = noise.run_mean();
  ASSERT_TRUE(mean.has_value());
  EXPECT_NEAR(mean->scale, truth, 0.10 * truth);
  // The standard error is honest: the truth lies within a few of them, and
  // they are small against the value after this many steps.
  EXPECT_GT(mean->standard_error, 0);
  EXPECT_LT(std::abs(mean->scale - truth), 4 * mean->standard_error);
  EXPECT_LT(mean->standard_error, 0.05 * truth);
  std::optional<double> smoothed = noise.smoothed();
  ASSERT_TRUE(smoothed.has_value());
  EXPECT_NEAR(*smoothed, truth, 0.5 * truth);  // about 20 steps' worth: noisy
}

// The same global batch split 2 ways and 4 ways measures the same quantity;
// the two estimates agree within their spread.
TEST(GradientNoiseScaleTest, TwoAndFourRanksAgreeAtOneGlobalBatch) {
  const SyntheticProblem problem = MakeProblem();
  std::mt19937_64 rng2(21), rng4(22);
  GradientNoiseScale two, four;
  for (int step = 0; step < 2000; ++step) {
    ASSERT_TRUE(two.Add(Step(problem, 2, 16, rng2)).ok());
    ASSERT_TRUE(four.Add(Step(problem, 4, 8, rng4)).ok());
  }
  const NoiseScaleValue a = *two.run_mean();
  const NoiseScaleValue b = *four.run_mean();
  const double spread = std::hypot(a.standard_error, b.standard_error);
  EXPECT_LT(std::abs(a.scale - b.scale), 3 * spread)
      << a.scale << " +- " << a.standard_error << " vs " << b.scale << " +- " << b.standard_error;
}

// The estimators' algebra on numbers worked by hand: b = 1, B = 4,
// |g_b|^2 = 5, |g_B|^2 = 2 give |G|^2 = (8 - 5) / 3 = 1 and
// tr(Sigma) = (5 - 2) / (1 - 1/4) = 4.
TEST(GradientNoiseScaleTest, EstimatorsByHand) {
  absl::StatusOr<NoiseTerms> terms = EstimateNoiseTerms({5, 1, 2, 4});
  ASSERT_TRUE(terms.ok()) << terms.status();
  EXPECT_DOUBLE_EQ(terms->true_sq_norm, 1.0);
  EXPECT_DOUBLE_EQ(terms->trace, 4.0);
  GradientNoiseScale noise(0.5);
  ASSERT_TRUE(noise.Add({5, 1, 2, 4}).ok());
  EXPECT_DOUBLE_EQ(*noise.smoothed(), 4.0);
  // Second step: |G|^2 = (4*3 - 6) / 3 = 2, tr = (6 - 3) / 0.75 = 4.
  // Moving averages 0.25 * 1 + 0.5 * 2 = 1.25 and 0.25 * 4 + 0.5 * 4 = 3.
  ASSERT_TRUE(noise.Add({6, 1, 3, 4}).ok());
  EXPECT_DOUBLE_EQ(*noise.smoothed(), 3.0 / 1.25);
  EXPECT_DOUBLE_EQ(noise.run_mean()->scale, 4.0 / 1.5);
}

TEST(GradientNoiseScaleTest, NoEstimateWhileTheTrueNormIsNotPositive) {
  GradientNoiseScale noise;
  EXPECT_FALSE(noise.smoothed().has_value());
  // |g_b|^2 = 1, |g_B|^2 = 0.2 at b = 1, B = 4: |G|^2 = (0.8 - 1) / 3 < 0.
  ASSERT_TRUE(noise.Add({1, 1, 0.2, 4}).ok());
  EXPECT_FALSE(noise.smoothed().has_value());
  EXPECT_FALSE(noise.run_mean().has_value());
}

TEST(GradientNoiseScaleTest, BadInputsAreRefusedAndNotAdded) {
  GradientNoiseScale noise;
  EXPECT_EQ(noise.Add({1, 4, 1, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(noise.Add({1, 0, 1, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(noise.Add({NAN, 1, 1, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(noise.Add({1, 1, -1, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(noise.steps(), 0);
}

TEST(GradientNoiseScaleTest, SaysWhyOneRankWithoutAccumulationHasNone) {
  EXPECT_NE(NoNoiseScaleReason(1, 1), "");
  EXPECT_EQ(NoNoiseScaleReason(2, 1), "");
  EXPECT_EQ(NoNoiseScaleReason(1, 2), "");
}

TEST(GradientNoiseScaleTest, TheReportsFlagAndTheBeyondTest) {
  EXPECT_TRUE(ValidateNoiseScaleFlag(0).ok());
  EXPECT_TRUE(ValidateNoiseScaleFlag(28.5).ok());
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const absl::Status status = ValidateNoiseScaleFlag(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("--noise_scale="), std::string::npos) << status;
  }
  EXPECT_FALSE(BeyondNoiseScale(1000, 0));  // unknown: never beyond
  EXPECT_FALSE(BeyondNoiseScale(28, 28.5));
  EXPECT_TRUE(BeyondNoiseScale(29, 28.5));
}

}  // namespace
}  // namespace fsdp
