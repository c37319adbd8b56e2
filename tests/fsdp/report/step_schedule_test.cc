// File: tests/fsdp/report/step_schedule_test.cc
//
// The replayed step on tiny unit lists whose peaks are worked out by hand
// (the derivation is in each test). The end-to-end check against the real
// runtime is tests/integration/report (every measured point to the byte).
#include "fsdp/report/step_schedule.h"

#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

// 4 units of 10 elements, fp32, sharded parameters only, no activations.
// Forward of unit 0 gathers it (40 B) and prefetches up to prefetch_depth
// next units, but no more than max_gathers_in_flight pending at once.
TEST(StepScheduleTest, PrefetchIsBoundedByGathersInFlight) {
  ScheduleInputs in;
  in.units = {{10, 5, 0}, {10, 5, 0}, {10, 5, 0}, {10, 5, 0}};
  in.shard_params = true;
  in.prefetch_depth = 3;
  in.max_gathers_in_flight = 3;
  EXPECT_EQ(PeakTransientBytes(in), 4 * 40);  // unit 0 + three prefetched
  in.max_gathers_in_flight = 1;
  EXPECT_EQ(PeakTransientBytes(in), 2 * 40);  // unit 0 + one prefetched
  in.prefetch_depth = 0;
  EXPECT_EQ(PeakTransientBytes(in), 40);      // one unit at a time
}

// no_shard on the wire: each unit's reduce-scatter stages 2 (P + S) bytes,
// then its gradient all-gather stages 2 (P + S) again until the very end,
// so after the backward every unit's all-gather staging is alive at once:
// 2 (10 + 5) + 2 (20 + 10) = 90 B (activations of 1 and 2 B are gone).
TEST(StepScheduleTest, NoShardOnTheWireHoldsEveryGradientAllGatherAtTheEnd) {
  ScheduleInputs in;
  in.units = {{10, 5, 1}, {20, 10, 2}};
  in.all_gather_grads = true;
  in.bf16_wire = true;
  EXPECT_EQ(PeakTransientBytes(in), 90);
  in.bf16_wire = false;  // fp32: nothing staged, the forward's activations are the peak
  EXPECT_EQ(PeakTransientBytes(in), 3);
}

// shard_grad_op in fp32: the backward of unit u holds its unsharded
// gradients and those of u+1 (reduce-scatter still in flight), with the
// activations of 0..u. Units {P=8, A=100}, {P=6, A=50}, {P=4, A=10}:
// forward end 160; backward of 2: 160 + 16 = 176; of 1: 150 + 24 + 16 = 190;
// of 0: 100 + 32 + 24 = 156. Peak 190.
TEST(StepScheduleTest, UnshardedGradientsOverlapTheNextUnitsBackward) {
  ScheduleInputs in;
  in.units = {{8, 4, 100}, {6, 3, 50}, {4, 2, 10}};
  in.shard_grads = true;
  in.shard_optimizer = true;
  EXPECT_EQ(PeakTransientBytes(in), 190);
}

}  // namespace
}  // namespace report
}  // namespace fsdp
