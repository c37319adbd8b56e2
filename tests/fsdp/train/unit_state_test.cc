// File: tests/fsdp/train/unit_state_test.cc
//
// One unit's buffers and its parameter and gradient state machines, per
// strategy, with one rank (the explicit world-size-1 path) and with two ranks
// as threads: which buffers exist in which memory category, every checked
// transition (including the wrong ones), and the collectives' results
// against formulas (padding, averaging, bf16 rounding).
#include "fsdp/train/unit_state.h"

#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/bfloat16.h"
#include "comm/dtype.h"
#include "base/bf16_convert.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/train/dtype_kernels.h"
#include "gtest/gtest.h"
#include "tests/fsdp/train/test_models.h"
#include "tests/fsdp/train/thread_communicator.h"

namespace fsdp {
namespace {

// The plan of one unit "u" of `numel` elements for `strategy` on `world`.
proto::UnitPlan PlanOfNumel(int64_t numel, int world, proto::ShardingStrategy strategy) {
  plan::PlannerOptions options;
  options.sharding.strategy = *plan::StrategyOfPlan(strategy);
  options.world_size = world;
  options.sharding.group_size = strategy == proto::HYBRID_SHARD ? world : 0;
  auto plan = plan::BuildShardPlan({UnitSpec{"u", {ParamSpec{"u.w", {numel}}}}}, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan->units(0);
}

// Parameters 1, 2, 3, ... (padding stays 0).
// The owned gradients as floats (bf16 ones widened, exactly).
std::vector<float> Widened(ConstDtypeSpan owned) {
  if (owned.dtype() == comm::Dtype::kFloat32) {
    const absl::Span<const float> fp32 = owned.as<float>();
    return std::vector<float>(fp32.begin(), fp32.end());
  }
  std::vector<float> out(owned.size());
  base::FromBf16(out.data(), owned.as<uint16_t>().data(), static_cast<int64_t>(out.size()));
  return out;
}

void InitCounting(absl::Span<float> padded, int64_t numel) {
  for (int64_t i = 0; i < numel; ++i) padded[i] = static_cast<float>(i + 1);
}

std::unique_ptr<ShardedUnit> Make(const proto::UnitPlan& plan, Strategy strategy, int world,
                                  int rank, MemoryTracker& tracker, UnitOptimizer& optimizer) {
  const UnitRuntime runtime = UnitRuntime::For(strategy, world, rank, world);
  auto unit = ShardedUnit::Create(plan, runtime, tracker, optimizer, [&](absl::Span<float> p) {
    InitCounting(p, plan.flat_numel());
  });
  EXPECT_TRUE(unit.ok()) << unit.status();
  return unit.ok() ? std::move(*unit) : nullptr;
}

TEST(ShardedUnitTest, BuffersByStrategyAndCategory) {
  // 7 elements over 4 ranks: padded 8, shard 2.
  struct Case {
    Strategy strategy;
    proto::ShardingStrategy plan_strategy;
    int64_t params, grads, comm;  // floats after Create
  };
  const Case cases[] = {
      {Strategy::kNoShard, proto::NO_SHARD, 8, 8, 2},
      {Strategy::kShardOptimizer, proto::SHARD_OPTIMIZER, 8, 8, 2},
      {Strategy::kShardGradOp, proto::SHARD_GRAD_OP, 8, 2, 0},
      {Strategy::kFullShard, proto::FULL_SHARD, 2, 2, 0},
  };
  for (const Case& c : cases) {
    MemoryTracker tracker;
    fsdp_test::PlainSgd sgd;
    auto unit = Make(PlanOfNumel(7, 4, c.plan_strategy), c.strategy, 4, 1, tracker, sgd);
    ASSERT_NE(unit, nullptr);
    MemorySnapshot s = tracker.Snapshot();
    EXPECT_EQ(s.current(MemoryCategory::kParameters), 4 * c.params) << StrategyName(c.strategy);
    EXPECT_EQ(s.current(MemoryCategory::kGradients), 4 * c.grads) << StrategyName(c.strategy);
    EXPECT_EQ(s.current(MemoryCategory::kCommBuffers), 4 * c.comm) << StrategyName(c.strategy);
    // Rank 1 owns elements [2, 4): the values 3 and 4.
    auto shard = unit->ParamShard();
    ASSERT_EQ(shard.size(), 2u);
    EXPECT_EQ(shard[0], 3.0f);
    EXPECT_EQ(shard[1], 4.0f);
    EXPECT_EQ(unit->param_state(), c.strategy == Strategy::kFullShard ? ParamState::kSharded
                                                                      : ParamState::kUnsharded);
  }
}

TEST(ShardedUnitTest, WrongTransitionsNameBothStates) {
  auto comms = fsdp_test::MakeThreadCommunicators(1);
  UnitComms c{comms[0].get(), comms[0].get()};
  MemoryTracker tracker;
  fsdp_test::PlainSgd sgd;
  auto unit = Make(PlanOfNumel(3, 1, proto::FULL_SHARD), Strategy::kFullShard, 1, 0,
                   tracker, sgd);
  ASSERT_NE(unit, nullptr);
  ShardedUnit& u = *unit;
  CommWaitClock clock;

  // Parameters.
  absl::Status s = u.WaitForUnshard(absl::Seconds(1), clock);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("unit 0 (u)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("kGathering"), std::string::npos) << s;
  EXPECT_NE(s.message().find("kSharded"), std::string::npos) << s;
  EXPECT_EQ(u.Reshard().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(u.UnshardedParams().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(u.Unshard(c).ok());
  EXPECT_EQ(u.param_state(), ParamState::kGathering);
  ASSERT_TRUE(u.Unshard(c).ok());  // pending: a no-op
  s = u.Reshard();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("kGathering"), std::string::npos) << s;
  ASSERT_TRUE(u.WaitForUnshard(absl::Seconds(1), clock).ok());
  EXPECT_EQ(u.param_state(), ParamState::kUnsharded);
  auto params = u.UnshardedParams();
  ASSERT_TRUE(params.ok());
  EXPECT_EQ(params->dtype(), comm::Dtype::kFloat32);
  const absl::Span<const float> fp32_params = params->as<float>();
  EXPECT_EQ(std::vector<float>(fp32_params.begin(), fp32_params.end()),
            (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(u.gathered_param_numel(), 3);

  // Gradients.
  s = u.StartReduction(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("kAccumulated"), std::string::npos) << s;
  EXPECT_NE(s.message().find("kIdle"), std::string::npos) << s;
  EXPECT_EQ(u.FinishReduceScatter(c, absl::Seconds(1), clock).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(u.FinishReduction(absl::Seconds(1), clock).code(),
            absl::StatusCode::kFailedPrecondition);
  auto grads = u.GradsForBackward();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->write, GradWrite::kOverwrite);  // the step's first backward
  EXPECT_EQ(u.unsharded_grad_numel(), 3);
  ASSERT_TRUE(u.MarkBackwardDone().ok());
  grads = u.GradsForBackward();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->write, GradWrite::kAdd);  // a second micro-batch accumulates
  ASSERT_TRUE(u.MarkBackwardDone().ok());
  EXPECT_EQ(u.ClearGrads().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(u.StepOptimizer(sgd, 0, 0.1f, 1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(u.StartReduction(c).ok());
  EXPECT_EQ(u.grad_state(), GradState::kReduceScattering);
  // A backward while the reduction is in flight would corrupt it.
  EXPECT_EQ(u.GradsForBackward().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(u.MarkBackwardDone().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(u.FinishReduceScatter(c, absl::Seconds(1), clock).ok());
  EXPECT_EQ(u.grad_state(), GradState::kReduced);  // full_shard: no second phase
  EXPECT_EQ(u.unsharded_grad_numel(), 0);           // freed after the reduce-scatter
  // The optimizer steps the shard, so the parameters must be resharded first.
  EXPECT_EQ(u.StepOptimizer(sgd, 0, 0.1f, 1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(u.Reshard().ok());
  EXPECT_EQ(u.gathered_param_numel(), 0);
  ASSERT_TRUE(u.StepOptimizer(sgd, 0, 0.1f, 1).ok());
  ASSERT_TRUE(u.ClearGrads().ok());
  EXPECT_EQ(u.grad_state(), GradState::kIdle);
  grads = u.GradsForBackward();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->write, GradWrite::kOverwrite);  // the next step writes them fresh
}

// Two ranks, every strategy: gradients (r+1)*(i+1) on rank r for the 5 real
// elements of a unit padded to 6; the averaged gradient is 1.5*(i+1), the
// padding stays zero; no_shard ends with it whole, the others with the
// rank's shard.
TEST(ShardedUnitTest, TwoRanksAverageTheirGradients) {
  constexpr int kWorld = 2;
  const std::pair<Strategy, proto::ShardingStrategy> strategies[] = {
      {Strategy::kNoShard, proto::NO_SHARD},
      {Strategy::kShardOptimizer, proto::SHARD_OPTIMIZER},
      {Strategy::kShardGradOp, proto::SHARD_GRAD_OP},
      {Strategy::kFullShard, proto::FULL_SHARD},
      {Strategy::kHybridShard, proto::HYBRID_SHARD}};
  for (auto [strategy, plan_strategy] : strategies) {
    auto comms = fsdp_test::MakeThreadCommunicators(kWorld);
    std::vector<std::vector<float>> owned(kWorld);
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        MemoryTracker tracker;
        fsdp_test::PlainSgd sgd;
        UnitComms c{comms[r].get(), comms[r].get()};
        auto unit = Make(PlanOfNumel(5, kWorld, plan_strategy), strategy, kWorld, r,
                         tracker, sgd);
        ASSERT_NE(unit, nullptr);
        auto grads = unit->GradsForBackward();
        ASSERT_TRUE(grads.ok());
        ASSERT_EQ(grads->write, GradWrite::kOverwrite);
        ASSERT_EQ(grads->grads.dtype(), comm::Dtype::kFloat32);
        EXPECT_TRUE(grads->fp32_scratch.empty());  // fp32 gradients are written directly
        const absl::Span<float> fp32 = grads->grads.as<float>();
        ASSERT_EQ(fp32.size(), 6u);
        EXPECT_EQ(fp32[5], 0.0f);  // the padding, which no model unit writes
        for (int i = 0; i < 5; ++i) fp32[i] = (r + 1) * (i + 1);
        CommWaitClock clock;
        ASSERT_TRUE(unit->MarkBackwardDone().ok());
        ASSERT_TRUE(unit->StartReduction(c).ok());
        ASSERT_TRUE(unit->FinishReduceScatter(c, absl::Seconds(10), clock).ok());
        ASSERT_TRUE(unit->FinishReduction(absl::Seconds(10), clock).ok());
        auto mine = unit->OwnedReducedGrads();
        ASSERT_TRUE(mine.ok()) << mine.status();
        owned[r] = Widened(*mine);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(owned[r].size(), 3u) << StrategyName(strategy);
      for (int k = 0; k < 3; ++k) {
        const int i = r * 3 + k;
        EXPECT_EQ(owned[r][k], i < 5 ? 1.5f * (i + 1) : 0.0f)
            << StrategyName(strategy) << " rank " << r << " element " << i;
      }
    }
  }
}

// The bf16 layout: the all-gathered bf16 parameters are the rounding of the
// fp32 master shards, which stay exact.
TEST(ShardedUnitTest, Bf16LayoutGathersTheRoundedMaster) {
  constexpr int kWorld = 2;
  auto comms = fsdp_test::MakeThreadCommunicators(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      MemoryTracker tracker;
      fsdp_test::PlainSgd sgd;
      UnitComms c{comms[r].get(), comms[r].get()};
      const proto::UnitPlan plan = PlanOfNumel(4, kWorld, proto::FULL_SHARD);
      auto policy = ParsePrecisionPolicy("bf16", "fp32");  // bf16 parameters only
      ASSERT_TRUE(policy.ok()) << policy.status();
      const UnitRuntime runtime = UnitRuntime::For(Strategy::kFullShard, kWorld, r, kWorld, *policy);
      const float values[4] = {1.0f + 1.0f / 1024, 3.14159265f, -2.718281828f, 1e-3f};
      auto unit = ShardedUnit::Create(plan, runtime, tracker, sgd, [&](absl::Span<float> p) {
        for (int i = 0; i < 4; ++i) p[i] = values[i];
      });
      ASSERT_TRUE(unit.ok()) << unit.status();
      CommWaitClock clock;
      ASSERT_TRUE((*unit)->Unshard(c).ok());
      ASSERT_TRUE((*unit)->WaitForUnshard(absl::Seconds(10), clock).ok());
      EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kCommBuffers), 0);  // nothing staged
      auto params = (*unit)->UnshardedParams();
      ASSERT_TRUE(params.ok()) << params.status();
      ASSERT_EQ(params->dtype(), comm::Dtype::kBFloat16);
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(params->as<uint16_t>()[i], base::ToBf16Bits(values[i])) << i;
      }
      EXPECT_EQ((*unit)->ParamShard()[0], values[2 * r]);  // the master is exact
    });
  }
  for (auto& t : threads) t.join();
}

// [Note: bf16 gradients] Two micro-batches into 2-byte gradients (the first
// rounded, the second added in fp32 and rounded), the sum over two ranks
// rounded, the average rounded: in every strategy the reduced shard holds
// exactly those bf16 values, the gradients are 2 bytes an element, one fp32
// workspace serves, and nothing is staged for the reduce-scatter.
TEST(ShardedUnitTest, Bf16GradientsAccumulateAndReduceInBf16) {
  constexpr int kWorld = 2;
  constexpr int kNumel = 5;  // padded 6, shard 3
  auto bf16 = [](float v) { return base::FromBf16Bits(base::ToBf16Bits(v)); };
  auto micro_batch = [](int r, int m, int i) {
    return (r + 1) * (i + 1) * (1.0f + 1.0f / 512) + m * 0.3f * (i + 1);
  };
  const std::pair<Strategy, proto::ShardingStrategy> strategies[] = {
      {Strategy::kNoShard, proto::NO_SHARD},
      {Strategy::kShardOptimizer, proto::SHARD_OPTIMIZER},
      {Strategy::kShardGradOp, proto::SHARD_GRAD_OP},
      {Strategy::kFullShard, proto::FULL_SHARD},
      {Strategy::kHybridShard, proto::HYBRID_SHARD}};
  for (auto [strategy, plan_strategy] : strategies) {
    auto comms = fsdp_test::MakeThreadCommunicators(kWorld);
    std::vector<std::vector<float>> owned(kWorld);
    std::vector<int64_t> gradient_bytes(kWorld), comm_bytes(kWorld);
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        MemoryTracker tracker;
        fsdp_test::PlainSgd sgd;
        UnitComms c{comms[r].get(), comms[r].get()};
        const proto::UnitPlan plan = PlanOfNumel(kNumel, kWorld, plan_strategy);
        auto workspace = tracker.Allocate<float>(MemoryCategory::kGradients, plan.padded_numel(),
                                                 "workspace");
        ASSERT_TRUE(workspace.ok());
        auto policy = ParsePrecisionPolicy("bf16", "bf16");
        ASSERT_TRUE(policy.ok()) << policy.status();
        const UnitRuntime runtime = UnitRuntime::For(strategy, kWorld, r, kWorld, *policy);
        auto unit = ShardedUnit::Create(
            plan, runtime, tracker, sgd, [&](absl::Span<float> p) { InitCounting(p, kNumel); },
            workspace->span());
        ASSERT_TRUE(unit.ok()) << unit.status();
        for (int m = 0; m < 2; ++m) {
          auto grads = (*unit)->GradsForBackward();
          ASSERT_TRUE(grads.ok()) << grads.status();
          // The first micro-batch overwrites, the second adds.
          ASSERT_EQ(grads->write, m == 0 ? GradWrite::kOverwrite : GradWrite::kAdd);
          // The kept gradients are bf16, the unit's padded size; the fp32
          // workspace comes with them as the model's scratch.
          ASSERT_EQ(grads->grads.dtype(), comm::Dtype::kBFloat16);
          ASSERT_EQ(grads->grads.size(), 6);
          ASSERT_EQ(grads->fp32_scratch.size(), 6u);
          ASSERT_EQ(grads->fp32_scratch.data(), workspace->data());
          const absl::Span<uint16_t> kept = grads->grads.as<uint16_t>();
          if (m == 0) {
            // The padding is zero (no model unit writes it).
            EXPECT_EQ(kept[5], 0);
          }
          // As the trainer's model entry writes them: the first micro-batch
          // straight into the bf16 gradients (Model::BackwardUnit, bf16 UnitGrads),
          // the second through the fp32 scratch, added in fp32 and rounded.
          for (int i = 0; i < kNumel; ++i) {
            if (m == 0) {
              kept[i] = base::ToBf16Bits(micro_batch(r, m, i));
            } else {
              grads->fp32_scratch[i] = micro_batch(r, m, i);
            }
          }
          if (m == 1) {
            AccumulateFloats(grads->grads.subspan(0, kNumel),
                             grads->fp32_scratch.subspan(0, kNumel));
          }
          ASSERT_TRUE((*unit)->MarkBackwardDone().ok());
        }
        CommWaitClock clock;
        ASSERT_TRUE((*unit)->StartReduction(c).ok());
        comm_bytes[r] = tracker.Snapshot().current(MemoryCategory::kCommBuffers);
        ASSERT_TRUE((*unit)->FinishReduceScatter(c, absl::Seconds(10), clock).ok());
        ASSERT_TRUE((*unit)->FinishReduction(absl::Seconds(10), clock).ok());
        gradient_bytes[r] = tracker.Snapshot().current(MemoryCategory::kGradients);
        auto mine = (*unit)->OwnedReducedGrads();
        ASSERT_TRUE(mine.ok()) << mine.status();
        owned[r] = Widened(*mine);
      });
    }
    for (auto& t : threads) t.join();
    const bool sharded_grads = strategy == Strategy::kShardGradOp ||
                               strategy == Strategy::kFullShard ||
                               strategy == Strategy::kHybridShard;
    for (int r = 0; r < kWorld; ++r) {
      const std::string what = absl::StrCat(StrategyName(strategy), " rank ", r);
      // The workspace (6 floats) and the kept gradients: 2 bytes an element
      // of the whole unit (6) or of the shard (3).
      EXPECT_EQ(gradient_bytes[r], 4 * 6 + 2 * (sharded_grads ? 3 : 6)) << what;
      EXPECT_EQ(comm_bytes[r], 0) << what;
      ASSERT_EQ(owned[r].size(), 3u) << what;
      for (int k = 0; k < 3; ++k) {
        const int i = r * 3 + k;
        float expected = 0.0f;
        if (i < kNumel) {
          float sum = 0.0f;
          for (int rank = 0; rank < kWorld; ++rank) {
            sum += bf16(bf16(micro_batch(rank, 0, i)) + micro_batch(rank, 1, i));
          }
          expected = bf16(bf16(sum) * 0.5f);
        }
        EXPECT_EQ(owned[r][k], expected) << what << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace fsdp
