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
  EXPECT_EQ(PeakTransientBytes(in), 40);  // one unit at a time
}

// no_shard: the collectives stage nothing, so the forward's activations
// (1 + 2 B) are the peak.
TEST(StepScheduleTest, NoShardHoldsOnlyItsActivations) {
  ScheduleInputs in;
  in.units = {{10, 5, 1}, {20, 10, 2}};
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

// The same with 2 micro-batches: the first backward allocates every unit's
// gradients (16 + 24 + 32 = 72 B) and keeps them; the second forward holds
// them under all the activations: 72 + 160 = 232, the peak. Its backward
// frees each unit's gradients as the next unit's reduce-scatter finishes.
TEST(StepScheduleTest, AccumulationHoldsEveryUnitsGradientsThroughTheNextForward) {
  ScheduleInputs in;
  in.units = {{8, 4, 100}, {6, 3, 50}, {4, 2, 10}};
  in.shard_grads = true;
  in.shard_optimizer = true;
  in.accum_steps = 2;
  EXPECT_EQ(PeakTransientBytes(in), 232);
  in.accum_steps = 1;
  EXPECT_EQ(PeakTransientBytes(in), 190);
  // Gradients kept whole (shard_optimizer) accumulate in place: no change.
  in.shard_grads = false;
  in.accum_steps = 3;
  EXPECT_EQ(PeakTransientBytes(in), 160);
}

// A plan unit merging model units: saved {10, 4, 20} with a transient of 30
// on the middle one (a checkpointed block between two plain units). While
// the middle one runs the unit holds 10 + 4 + 30 = 44, forward and backward
// alike: 10 above its 34 saved bytes. When the saved bytes after it are
// larger than its transient, nothing rises above the saved total.
TEST(StepScheduleTest, MergedUnitTransientsAreTakenOverTheRunningSavedBytes) {
  const ScheduleUnit merged = ScheduleUnitActivations({{10, 0}, {4, 30}, {20, 0}});
  EXPECT_EQ(merged.activation_bytes, 34);
  EXPECT_EQ(merged.forward_transient_bytes, 10);
  EXPECT_EQ(merged.backward_transient_bytes, 10);
  const ScheduleUnit alone = ScheduleUnitActivations({{4, 30}});
  EXPECT_EQ(alone.activation_bytes, 4);
  EXPECT_EQ(alone.forward_transient_bytes, 30);
  EXPECT_EQ(alone.backward_transient_bytes, 30);
  const ScheduleUnit covered = ScheduleUnitActivations({{4, 30}, {40, 0}});
  EXPECT_EQ(covered.activation_bytes, 44);
  EXPECT_EQ(covered.forward_transient_bytes, 0);
  EXPECT_EQ(covered.backward_transient_bytes, 0);
  // Two checkpointed sources: the second's forward holds both outputs.
  const ScheduleUnit two = ScheduleUnitActivations({{4, 30}, {4, 30}});
  EXPECT_EQ(two.forward_transient_bytes, 30);   // 4 + 4 + 30 - 8
  EXPECT_EQ(two.backward_transient_bytes, 30);  // the second first: same
}

// shard_grad_op in fp32 with a checkpointed middle unit: units {P=8, A=10},
// {P=6, A=4, transient 30}, {P=4, A=20}. Forward: 10, then 14 + 30 = 44
// while the block runs, 34 at the end. Backward of 2: 34 + 16 = 50; of 1:
// its gradients join those of 2 (in flight): 14 + 24 + 16 = 54, and the
// recomputation on top, 84; of 0: 10 + 32 + 24 = 66. Peak 84 (66 if the
// recomputation were not counted). Without checkpointing the block saves 34
// and its backward holds 10 + 34 + 24 + 16 = 84 too: checkpointing lowers
// the end of the forward (34 instead of 64), not the moment the block's
// backward runs.
TEST(StepScheduleTest, RecomputationPeaksOnTopOfTheUnitsGradients) {
  ScheduleInputs in;
  in.units = {{8, 4, 10}, {6, 3, 4, 30, 30}, {4, 2, 20}};
  in.shard_grads = true;
  in.shard_optimizer = true;
  EXPECT_EQ(PeakTransientBytes(in), 84);
  in.units[1] = {6, 3, 34};
  EXPECT_EQ(PeakTransientBytes(in), 84);
  // The forward's transient counts too: alone it makes the peak.
  in.units = {{8, 4, 10}, {6, 3, 4, 100, 0}, {4, 2, 20}};
  EXPECT_EQ(PeakTransientBytes(in), 10 + 4 + 100);
}

// full_shard, prefetch 1, the same units (gathered 32, 24, 16 B). Forward
// of 1: unit 1 and the prefetched 2 gathered (24 + 16), activations 10 + 4
// + 30: 84. Backward of 1: units 1 and the prefetched 0 gathered (24 + 32),
// gradients of 1 and 2 (24 + 16), activations 10 + 4 + 30: 140, the peak.
TEST(StepScheduleTest, FullShardRecomputationWithGatheredNeighbours) {
  ScheduleInputs in;
  in.units = {{8, 4, 10}, {6, 3, 4, 30, 30}, {4, 2, 20}};
  in.shard_params = true;
  in.shard_grads = true;
  in.shard_optimizer = true;
  EXPECT_EQ(PeakTransientBytes(in), 140);
  // Without the backward's recomputation the backward of 1 holds 110.
  in.units[1].backward_transient_bytes = 0;
  EXPECT_EQ(PeakTransientBytes(in), 110);
}

}  // namespace
}  // namespace report
}  // namespace fsdp
