// File: tests/fsdp/plan/step_time_model_test.cc
// The replayed schedule on small cases worked by hand (the timelines are in
// the comments), the optimizer's traffic and the straggler tail.
#include "fsdp/plan/step_time_model.h"

#include <cmath>

#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

// A product of 2e9 operations at 2e9 operations per second: 1 s. Links:
// no latency, 4000 bytes per second, so a 2-rank direct all-gather of
// 4000 bytes (one 2000-byte chunk) takes 0.5 s and a recursive-doubling
// reduce-scatter of 4000 bytes (one round of the whole vector) 1 s; memory
// is fast enough to cost nothing.
proto::HardwareDescription Hardware() {
  proto::HardwareDescription hw;
  hw.set_name("hand");
  for (const char* dtype : {"fp32", "bf16"}) {
    proto::ProductRate* rate = hw.add_product_rates();
    rate->set_dtype(dtype);
    rate->set_min_dimension(0);
    rate->set_flops_per_s(2e9);
  }
  hw.set_memory_bandwidth_bytes_per_s(1e30);
  hw.set_ranks_per_node(8);
  hw.set_processors_per_node(8);
  hw.set_memory_bytes_per_processor(1e9);
  for (proto::LinkLevel* link : {hw.mutable_intra_node(), hw.mutable_inter_node()}) {
    link->set_latency_s(0);
    link->set_bandwidth_bytes_per_s(4000);
  }
  hw.set_compute_time_cv(0);
  return hw;
}

// Hardware() with a framework_overhead block.
proto::HardwareDescription WithOverhead(double kernel_launch_s, double collective_compute_share) {
  proto::HardwareDescription hw = Hardware();
  hw.mutable_framework_overhead()->set_kernel_launch_s(kernel_launch_s);
  hw.mutable_framework_overhead()->set_collective_compute_share(collective_compute_share);
  return hw;
}

// Two units of 1000 padded elements (4000 fp32 bytes): forward 1 s,
// backward 2 s.
StepModelInputs TwoUnits(proto::ShardingStrategy strategy, int world_size) {
  StepModelInputs in;
  for (int u = 0; u < 2; ++u) {
    UnitWork unit;
    unit.padded_numel = 1000;
    unit.shard_numel = 1000 / world_size;
    unit.forward_products = {{1000, 1000, 1000, 1}};
    unit.backward_products = {{1000, 1000, 1000, 1}, {1000, 1000, 1000, 1}};
    in.units.push_back(unit);
  }
  in.strategy = strategy;
  in.world_size = world_size;
  in.grad_clip = false;
  return in;
}

// Kernels cost framework_overhead.kernel_launch_s each: 10 forward and 20
// backward kernels per unit at 0.01 s add 0.3 s per unit.
TEST(StepTimeModelTest, KernelsCostTheirLaunch) {
  const proto::HardwareDescription hw = WithOverhead(0.01, 0);
  StepModelInputs in = TwoUnits(proto::FULL_SHARD, 1);
  for (UnitWork& unit : in.units) {
    unit.forward_kernels = 10;
    unit.backward_kernels = 20;
  }
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(in, hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->compute_s, 6.6, 1e-12);
  EXPECT_NEAR(p->step_s, 6.6, 1e-12);
  // Without framework_overhead the counted kernels cost nothing.
  p = PredictStepTime(in, Hardware());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_s, 6);
}

// FullShardTwoRanksByHand with collectives taking half the processor:
// compute overlapping the channel runs at half speed until the channel is
// free. A span of c seconds starting with the channel busy b more seconds
// takes b + c - b / 2 (every span here outlasts its b).
//   fwd u0  AG0 [0, 0.5], wait to 0.5, AG1 [0.5, 1]; 1 s with b 0.5: to 1.75
//   fwd u1  channel idle: to 2.75
//   bwd u1  AG0 [2.75, 3.25]; 2 s with b 0.5: to 5; RS1 [5, 6]
//   bwd u0  2 s with b 1: to 7.5; RS0 [7.5, 8.5]
//   end     wait to 8.5; loss all-reduce to 8.501
// Contention 0.25 + 0.25 + 0.5; exposed as before.
TEST(StepTimeModelTest, CollectivesTakeTheirShareOfOverlappedCompute) {
  const proto::HardwareDescription hw = WithOverhead(0, 0.5);
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(TwoUnits(proto::FULL_SHARD, 2), hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->compute_s, 6);
  EXPECT_NEAR(p->contention_s, 1, 1e-12);
  EXPECT_NEAR(p->exposed_comm_s, 1.501, 1e-12);
  EXPECT_NEAR(p->step_s, 8.501, 1e-12);
  // One rank posts nothing but the loss's all-reduce, after all compute.
  p = PredictStepTime(TwoUnits(proto::FULL_SHARD, 1), hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->contention_s, 0);
}

// A span that ends while the channel is still busy runs wholly slowed: unit
// 1 of 100,000 elements gathers for 50 s and reduce-scatters for at least 4.
//   fwd u0  AG0 [0, 0.5], AG1 [0.5, 50.5]: 1 s within it takes 2 (+1)
//   fwd u1  waits to 50.5, 1 s idle channel
//   bwd u1  AG0 [51.5, 52]: 2 s with b 0.5 takes 2.25 (+0.25); RS1 posted
//   bwd u0  2 s within RS1 takes 4 (+2)
TEST(StepTimeModelTest, ComputeInsideALongCollectiveRunsSlowed) {
  const proto::HardwareDescription hw = WithOverhead(0, 0.5);
  StepModelInputs in = TwoUnits(proto::FULL_SHARD, 2);
  in.units[1].padded_numel = 100000;
  in.units[1].shard_numel = 50000;
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(in, hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->contention_s, 3.25, 1e-12);
}

TEST(StepTimeModelTest, OneRankIsComputeOnly) {
  absl::StatusOr<StepTimePrediction> p =
      PredictStepTime(TwoUnits(proto::FULL_SHARD, 1), Hardware());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->compute_s, 6);
  EXPECT_DOUBLE_EQ(p->exposed_comm_s, 0);
  EXPECT_DOUBLE_EQ(p->step_s, 6);
}

// One rank's gathers are copies of the shard into the unit's buffer, on the
// compute clock: 4000 bytes read and written at 8000 bytes per second, 1 s
// each. full_shard gathers unit 0 and unit 1 in the forward and unit 0 again
// in the backward (unit 1 stays gathered): 3 s over no_shard, whose
// optimizer traffic is the same at one rank.
TEST(StepTimeModelTest, OneRankCopiesItsGathers) {
  proto::HardwareDescription hw = Hardware();
  hw.set_memory_bandwidth_bytes_per_s(8000);
  absl::StatusOr<StepTimePrediction> full = PredictStepTime(TwoUnits(proto::FULL_SHARD, 1), hw);
  absl::StatusOr<StepTimePrediction> none = PredictStepTime(TwoUnits(proto::NO_SHARD, 1), hw);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_DOUBLE_EQ(full->step_s - none->step_s, 3);
  EXPECT_DOUBLE_EQ(full->exposed_comm_s, 0);
}

// full_shard, 2 ranks, prefetch depth 1 (channel in brackets):
//   fwd u0  post AG0 [0, 0.5], wait to 0.5, prefetch AG1 [0.5, 1], compute to 1.5
//   fwd u1  AG1 done at 1 already; compute to 2.5 (kept gathered)
//   bwd u1  prefetch AG0 [2.5, 3]; compute to 4.5; post RS1 [4.5, 5.5]
//   bwd u0  AG0 done; compute to 6.5; post RS0 [6.5, 7.5]; RS1 done
//   end     wait RS0 to 7.5; loss all-reduce of 4 bytes [7.5, 7.501]
// Waited 0.5 + 1 + 0.001; channel busy 3 x 0.5 + 2 x 1 + 0.001.
TEST(StepTimeModelTest, FullShardTwoRanksByHand) {
  absl::StatusOr<StepTimePrediction> p =
      PredictStepTime(TwoUnits(proto::FULL_SHARD, 2), Hardware());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->compute_s, 6);
  EXPECT_NEAR(p->step_s, 7.501, 1e-12);
  EXPECT_NEAR(p->exposed_comm_s, 1.501, 1e-12);
  EXPECT_NEAR(p->comm_s, 3.501, 1e-12);
}

// Without prefetch every gather is exposed: fwd 0.5 + 0.5, bwd u0 0.5 (u1
// stays gathered), then RS0 after the backward: 1 s.
//   fwd u0 [0,0.5] compute to 1.5; fwd u1 AG [1.5,2] compute to 3;
//   bwd u1 compute to 5, RS1 [5,6]; bwd u0 AG [6,6.5] (the channel is busy
//   until 6) compute to 8.5, RS0 [8.5,9.5]; loss to 9.501.
TEST(StepTimeModelTest, FullShardWithoutPrefetch) {
  StepModelInputs in = TwoUnits(proto::FULL_SHARD, 2);
  in.prefetch_depth = 0;
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(in, Hardware());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->step_s, 9.501, 1e-12);
  EXPECT_NEAR(p->exposed_comm_s, 3.501, 1e-12);
}

// no_shard, 2 ranks: no parameter gathers; after RS1 the gradient AG.
//   compute fwd to 2; bwd u1 to 4, RS1 [4,5]; bwd u0 to 6, RS0 [6,7],
//   RS1 done: AG1 [7,7.5]; end: RS0 done at 7, AG0 [7.5,8]; wait to 8;
//   loss [8,8.001].
TEST(StepTimeModelTest, NoShardTwoRanksByHand) {
  absl::StatusOr<StepTimePrediction> p =
      PredictStepTime(TwoUnits(proto::NO_SHARD, 2), Hardware());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->step_s, 8.001, 1e-12);
  EXPECT_NEAR(p->exposed_comm_s, 2.001, 1e-12);
}

// shard_grad_op gathers only in the first micro-batch's forward: with two
// micro-batches the second forward and both backwards gather nothing.
//   m0: AG0 [0,0.5] wait, prefetch AG1 [0.5,1], fwd to 1.5, fwd u1 to 2.5,
//       bwd to 6.5 (no reductions: not the last micro-batch)
//   m1: fwd to 8.5, bwd u1 to 10.5, RS1 [10.5,11.5], bwd u0 to 12.5,
//       RS0 [12.5,13.5]; wait to 13.5; loss to 13.501.
TEST(StepTimeModelTest, ShardGradOpGathersOncePerStep) {
  StepModelInputs in = TwoUnits(proto::SHARD_GRAD_OP, 2);
  in.accum_steps = 2;
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(in, Hardware());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->compute_s, 12);
  EXPECT_NEAR(p->step_s, 13.501, 1e-12);
}

TEST(StepTimeModelTest, HybridWithOneGroupIsFullShard) {
  StepModelInputs hybrid = TwoUnits(proto::HYBRID_SHARD, 2);
  hybrid.group_size = 2;
  absl::StatusOr<StepTimePrediction> a = PredictStepTime(hybrid, Hardware());
  absl::StatusOr<StepTimePrediction> b =
      PredictStepTime(TwoUnits(proto::FULL_SHARD, 2), Hardware());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_DOUBLE_EQ(a->step_s, b->step_s);
}

// hybrid, 4 ranks in groups of 2: as full_shard over 2, plus each unit's
// shard (500 fp32 = 2000 bytes) all-reduced across the 2 groups after its
// reduce-scatter (recursive doubling, one round: 0.5 s):
//   ... bwd u0 to 6.5, RS0 [6.5,7.5]; RS1 done at 5.5: AR1 [7.5,8];
//   end: wait RS0 to 7.5, AR0 [8,8.5]; wait to 8.5; loss over 4 ranks
//   (2 rounds of 4 bytes) [8.5,8.502].
TEST(StepTimeModelTest, HybridAddsTheCrossGroupAllReduce) {
  StepModelInputs in = TwoUnits(proto::HYBRID_SHARD, 4);
  in.group_size = 2;
  for (UnitWork& unit : in.units) unit.shard_numel = 500;
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(in, Hardware());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->step_s, 8.502, 1e-12);
}

// AdamW on 2 x 1000 fp32 elements without clipping: master read and
// written (8), gradient read (4), two states read and written (16), the
// gradient cleared (4) = 32 bytes each, 64000 bytes at 64000 bytes/s.
// (no_shard: one rank's full_shard would add its gathers' copies.)
TEST(StepTimeModelTest, OptimizerIsMemoryTraffic) {
  proto::HardwareDescription hw = Hardware();
  hw.set_memory_bandwidth_bytes_per_s(64000);
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(TwoUnits(proto::NO_SHARD, 1), hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->optimizer_s, 1);
  EXPECT_DOUBLE_EQ(p->step_s, 7);
}

TEST(StepTimeModelTest, StragglerTailGrowsWithRanks) {
  EXPECT_EQ(ExpectedMaxOfNormals(1), 0);
  EXPECT_NEAR(ExpectedMaxOfNormals(2), 1 / std::sqrt(M_PI), 1e-6);
  EXPECT_NEAR(ExpectedMaxOfNormals(3), 1.5 / std::sqrt(M_PI), 1e-6);
  EXPECT_GT(ExpectedMaxOfNormals(16384), ExpectedMaxOfNormals(1024));
  proto::HardwareDescription hw = Hardware();
  hw.set_compute_time_cv(0.1);
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(TwoUnits(proto::FULL_SHARD, 2), hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->straggler_s, 0.1 * 6 / std::sqrt(M_PI), 1e-6);
  EXPECT_NEAR(p->step_s, 7.501 + p->straggler_s, 1e-12);
}

// Ranks beyond the processors of a node share them.
TEST(StepTimeModelTest, RanksShareTheProcessorsOfANode) {
  proto::HardwareDescription hw = Hardware();
  hw.set_processors_per_node(1);  // 2 ranks on one processor
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(TwoUnits(proto::NO_SHARD, 2), hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->rank_share, 0.5);
  EXPECT_DOUBLE_EQ(p->compute_s, 12);
}

// Fewer ranks than processors: each rank's products run on processors /
// ranks threads, at the description's rates for that many (element-wise
// work stays one thread's). 8 processors, 2 ranks: 4 threads each, 4e9
// operations per second, so the 6 products of 2e9 take 3 s instead of 6.
TEST(StepTimeModelTest, ALoneRankTakesTheRatesOfItsThreads) {
  proto::HardwareDescription hw = Hardware();
  for (const char* dtype : {"fp32", "bf16"}) {
    proto::ProductRate* rate = hw.add_product_rates();
    rate->set_dtype(dtype);
    rate->set_min_dimension(0);
    rate->set_flops_per_s(4e9);
    rate->set_threads(4);
  }
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(TwoUnits(proto::NO_SHARD, 2), hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rank_threads, 4);
  EXPECT_DOUBLE_EQ(p->rank_share, 1);
  EXPECT_DOUBLE_EQ(p->compute_s, 3);
  // 8 ranks on the 8 processors: one thread each, the one-thread rate.
  p = PredictStepTime(TwoUnits(proto::NO_SHARD, 8), hw);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rank_threads, 1);
  EXPECT_DOUBLE_EQ(p->compute_s, 6);
}

// A group spanning nodes: its ring's node-crossing hop uses
// network_rails_per_ring adapters, capped by the link within a node.
TEST(StepTimeModelTest, SpanningGroupsUseTheRailsOfTheirNode) {
  proto::HardwareDescription hw = Hardware();
  hw.mutable_intra_node()->set_bandwidth_bytes_per_s(100);
  hw.mutable_inter_node()->set_bandwidth_bytes_per_s(10);
  hw.mutable_inter_node()->set_latency_s(7);
  hw.set_network_rails_per_ring(4);
  CollectiveGroup group = GroupOn(hw, 16, /*spans_nodes=*/true, 1);
  EXPECT_DOUBLE_EQ(group.bandwidth_bytes_per_s, 40);
  EXPECT_DOUBLE_EQ(group.latency_s, 7);
  EXPECT_FALSE(group.on_one_host);
  hw.set_network_rails_per_ring(16);
  EXPECT_DOUBLE_EQ(GroupOn(hw, 16, true, 1).bandwidth_bytes_per_s, 100);
  EXPECT_DOUBLE_EQ(GroupOn(hw, 8, false, 1).bandwidth_bytes_per_s, 100);
}

TEST(StepTimeModelTest, BadInputsNameTheField) {
  StepModelInputs in = TwoUnits(proto::HYBRID_SHARD, 4);
  in.group_size = 3;
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(in, Hardware());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("group_size 3"), absl::string_view::npos);
  in = TwoUnits(proto::FULL_SHARD, 2);
  in.units.clear();
  EXPECT_FALSE(PredictStepTime(in, Hardware()).ok());
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
