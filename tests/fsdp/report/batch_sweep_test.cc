#include "fsdp/report/batch_sweep.h"

#include <cmath>

#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

TEST(BatchSweepTest, SplitsIntoRanksThenAccumulation) {
  EXPECT_EQ(SplitGlobalBatch(16, 4, 2)->ranks, 2);
  EXPECT_EQ(SplitGlobalBatch(16, 4, 2)->accum, 2);
  EXPECT_EQ(SplitGlobalBatch(4, 4, 2)->ranks, 1);
  EXPECT_EQ(SplitGlobalBatch(12, 4, 2)->ranks, 1);  // 3 micro-batches: not over 2 ranks
  EXPECT_EQ(SplitGlobalBatch(12, 4, 2)->accum, 3);
  EXPECT_EQ(SplitGlobalBatch(10, 4, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchSweepTest, StepsForATokenBudget) {
  EXPECT_EQ(StepsForTokens(1000, 4, 100), 3);  // 400 tokens a step: 3 steps cover 1000
  EXPECT_EQ(StepsForTokens(800, 4, 100), 2);
  EXPECT_EQ(StepsForTokens(1, 64, 128), 1);
}

TEST(BatchSweepTest, FirstPointReachingTheTarget) {
  const std::vector<LossPoint> curve = {{10, 100, 3.0}, {20, 200, 2.5}, {30, 300, 2.4}};
  EXPECT_EQ(FirstReaching(curve, 2.5)->step, 20);
  EXPECT_FALSE(FirstReaching(curve, 2.0).has_value());
}

TEST(BatchSweepTest, StepsToReachInterpolatesBetweenValidations) {
  const std::vector<LossPoint> curve = {{10, 100, 3.0}, {20, 200, 2.5}, {30, 300, 2.4}};
  EXPECT_DOUBLE_EQ(*StepsToReach(curve, 2.5), 20.0);   // exactly on a point
  EXPECT_DOUBLE_EQ(*StepsToReach(curve, 2.75), 15.0);  // halfway from 3.0 down to 2.5
  EXPECT_NEAR(*StepsToReach(curve, 2.45), 25.0, 1e-9);  // 0.05 / 0.1, within rounding
  EXPECT_DOUBLE_EQ(*StepsToReach(curve, 3.5), 10.0);   // already there at the first point
  EXPECT_FALSE(StepsToReach(curve, 2.0).has_value());
  EXPECT_FALSE(StepsToReach({}, 1.0).has_value());
}

// Steps computed from the model itself give its parameters back, and the
// diminishing-returns batch is the first sweep batch at or above B_crit.
TEST(BatchSweepTest, RecoversTheModelsCriticalBatch) {
  const double s_min = 100, b_crit = 24;
  std::vector<StepsAtBatch> points;
  for (int64_t b : {4, 8, 16, 32, 64, 128}) {
    points.push_back({b, s_min * (1 + b_crit / static_cast<double>(b))});
  }
  absl::StatusOr<CriticalBatchFit> fit = FitCriticalBatch(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->min_steps, s_min, 1e-6);
  EXPECT_NEAR(fit->critical_batch, b_crit, 1e-6);
  // S(16)/S(32) = 2.5/1.75 = 1.43 < 1.5; S(8)/S(16) = 4/2.5 = 1.6.
  EXPECT_EQ(DiminishingReturnsBatch(points), 32);
}

TEST(BatchSweepTest, NoFitWithoutTwoBatchesOrFallingSteps) {
  EXPECT_FALSE(FitCriticalBatch({{8, 100}}).ok());
  EXPECT_FALSE(FitCriticalBatch({{8, 100}, {16, 120}}).ok());  // steps grew
  EXPECT_FALSE(DiminishingReturnsBatch({{8, 100}, {16, 50}}).has_value());
  // Steps exactly halving with every doubling: the critical batch is beyond.
  EXPECT_EQ(FitCriticalBatch({{4, 400}, {8, 200}, {16, 100}}).status().code(),
            absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace report
}  // namespace fsdp
