// File: tests/fsdp/plan/goodput_test.cc
#include "fsdp/plan/goodput.h"

#include <cmath>

#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

TEST(GoodputTest, CostsAreFixedPlusBytesOverBandwidth) {
  proto::CheckpointCost cost;
  cost.set_save_fixed_s(1);
  cost.set_save_bytes_per_s(1e9);
  cost.set_restart_fixed_s(30);
  cost.set_restart_bytes_per_s(5e8);
  const CheckpointCosts costs = CheckpointCostsFor(cost, 4e9);
  EXPECT_DOUBLE_EQ(costs.save_s, 5);
  EXPECT_DOUBLE_EQ(costs.restart_s, 38);
}

// 2 nodes at 0.5 failures per node-hour: one failure an hour, M = 3600 s.
// Save 50 s: tau = sqrt(2 x 50 x 3600) = 600 s; restart 100 s:
// goodput = 1 - 50/600 - (100 + 300)/3600 = 0.8055...
TEST(GoodputTest, YoungsIntervalByHand) {
  const Goodput g = YoungDalyGoodput(/*step_s=*/10, /*nodes=*/2, 0.5, {50, 100});
  EXPECT_DOUBLE_EQ(g.mtbf_s, 3600);
  EXPECT_DOUBLE_EQ(g.interval_s, 600);
  EXPECT_NEAR(g.fraction, 1 - 50.0 / 600 - 400.0 / 3600, 1e-12);
}

TEST(GoodputTest, IntervalIsAtLeastOneStepAndFractionStaysInRange) {
  // A free save would checkpoint continuously: one step apart instead.
  EXPECT_DOUBLE_EQ(YoungDalyGoodput(7, 1, 1, {0, 0}).interval_s, 7);
  // Failing faster than a restart takes: nothing trains, not a negative.
  EXPECT_EQ(YoungDalyGoodput(1, 1000, 10, {60, 600}).fraction, 0);
  // No failures: everything trains, no checkpoints needed.
  const Goodput none = YoungDalyGoodput(1, 8, 0, {60, 600});
  EXPECT_EQ(none.fraction, 1);
  EXPECT_EQ(none.interval_s, 0);
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
