// File: tests/fsdp/train/exact_step_test.cc
//
// The step with ReductionKind::kExact ([Note: exact gradients] in
// fsdp/train/unit_state.h) on the GPT, N ranks as N threads over the
// in-process communicator: the parameters and losses after a few steps are
// the same bits at every world size (1-4), accumulation split and strategy
// (hybrid at group size 2), and equal to the plain step's within rounding;
// the gradient noise scale's norms agree with the plain step's;
// a trainer refuses a model without per-sequence products and more than one
// compute thread; and the memory the mode adds is the memory model's, to
// the byte.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
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

using fsdp_test::MakeBatch;
using fsdp_test::MakeThreadCommunicators;
using fsdp_test::SliceForRank;

constexpr int kGlobalBatch = 12;
constexpr int kSteps = 3;

GptConfig Config(bool exact) {
  GptConfig c;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 2;
  c.vocab = 29;  // odd sizes: padding
  c.seq_len = 8;
  c.per_sequence_products = exact;
  return c;
}

struct RunSpec {
  int world = 1;
  int accum = 1;
  Strategy strategy = Strategy::kNoShard;
  int group_size = 0;
  bool exact = true;
};

std::string Describe(const RunSpec& r) {
  return absl::StrCat(StrategyName(r.strategy), " world ", r.world, " accum ", r.accum,
                      r.exact ? " exact" : " plain");
}

struct Result {
  std::vector<float> losses;
  std::vector<GradientNormPair> noise;  // per step
  std::vector<std::vector<float>> params;
  MemorySnapshot memory;
  proto::ShardPlan plan;
};

Result Train(const RunSpec& run) {
  EXPECT_TRUE(SetComputeThreads(1).ok());
  const GptConfig config = Config(run.exact);
  auto comms = MakeThreadCommunicators(run.world);
  std::vector<Result> results(run.world);
  std::vector<absl::Status> statuses(run.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < run.world; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = [&]() -> absl::Status {
        MemoryTracker tracker;
        const int micro_batch = kGlobalBatch / (run.world * run.accum);
        FSDP_ASSIGN_OR_RETURN(auto model, GptModel::Create(config, micro_batch, &tracker));
        FSDP_ASSIGN_OR_RETURN(auto adamw, MakeUnitOptimizer(OptimizerKind::kAdamW, 0.01f));
        TrainStepOptions options;
        options.sharding.strategy = run.strategy;
        options.sharding.group_size = run.group_size;
        FSDP_ASSIGN_OR_RETURN(options.sharding.precision,
                              ParsePrecisionPolicy("fp32", "", run.exact));
        options.accum_steps = run.accum;
        options.grad_clip = 0.5f;
        options.seed = 5;
        options.comm_timeout = absl::Seconds(30);
        FSDP_ASSIGN_OR_RETURN(auto trainer,
                              DataParallelTrainer::Create(model.get(), comms[r].get(), &tracker,
                                                          std::move(adamw), options));
        results[r].plan = trainer->plan();
        for (int step = 0; step < kSteps; ++step) {
          const Batch global = MakeBatch(kGlobalBatch, config.seq_len, config.vocab, step);
          FSDP_ASSIGN_OR_RETURN(
              StepResult result,
              trainer->Step(SliceForRank(global, r, run.world, run.accum), 3e-3f));
          results[r].losses.push_back(result.loss);
          results[r].noise.push_back(result.noise_norms);
        }
        results[r].memory = tracker.Snapshot();
        FSDP_ASSIGN_OR_RETURN(results[r].params, trainer->GatherParamsInModelOrder());
        return absl::OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < run.world; ++r) {
    EXPECT_TRUE(statuses[r].ok()) << Describe(run) << " rank " << r << ": " << statuses[r];
  }
  return results[0];
}

TEST(ExactStepTest, TheSameBitsAtEveryWorldSizeSplitAndStrategy) {
  const Result one = Train({1, 1, Strategy::kNoShard});
  ASSERT_EQ(one.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(one.losses.back(), one.losses.front());
  const std::vector<RunSpec> runs = {
      {1, 3, Strategy::kFullShard},      {2, 1, Strategy::kNoShard},
      {2, 2, Strategy::kShardOptimizer}, {3, 1, Strategy::kShardGradOp},
      {3, 2, Strategy::kFullShard},      {4, 1, Strategy::kHybridShard, 2},
      {4, 3, Strategy::kNoShard},
  };
  for (const RunSpec& run : runs) {
    const Result got = Train(run);
    EXPECT_EQ(got.losses, one.losses) << Describe(run);
    EXPECT_TRUE(got.params == one.params) << Describe(run) << ": the parameters differ";
  }
}

TEST(ExactStepTest, WithinRoundingOfThePlainStep) {
  const Result exact = Train({2, 1, Strategy::kFullShard, 0, true});
  const Result plain = Train({2, 1, Strategy::kFullShard, 0, false});
  ASSERT_EQ(exact.losses.size(), plain.losses.size());
  for (size_t s = 0; s < plain.losses.size(); ++s) {
    EXPECT_NEAR(exact.losses[s], plain.losses[s], 1e-5 * std::fabs(plain.losses[s])) << s;
  }
  // The gradient noise scale's two norms (a statistic of either mode).
  ASSERT_EQ(exact.noise.size(), plain.noise.size());
  for (size_t s = 0; s < plain.noise.size(); ++s) {
    EXPECT_GT(exact.noise[s].small_sq_norm, 0.0) << s;
    EXPECT_EQ(exact.noise[s].small_batch, plain.noise[s].small_batch) << s;
    EXPECT_NEAR(exact.noise[s].small_sq_norm, plain.noise[s].small_sq_norm,
                1e-3 * plain.noise[s].small_sq_norm) << s;
    EXPECT_NEAR(exact.noise[s].big_sq_norm, plain.noise[s].big_sq_norm,
                1e-3 * plain.noise[s].big_sq_norm) << s;
  }
  ASSERT_EQ(exact.params.size(), plain.params.size());
  for (size_t u = 0; u < plain.params.size(); ++u) {
    for (size_t i = 0; i < plain.params[u].size(); ++i) {
      ASSERT_NEAR(exact.params[u][i], plain.params[u][i],
                  1e-4 * std::fabs(plain.params[u][i]) + 1e-6)
          << "unit " << u << " element " << i;
    }
  }
}

TEST(ExactStepTest, TheAddedMemoryIsTheMemoryModels) {
  for (Strategy strategy : {Strategy::kNoShard, Strategy::kShardOptimizer,
                            Strategy::kShardGradOp, Strategy::kFullShard}) {
    const Result run = Train({2, 1, strategy});
    plan::MemoryModelInputs inputs;
    inputs.optimizer = plan::OptimizerKind::kAdam;
    const plan::RankMemoryPrediction predicted = plan::PredictRankMemory(run.plan, inputs);
    using C = MemoryCategory;
    const std::string what = StrategyName(strategy);
    EXPECT_EQ(run.memory.peak(C::kCommBuffers), predicted.communication_scratch_bytes) << what;
    EXPECT_EQ(run.memory.peak(C::kGradients), predicted.gradient_bytes +
                                                  predicted.unsharded_gradient_bytes +
                                                  predicted.gradient_workspace_bytes)
        << what;
  }
}

TEST(ExactStepTest, RefusesWhatCannotBeExact) {
  ASSERT_TRUE(SetComputeThreads(1).ok());
  auto comms = MakeThreadCommunicators(1);
  MemoryTracker tracker;
  TrainStepOptions options;
  const absl::StatusOr<PrecisionPolicy> policy = ParsePrecisionPolicy("fp32", "", /*exact=*/true);
  ASSERT_TRUE(policy.ok()) << policy.status();
  options.sharding.precision = *policy;
  auto plain = GptModel::Create(Config(false), 2, &tracker);
  ASSERT_TRUE(plain.ok());
  absl::Status s = DataParallelTrainer::Create(plain->get(), comms[0].get(), &tracker,
                                               std::make_unique<fsdp_test::PlainSgd>(), options)
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("one sequence at a time"), std::string::npos) << s;

  auto exact = GptModel::Create(Config(true), 2, &tracker);
  ASSERT_TRUE(exact.ok());
  ASSERT_TRUE(SetComputeThreads(2).ok());
  s = DataParallelTrainer::Create(exact->get(), comms[0].get(), &tracker,
                                  std::make_unique<fsdp_test::PlainSgd>(), options)
          .status();
  ASSERT_TRUE(SetComputeThreads(1).ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the compute threads are 2"), std::string::npos) << s;
}

}  // namespace
}  // namespace fsdp
