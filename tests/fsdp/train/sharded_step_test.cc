// File: tests/fsdp/train/sharded_step_test.cc
//
// The sharded strategies with N ranks as N threads over the in-process
// communicator (thread_communicator.h), each checked against an independent
// reference rather than numbers it produced:
//   * parity: shard_optimizer, shard_grad_op and full_shard end with the SAME
//     BITS as no_shard at the same world size (fp32), for world sizes 1-4
//     (3: padding), with clipping, accumulation, prefetch depths 0-2, merged
//     units and a unit holding a single weight; hybrid_shard within 1e-6
//     relative; all of them within 1e-5 of one rank on the global batch;
//   (the bf16 layout needs a model with bf16 compute: the GPT, over real
//   processes in tests/integration/train/train_gpt_precision_test.cc);
//   * memory, from the tracker: model state per rank is 1/N of no_shard's
//     (plus padding), and the gathered parameters and unsharded gradients
//     never exceed the plan's bound for the prefetch depth;
//   * errors on every rank: mismatched plans (the first differing field),
//     a group size that does not divide the world.
// The same over real processes: tests/integration/train/.
#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/gpt_model.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/run/unit_optimizers.h"
#include "fsdp/train/train_step.h"
#include "gtest/gtest.h"
#include "tests/fsdp/train/test_models.h"
#include "tests/fsdp/train/thread_communicator.h"

namespace fsdp {
namespace {

using fsdp_test::BigramModel;
using fsdp_test::MakeBatch;
using fsdp_test::MakeThreadCommunicators;
using fsdp_test::OneWeightModel;
using fsdp_test::PlainSgd;
using fsdp_test::SliceForRank;

constexpr int kVocab = 11;  // units of 55 and 66 floats: padding for 4 ranks
constexpr int kDim = 5;
constexpr int kSeqLen = 6;
constexpr int kGlobalBatch = 12;
constexpr int kSteps = 5;
constexpr float kLr = 0.5f;

enum class ModelKind { kBigram, kOneWeight, kBigramWithEmptyUnit };

// The bigram model with a parameterless unit ("identity") between its two
// units: a plan unit with flat_numel = padded_numel = 0, whose collectives
// the runtime must skip on every rank alike.
class WithEmptyUnit : public Model {
 public:
  WithEmptyUnit() : inner_(kVocab, kDim) {
    units_ = {inner_.units()[0], UnitSpec{"identity", {}}, inner_.units()[1]};
  }
  const std::vector<UnitSpec>& units() const override { return units_; }
  void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const override {
    if (unit != 1) inner_.InitUnitParams(unit == 0 ? 0 : 1, params, seed);
  }
  absl::Status ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) override {
    if (unit == 1) return params.empty() ? absl::OkStatus() : absl::InternalError("params");
    return inner_.ForwardUnit(unit == 0 ? 0 : 1, params, batch);
  }
  float loss() const override { return inner_.loss(); }
  absl::Status BackwardUnit(int unit, ConstDtypeSpan params, UnitGrads grads, float loss_scale,
                            GradWrite write) override {
    if (unit == 1) return grads.values.empty() ? absl::OkStatus() : absl::InternalError("grads");
    return inner_.BackwardUnit(unit == 0 ? 0 : 1, params, grads, loss_scale, write);
  }

 private:
  BigramModel inner_;
  std::vector<UnitSpec> units_;
};

struct Config {
  ShardingOptions sharding;  // the step's, as it is
  int world = 1;
  int accum = 1;
  float grad_clip = 0.0f;
  absl::Duration completion_delay = absl::ZeroDuration();
  ModelKind model = ModelKind::kBigram;
};

std::string Describe(const Config& c) {
  const ShardingOptions& s = c.sharding;
  return absl::StrCat(StrategyName(s.strategy), " world ", c.world, " accum ", c.accum, " clip ",
                      c.grad_clip, " group ", s.group_size, " prefetch ", s.prefetch_depth, "/",
                      s.max_gathers_in_flight, " min_unit ", s.min_unit_numel);
}

TrainStepOptions StepOptions(const Config& c) {
  TrainStepOptions o;
  o.sharding = c.sharding;
  o.accum_steps = c.accum;
  o.grad_clip = c.grad_clip;
  o.seed = 1234;
  o.comm_timeout = absl::Seconds(20);
  return o;
}

// Rank `rank` of `world` takes sequences [(m * world + rank) * mb, +mb) of
// the step's global batch for micro-batch m.
std::vector<Batch> RankMicroBatches(int step, int rank, int world, int accum) {
  return SliceForRank(MakeBatch(kGlobalBatch, kSeqLen, kVocab, step), rank, world, accum);
}

struct RunResult {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;  // per model unit, after the last step
};

// Trains with c.world threads; returns rank 0's view and checks that every
// rank ended with bit-identical parameters.
RunResult Train(const Config& c) {
  auto comms = MakeThreadCommunicators(c.world, c.completion_delay);
  std::vector<RunResult> results(c.world);
  std::vector<absl::Status> statuses(c.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.world; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = [&]() -> absl::Status {
        MemoryTracker tracker;
        std::unique_ptr<Model> model;
        if (c.model == ModelKind::kBigram) {
          model = std::make_unique<BigramModel>(kVocab, kDim);
        } else if (c.model == ModelKind::kBigramWithEmptyUnit) {
          model = std::make_unique<WithEmptyUnit>();
        } else {
          model = std::make_unique<OneWeightModel>(0.5f);
        }
        FSDP_ASSIGN_OR_RETURN(auto trainer,
                              DataParallelTrainer::Create(model.get(), comms[r].get(), &tracker,
                                                          std::make_unique<PlainSgd>(),
                                                          StepOptions(c)));
        for (int step = 0; step < kSteps; ++step) {
          std::vector<Batch> batches = RankMicroBatches(step, r, c.world, c.accum);
          FSDP_ASSIGN_OR_RETURN(StepResult result, trainer->Step(batches, kLr));
          results[r].losses.push_back(result.loss);
        }
        FSDP_ASSIGN_OR_RETURN(results[r].params, trainer->GatherParamsInModelOrder());
        return absl::OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < c.world; ++r) {
    EXPECT_TRUE(statuses[r].ok()) << Describe(c) << " rank " << r << ": " << statuses[r];
    EXPECT_EQ(results[r].params, results[0].params) << Describe(c) << " rank " << r;
  }
  return results[0];
}

// Success if every loss and parameter of `got` is within `relative` of
// `want`'s (plus 1e-7 absolute for parameters); else the first mismatch.
::testing::AssertionResult Within(const RunResult& got, const RunResult& want, double relative) {
  if (got.losses.size() != want.losses.size()) {
    return ::testing::AssertionFailure()
           << got.losses.size() << " losses against " << want.losses.size();
  }
  for (size_t s = 0; s < want.losses.size(); ++s) {
    if (!(std::fabs(double{got.losses[s]} - want.losses[s]) <=
          relative * std::fabs(want.losses[s]))) {
      return ::testing::AssertionFailure()
             << "step " << s << " loss " << got.losses[s] << " against " << want.losses[s];
    }
  }
  if (got.params.size() != want.params.size()) {
    return ::testing::AssertionFailure()
           << got.params.size() << " units against " << want.params.size();
  }
  for (size_t u = 0; u < want.params.size(); ++u) {
    if (got.params[u].size() != want.params[u].size()) {
      return ::testing::AssertionFailure() << "unit " << u << " has " << got.params[u].size()
                                           << " elements against " << want.params[u].size();
    }
    for (size_t i = 0; i < want.params[u].size(); ++i) {
      const double bound = relative * std::fabs(want.params[u][i]) + 1e-7;
      if (!(std::fabs(double{got.params[u][i]} - want.params[u][i]) <= bound)) {
        return ::testing::AssertionFailure() << "unit " << u << " element " << i << ": "
                                             << got.params[u][i] << " against "
                                             << want.params[u][i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------
// Parity.

struct ParityCase {
  int world;
  int accum;
  float grad_clip;
};

class ShardedParityTest : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ShardedParityTest, EveryStrategyMatchesNoShardBitForBit) {
  const ParityCase p = GetParam();
  Config base;
  base.world = p.world;
  base.accum = p.accum;
  base.grad_clip = p.grad_clip;
  const RunResult no_shard = Train(base);
  // The single process on the global batch: the independent reference.
  Config single;
  single.grad_clip = p.grad_clip;
  const RunResult reference = Train(single);
  EXPECT_LT(reference.losses.back(), reference.losses.front());  // it learns
  EXPECT_TRUE(Within(no_shard, reference, 1e-5)) << Describe(base);
  for (Strategy strategy :
       {Strategy::kShardOptimizer, Strategy::kShardGradOp, Strategy::kFullShard}) {
    Config c = base;
    c.sharding.strategy = strategy;
    const RunResult sharded = Train(c);
    EXPECT_EQ(sharded.params, no_shard.params) << Describe(c);
    EXPECT_EQ(sharded.losses, no_shard.losses) << Describe(c);
    EXPECT_TRUE(Within(sharded, reference, 1e-5)) << Describe(c);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Worlds, ShardedParityTest,
    ::testing::Values(ParityCase{1, 1, 0.0f}, ParityCase{2, 1, 0.0f}, ParityCase{3, 1, 0.0f},
                      ParityCase{4, 1, 0.0f}, ParityCase{2, 1, 0.05f}, ParityCase{3, 1, 0.05f},
                      ParityCase{4, 1, 0.05f}, ParityCase{2, 3, 0.0f}, ParityCase{3, 2, 0.05f},
                      ParityCase{4, 3, 0.05f}),
    [](const ::testing::TestParamInfo<ParityCase>& info) {
      return absl::StrCat("world", info.param.world, "_accum", info.param.accum,
                          info.param.grad_clip > 0 ? "_clip" : "");
    });

TEST(ShardedParityTest, PrefetchDepthAndGatherLimitDoNotChangeTheResult) {
  Config base;
  base.world = 3;
  base.grad_clip = 0.05f;
  const RunResult no_shard = Train(base);
  for (auto [depth, gathers] : {std::pair{0, 1}, {1, 1}, {1, 2}, {2, 1}, {2, 3}}) {
    Config c = base;
    c.sharding.strategy = Strategy::kFullShard;
    c.sharding.prefetch_depth = depth;
    c.sharding.max_gathers_in_flight = gathers;
    EXPECT_EQ(Train(c).params, no_shard.params) << Describe(c);
  }
}

TEST(ShardedParityTest, MergedUnitsMatchNoShardWithTheSameMerging) {
  Config base;
  base.world = 3;
  base.sharding.min_unit_numel = 60;  // 55 + 66: one plan unit
  const RunResult merged_no_shard = Train(base);
  Config unmerged = base;
  unmerged.sharding.min_unit_numel = 0;
  EXPECT_TRUE(Within(merged_no_shard, Train(unmerged), 1e-6)) << "merged vs unmerged no_shard";
  for (Strategy strategy :
       {Strategy::kShardOptimizer, Strategy::kShardGradOp, Strategy::kFullShard}) {
    Config c = base;
    c.sharding.strategy = strategy;
    EXPECT_EQ(Train(c).params, merged_no_shard.params) << Describe(c);
  }
}

// One unit holding one weight: on 3 and 4 ranks most shards are pure padding.
TEST(ShardedParityTest, SingleTinyParameterUnit) {
  for (int world : {2, 3, 4}) {
    Config base;
    base.world = world;
    base.model = ModelKind::kOneWeight;
    const RunResult no_shard = Train(base);
    for (Strategy strategy :
         {Strategy::kShardOptimizer, Strategy::kShardGradOp, Strategy::kFullShard}) {
      Config c = base;
      c.sharding.strategy = strategy;
      EXPECT_EQ(Train(c).params, no_shard.params) << Describe(c);
    }
    Config hybrid = base;
    hybrid.sharding.strategy = Strategy::kHybridShard;
    hybrid.sharding.group_size = 1;
    EXPECT_TRUE(Within(Train(hybrid), no_shard, 1e-6)) << Describe(hybrid);
  }
}

// A unit without parameters: its (empty) collectives are skipped alike on
// every rank, and training matches the model without it.
TEST(ShardedParityTest, UnitWithoutParameters) {
  Config plain;
  plain.world = 3;
  plain.grad_clip = 0.05f;
  const RunResult reference = Train(plain);
  for (Strategy strategy : {Strategy::kNoShard, Strategy::kShardOptimizer,
                            Strategy::kShardGradOp, Strategy::kFullShard}) {
    Config c = plain;
    c.sharding.strategy = strategy;
    c.model = ModelKind::kBigramWithEmptyUnit;
    c.sharding.prefetch_depth = 2;
    const RunResult run = Train(c);
    ASSERT_EQ(run.params.size(), 3u);
    EXPECT_TRUE(run.params[1].empty());
    EXPECT_EQ(run.params[0], reference.params[0]) << Describe(c);
    EXPECT_EQ(run.params[2], reference.params[1]) << Describe(c);
  }
}

TEST(ShardedParityTest, HybridShardWithinOneMillionth) {
  for (auto [world, group, accum] :
       {std::tuple{2, 1, 1}, {2, 2, 1}, {3, 1, 1}, {3, 3, 2}, {4, 2, 1}, {4, 1, 1}, {4, 4, 1},
        {4, 2, 3}}) {
    Config base;
    base.world = world;
    base.accum = accum;
    base.grad_clip = 0.05f;
    const RunResult no_shard = Train(base);
    Config c = base;
    c.sharding.strategy = Strategy::kHybridShard;
    c.sharding.group_size = group;
    const RunResult hybrid = Train(c);
    EXPECT_TRUE(Within(hybrid, no_shard, 1e-6)) << Describe(c);
    Config single;
    single.grad_clip = 0.05f;
    EXPECT_TRUE(Within(hybrid, Train(single), 1e-5)) << Describe(c) + " vs one process";
  }
}

// Every collective completes 3 ms after its last rank posts it: a prefetch
// or reduction used before it is waited for would read stale buffers.
TEST(ShardedParityTest, SlowCollectivesGiveTheSameBits) {
  Config base;
  base.world = 3;
  base.accum = 2;
  base.grad_clip = 0.05f;
  const RunResult no_shard = Train(base);
  for (Strategy strategy : {Strategy::kShardGradOp, Strategy::kFullShard}) {
    Config c = base;
    c.sharding.strategy = strategy;
    c.sharding.prefetch_depth = 2;
    c.sharding.max_gathers_in_flight = 2;
    c.completion_delay = absl::Milliseconds(3);
    EXPECT_EQ(Train(c).params, no_shard.params) << Describe(c);
  }
}

// ---------------------------------------------------------------------------
// Memory, from the tracker's accounting, on a GPT of 5 units.

struct MemoryRun {
  MemorySnapshot after_create;
  MemorySnapshot after_steps;
  int64_t peak_gathered_numel = 0;
  int64_t peak_unsharded_grad_numel = 0;
  proto::ShardPlan plan;
};

MemoryRun TrainGptForMemory(Strategy strategy, int world, int prefetch_depth,
                            int max_gathers_in_flight) {
  EXPECT_TRUE(SetComputeThreads(1).ok());
  GptConfig config;
  config.layers = 3;
  config.d_model = 16;
  config.heads = 2;
  config.vocab = 29;  // odd sizes: padding
  config.seq_len = 8;
  constexpr int kMicroBatch = 2;
  auto comms = MakeThreadCommunicators(world);
  std::vector<MemoryRun> runs(world);
  std::vector<absl::Status> statuses(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = [&]() -> absl::Status {
        MemoryTracker tracker;
        FSDP_ASSIGN_OR_RETURN(auto model, GptModel::Create(config, kMicroBatch, &tracker));
        FSDP_ASSIGN_OR_RETURN(auto adamw, MakeUnitOptimizer(OptimizerKind::kAdamW, 0.0f));
        TrainStepOptions options;
        options.sharding.strategy = strategy;
        options.sharding.prefetch_depth = prefetch_depth;
        options.sharding.max_gathers_in_flight = max_gathers_in_flight;
        options.comm_timeout = absl::Seconds(30);
        FSDP_ASSIGN_OR_RETURN(auto trainer,
                              DataParallelTrainer::Create(model.get(), comms[r].get(), &tracker,
                                                          std::move(adamw), options));
        runs[r].after_create = tracker.Snapshot();
        runs[r].plan = trainer->plan();
        for (int step = 0; step < 2; ++step) {
          Batch batch = MakeBatch(kMicroBatch, config.seq_len, config.vocab, step * world + r);
          FSDP_ASSIGN_OR_RETURN(StepResult result, trainer->Step({batch}, 1e-3f));
          (void)result;
        }
        runs[r].after_steps = tracker.Snapshot();
        runs[r].peak_gathered_numel = trainer->peak_gathered_param_numel();
        runs[r].peak_unsharded_grad_numel = trainer->peak_unsharded_grad_numel();
        return absl::OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r];
  return runs[0];
}

// The largest sum of padded_numel over `window` consecutive plan units.
int64_t LargestWindow(const proto::ShardPlan& plan, int window) {
  int64_t best = 0;
  for (int first = 0; first < plan.units_size(); ++first) {
    int64_t sum = 0;
    for (int u = first; u < std::min(plan.units_size(), first + window); ++u) {
      sum += plan.units(u).padded_numel();
    }
    best = std::max(best, sum);
  }
  return best;
}

TEST(ShardedMemoryTest, ModelStatePerRankIsOneNthOfNoShard) {
  constexpr int kWorld = 4;
  const MemoryRun no_shard = TrainGptForMemory(Strategy::kNoShard, kWorld, 1, 2);
  const int64_t flat = no_shard.plan.total_flat_numel();
  const int64_t padded = no_shard.plan.total_padded_numel();
  const int64_t shard = no_shard.plan.total_shard_numel();
  ASSERT_EQ(shard * kWorld, padded);
  ASSERT_LT(padded - flat, no_shard.plan.units_size() * kWorld);  // padding only
  using C = MemoryCategory;
  // no_shard: everything whole (AdamW: 2 moments over the real elements).
  EXPECT_EQ(no_shard.after_create.current(C::kParameters), 4 * padded);
  EXPECT_EQ(no_shard.after_create.current(C::kGradients), 4 * padded);
  EXPECT_EQ(no_shard.after_create.current(C::kOptimizerState), 2 * 4 * flat);

  const MemoryRun zero1 = TrainGptForMemory(Strategy::kShardOptimizer, kWorld, 1, 2);
  EXPECT_EQ(zero1.after_create.current(C::kParameters), 4 * padded);
  EXPECT_EQ(zero1.after_create.current(C::kGradients), 4 * padded);
  EXPECT_EQ(zero1.after_create.current(C::kOptimizerState), 2 * 4 * shard);

  const MemoryRun zero2 = TrainGptForMemory(Strategy::kShardGradOp, kWorld, 1, 2);
  EXPECT_EQ(zero2.after_create.current(C::kParameters), 4 * padded);
  EXPECT_EQ(zero2.after_create.current(C::kGradients), 4 * shard);
  EXPECT_EQ(zero2.after_create.current(C::kOptimizerState), 2 * 4 * shard);
  EXPECT_EQ(zero2.after_steps.current(C::kGradients), 4 * shard);  // between steps

  const MemoryRun zero3 = TrainGptForMemory(Strategy::kFullShard, kWorld, 1, 2);
  EXPECT_EQ(zero3.after_create.current(C::kParameters), 4 * shard);
  EXPECT_EQ(zero3.after_create.current(C::kGradients), 4 * shard);
  EXPECT_EQ(zero3.after_create.current(C::kOptimizerState), 2 * 4 * shard);
  EXPECT_EQ(zero3.after_steps.current(C::kParameters), 4 * shard);  // gathered ones freed
  EXPECT_EQ(zero3.after_steps.current(C::kGradients), 4 * shard);
  // 1/N of no_shard within padding: N * shard = padded < flat + units * N.
  EXPECT_LE(kWorld * zero3.after_create.current(C::kParameters),
            no_shard.after_create.current(C::kParameters));
  EXPECT_LT(kWorld * zero3.after_create.current(C::kOptimizerState),
            no_shard.after_create.current(C::kOptimizerState) +
                2 * 4 * no_shard.plan.units_size() * kWorld);
}

TEST(ShardedMemoryTest, WorkingBuffersStayWithinThePlansBound) {
  constexpr int kWorld = 2;
  for (auto [depth, gathers] : {std::pair{0, 1}, {1, 2}, {2, 3}, {2, 1}}) {
    const MemoryRun run = TrainGptForMemory(Strategy::kFullShard, kWorld, depth, gathers);
    const int64_t shard = run.plan.total_shard_numel();
    const int64_t bound = LargestWindow(run.plan, 1 + depth);
    const std::string what = absl::StrCat("prefetch ", depth, " gathers ", gathers);
    EXPECT_LE(run.peak_gathered_numel, bound) << what;
    EXPECT_LE(run.peak_unsharded_grad_numel, LargestWindow(run.plan, 2)) << what;
    // The tracker agrees: beyond the persistent shards, kParameters held at
    // most the bound (Create's one-unit init buffer is below it too).
    EXPECT_LE(run.after_steps.peak(MemoryCategory::kParameters) - 4 * shard, 4 * bound) << what;
    EXPECT_LE(run.after_steps.peak(MemoryCategory::kGradients) - 4 * shard,
              4 * LargestWindow(run.plan, 2))
        << what;
    // Prefetch really holds the next unit: more than one unit gathered.
    if (depth == 0) {
      EXPECT_EQ(run.peak_gathered_numel, LargestWindow(run.plan, 1)) << what;
    } else {
      EXPECT_GT(run.peak_gathered_numel, LargestWindow(run.plan, 1)) << what;
    }
  }
}

// Measured peaks against fsdp/plan/memory_model.h's prediction, category by
// category (fp32, AdamW): the accounting the memory report compares.
TEST(ShardedMemoryTest, MeasuredPeaksWithinThePlansPrediction) {
  for (Strategy strategy : {Strategy::kNoShard, Strategy::kShardOptimizer,
                            Strategy::kShardGradOp, Strategy::kFullShard}) {
    const MemoryRun run = TrainGptForMemory(strategy, 2, 1, 2);
    plan::MemoryModelInputs inputs;
    inputs.optimizer = plan::OptimizerKind::kAdam;
    const plan::RankMemoryPrediction predicted = plan::PredictRankMemory(run.plan, inputs);
    using C = MemoryCategory;
    const std::string what = StrategyName(strategy);
    EXPECT_LE(run.after_steps.peak(C::kParameters),
              predicted.parameter_bytes + predicted.master_parameter_bytes +
                  predicted.gathered_parameter_bytes)
        << what;
    EXPECT_LE(run.after_steps.peak(C::kGradients),
              predicted.gradient_bytes + predicted.unsharded_gradient_bytes)
        << what;
    EXPECT_LE(run.after_steps.peak(C::kOptimizerState), predicted.optimizer_state_bytes) << what;
    if (strategy != Strategy::kNoShard) {  // no_shard's moments skip the padding
      EXPECT_EQ(run.after_steps.peak(C::kOptimizerState), predicted.optimizer_state_bytes)
          << what;
    }
    // Model state between steps is exactly the prediction's persistent part.
    const int64_t persistent_params = run.after_create.current(C::kParameters);
    EXPECT_EQ(persistent_params, predicted.parameter_bytes + predicted.master_parameter_bytes)
        << what;
  }
}

// ---------------------------------------------------------------------------
// Errors on every rank.

// Runs Create on `world` thread ranks, rank r with options_for(r) and
// model_for(r); returns every rank's status.
std::vector<absl::Status> CreateOnEveryRank(
    int world, const std::function<TrainStepOptions(int)>& options_for,
    const std::function<std::unique_ptr<Model>(int)>& model_for) {
  auto comms = MakeThreadCommunicators(world);
  std::vector<absl::Status> statuses(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      MemoryTracker tracker;
      std::unique_ptr<Model> model = model_for(r);
      statuses[r] = DataParallelTrainer::Create(model.get(), comms[r].get(), &tracker,
                                                std::make_unique<PlainSgd>(), options_for(r))
                        .status();
    });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

TEST(PlanAgreementTest, MismatchedOptionsFailOnEveryRankNamingTheField) {
  auto statuses = CreateOnEveryRank(
      3,
      [](int r) {
        TrainStepOptions o;
        o.sharding.strategy = Strategy::kFullShard;
        o.comm_timeout = absl::Seconds(20);
        if (r == 1) o.sharding.min_unit_numel = 1;  // as if rank 1 got other flags
        return o;
      },
      [](int) { return std::make_unique<BigramModel>(kVocab, kDim); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << r << statuses[r];
    EXPECT_NE(statuses[r].message().find("rank 0 and rank 1 hold different shard plans"),
              std::string::npos)
        << statuses[r];
    EXPECT_NE(statuses[r].message().find("min_unit_numel"), std::string::npos) << statuses[r];
  }
}

TEST(PlanAgreementTest, MismatchedModelsFailOnEveryRankNamingTheUnit) {
  auto statuses = CreateOnEveryRank(
      3,
      [](int) {
        TrainStepOptions o;
        o.sharding.strategy = Strategy::kShardGradOp;
        o.comm_timeout = absl::Seconds(20);
        return o;
      },
      [](int r) { return std::make_unique<BigramModel>(kVocab, r == 2 ? kDim + 1 : kDim); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << r << statuses[r];
    EXPECT_NE(statuses[r].message().find("rank 0 and rank 2 hold different shard plans: unit 0 "
                                         "'embed'"),
              std::string::npos)
        << statuses[r];
  }
}

TEST(PlanAgreementTest, GroupSizeNotDividingTheWorldFailsOnEveryRank) {
  auto statuses = CreateOnEveryRank(
      3,
      [](int) {
        TrainStepOptions o;
        o.sharding.strategy = Strategy::kHybridShard;
        o.sharding.group_size = 2;
        o.comm_timeout = absl::Seconds(20);
        return o;
      },
      [](int) { return std::make_unique<BigramModel>(kVocab, kDim); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << r << statuses[r];
    EXPECT_NE(statuses[r].message().find("group_size"), std::string::npos) << statuses[r];
  }
}

}  // namespace
}  // namespace fsdp
