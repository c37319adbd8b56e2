// File: tests/fsdp/train/train_step_test.cc
//
// The replicated data-parallel step with N ranks as N threads over an
// in-process communicator (thread_communicator.h): the cross-rank arithmetic
// of the step, checked against one rank computing the whole global batch.
// The same properties over real processes: tests/integration/train/.
#include "fsdp/train/train_step.h"

#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
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

constexpr int kVocab = 11;  // odd sizes: units of 55 and 66 floats pad for 4 ranks
constexpr int kDim = 5;
constexpr int kSeqLen = 6;
constexpr int kGlobalBatch = 12;  // sequences per optimizer step
constexpr int kSteps = 5;
constexpr float kLr = 0.5f;

struct RunResult {
  std::vector<float> losses;               // per step
  std::vector<std::vector<float>> params;  // per unit, after the last step
};

// Rank `rank` of `world` takes sequences [(m * world + rank) * mb, +mb) of
// the step's global batch for micro-batch m.
std::vector<Batch> RankMicroBatches(int step, int rank, int world, int accum) {
  return SliceForRank(MakeBatch(kGlobalBatch, kSeqLen, kVocab, step), rank, world, accum);
}

// Trains the bigram model with `world` threads; returns rank 0's view, and
// checks every rank ended with bit-identical parameters.
RunResult TrainBigram(int world, int accum, float grad_clip,
                      absl::Duration completion_delay = absl::ZeroDuration()) {
  auto comms = MakeThreadCommunicators(world, completion_delay);
  std::vector<RunResult> results(world);
  std::vector<absl::Status> statuses(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = [&]() -> absl::Status {
        MemoryTracker tracker;
        BigramModel model(kVocab, kDim);
        TrainStepOptions options;
        options.accum_steps = accum;
        options.grad_clip = grad_clip;
        options.seed = 1234;
        options.comm_timeout = absl::Seconds(20);
        FSDP_ASSIGN_OR_RETURN(auto trainer,
                              DataParallelTrainer::Create(&model, comms[r].get(), &tracker,
                                                          std::make_unique<PlainSgd>(), options));
        for (int step = 0; step < kSteps; ++step) {
          std::vector<Batch> batches = RankMicroBatches(step, r, world, accum);
          FSDP_ASSIGN_OR_RETURN(StepResult result, trainer->Step(batches, kLr));
          results[r].losses.push_back(result.loss);
        }
        FSDP_ASSIGN_OR_RETURN(results[r].params, trainer->GatherParamsInModelOrder());
        return absl::OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    EXPECT_EQ(results[r].params, results[0].params) << "rank " << r << " diverged";
  }
  return results[0];
}

void ExpectClose(const RunResult& got, const RunResult& want, const std::string& what) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-5 * std::fabs(want.losses[s]))
        << what << " step " << s;
  }
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t u = 0; u < want.params.size(); ++u) {
    ASSERT_EQ(got.params[u].size(), want.params[u].size());
    for (size_t i = 0; i < want.params[u].size(); ++i) {
      EXPECT_NEAR(got.params[u][i], want.params[u][i], 1e-5f + 1e-5f * std::fabs(want.params[u][i]))
          << what << " unit " << u << " element " << i;
    }
  }
}

struct Split {
  int world;
  int accum;
};

class GlobalBatchParityTest : public ::testing::TestWithParam<Split> {};

// One rank on the whole global batch is the reference; every split of the
// same global batch over ranks and micro-batches must reproduce it.
TEST_P(GlobalBatchParityTest, MatchesOneRankOnTheWholeBatch) {
  const RunResult reference = TrainBigram(/*world=*/1, /*accum=*/1, /*grad_clip=*/0.0f);
  // The reference must actually learn, or parity would be vacuous.
  EXPECT_LT(reference.losses.back(), reference.losses.front());
  const Split split = GetParam();
  ExpectClose(TrainBigram(split.world, split.accum, 0.0f), reference,
              absl::StrCat("world ", split.world, " accum ", split.accum));
}

TEST_P(GlobalBatchParityTest, MatchesOneRankWithClipping) {
  // A clip well below the initial norm, so clipping is active every step.
  const RunResult reference = TrainBigram(1, 1, /*grad_clip=*/0.05f);
  const Split split = GetParam();
  ExpectClose(TrainBigram(split.world, split.accum, 0.05f), reference,
              absl::StrCat("clipped, world ", split.world, " accum ", split.accum));
}

INSTANTIATE_TEST_SUITE_P(Splits, GlobalBatchParityTest,
                         ::testing::Values(Split{1, 2}, Split{2, 1}, Split{3, 1}, Split{4, 1},
                                           Split{2, 2}, Split{2, 3}, Split{3, 4}),
                         [](const ::testing::TestParamInfo<Split>& info) {
                           return absl::StrCat("world", info.param.world, "_accum",
                                               info.param.accum);
                         });

// A slow network (every collective completes 3 ms after its last rank posts
// it): the overlapped reductions must still be waited for before their
// results are used, so the numbers are unchanged.
TEST(TrainStepPerturbationTest, SlowCollectivesGiveTheSameResult) {
  const RunResult reference = TrainBigram(1, 1, 0.05f);
  ExpectClose(TrainBigram(3, 2, 0.05f, absl::Milliseconds(3)), reference, "slow world 3 accum 2");
  ExpectClose(TrainBigram(4, 1, 0.0f, absl::Milliseconds(3)), TrainBigram(1, 1, 0.0f),
              "slow world 4");
}

// The worked example of docs/data-parallel.md: four ranks whose gradients for
// one weight are 0.8, 1.2, 1.0 and 1.0 all receive their mean and take the
// identical step.
TEST(WorkedExampleTest, FourRanksAverageOneWeight) {
  constexpr int kWorld = 4;
  const int first_token[kWorld] = {8, 12, 10, 10};
  constexpr float kInitial = 0.5f;
  constexpr float kStepLr = 0.1f;
  auto comms = MakeThreadCommunicators(kWorld);
  std::vector<float> local_grad(kWorld), received(kWorld), weight(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      MemoryTracker tracker;
      OneWeightModel model(kInitial);
      auto sgd = std::make_unique<PlainSgd>();
      PlainSgd* sgd_view = sgd.get();
      auto trainer = DataParallelTrainer::Create(&model, comms[r].get(), &tracker,
                                                 std::move(sgd), TrainStepOptions{});
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      Batch batch;
      batch.batch_size = 1;
      batch.seq_len = 1;
      batch.inputs = {first_token[r]};
      batch.targets = {0};
      auto result = (*trainer)->Step({batch}, kStepLr);
      ASSERT_TRUE(result.ok()) << result.status();
      local_grad[r] = model.last_local_grad();
      received[r] = sgd_view->last_grads()[0][0];
      auto params = (*trainer)->GatherParamsInModelOrder();
      ASSERT_TRUE(params.ok()) << params.status();
      weight[r] = (*params)[0][0];
    });
  }
  for (auto& t : threads) t.join();
  double mean = 0.0;
  for (int r = 0; r < kWorld; ++r) mean += first_token[r] / 10.0;
  mean /= kWorld;
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_NEAR(local_grad[r], first_token[r] / 10.0, 1e-7) << "rank " << r;
    EXPECT_NEAR(received[r], mean, 1e-7) << "rank " << r;
    EXPECT_EQ(received[r], received[0]) << "rank " << r;
    EXPECT_EQ(weight[r], weight[0]) << "rank " << r << " took a different step";
    EXPECT_NEAR(weight[r], kInitial - kStepLr * mean, 1e-7) << "rank " << r;
  }
}

// A rank that never joins the step: the others fail within the timeout with
// an error naming the unit being reduced and the missing rank.
TEST(TrainStepTimeoutTest, MissingRankGivesNamedDeadlineError) {
  auto comms = MakeThreadCommunicators(2);
  TrainStepOptions options;
  options.comm_timeout = absl::Milliseconds(200);
  // Rank 1 takes part in Create (the shard-plan check is collective) and
  // then never steps.
  std::thread rank1([&] {
    MemoryTracker tracker;
    BigramModel model(kVocab, kDim);
    auto trainer = DataParallelTrainer::Create(&model, comms[1].get(), &tracker,
                                               std::make_unique<PlainSgd>(), options);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
  });
  MemoryTracker tracker;
  BigramModel model(kVocab, kDim);
  auto trainer = DataParallelTrainer::Create(&model, comms[0].get(), &tracker,
                                             std::make_unique<PlainSgd>(), options);
  rank1.join();
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const absl::Time start = absl::Now();
  auto result = (*trainer)->Step(RankMicroBatches(0, 0, 2, 1), kLr);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  EXPECT_NE(result.status().message().find("unit 1 (head) gradient reduce-scatter"),
            std::string::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("rank(s) 1"), std::string::npos) << result.status();
}

// A rank that never arrives at all: Create's shard-plan check names it.
TEST(TrainStepTimeoutTest, MissingRankAtCreateIsNamed) {
  auto comms = MakeThreadCommunicators(2);
  MemoryTracker tracker;
  BigramModel model(kVocab, kDim);
  TrainStepOptions options;
  options.comm_timeout = absl::Milliseconds(200);
  auto trainer = DataParallelTrainer::Create(&model, comms[0].get(), &tracker,
                                             std::make_unique<PlainSgd>(), options);
  ASSERT_EQ(trainer.status().code(), absl::StatusCode::kDeadlineExceeded) << trainer.status();
  EXPECT_NE(trainer.status().message().find("shard plan check"), std::string::npos)
      << trainer.status();
  EXPECT_NE(trainer.status().message().find("rank(s) 1"), std::string::npos) << trainer.status();
}

TEST(TrainStepOptionsTest, RejectsBadGroupSizeAndBadAccumulation) {
  auto comms = MakeThreadCommunicators(1);
  MemoryTracker tracker;
  BigramModel model(kVocab, kDim);
  TrainStepOptions options;
  options.sharding.strategy = Strategy::kHybridShard;
  options.sharding.group_size = 2;  // more than the one rank
  auto trainer = DataParallelTrainer::Create(&model, comms[0].get(), &tracker,
                                             std::make_unique<PlainSgd>(), options);
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kInvalidArgument) << trainer.status();
  EXPECT_NE(trainer.status().message().find("group_size"), std::string::npos)
      << trainer.status();
  options.sharding.strategy = Strategy::kFullShard;
  options.sharding.group_size = 0;
  options.accum_steps = 0;
  trainer = DataParallelTrainer::Create(&model, comms[0].get(), &tracker,
                                        std::make_unique<PlainSgd>(), options);
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainStepBatchesTest, WrongNumberOfMicroBatchesIsAnError) {
  auto comms = MakeThreadCommunicators(1);
  MemoryTracker tracker;
  BigramModel model(kVocab, kDim);
  TrainStepOptions options;
  options.accum_steps = 2;
  auto trainer = DataParallelTrainer::Create(&model, comms[0].get(), &tracker,
                                             std::make_unique<PlainSgd>(), options);
  ASSERT_TRUE(trainer.ok());
  auto result = (*trainer)->Step(RankMicroBatches(0, 0, 1, 1), kLr);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainStepMemoryTest, FlatBuffersAreTrackedByCategory) {
  auto comms = MakeThreadCommunicators(1);
  MemoryTracker tracker;
  BigramModel model(kVocab, kDim);
  auto trainer = DataParallelTrainer::Create(&model, comms[0].get(), &tracker,
                                             std::make_unique<PlainSgd>(), TrainStepOptions{});
  ASSERT_TRUE(trainer.ok());
  const int64_t numel = kVocab * kDim + (kDim * kVocab + kVocab);
  MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.current(MemoryCategory::kParameters), 4 * numel);
  EXPECT_EQ(s.current(MemoryCategory::kGradients), 4 * numel);
  // One grad shard per unit (the whole unit for one rank) + the loss/norm
  // exchange (16 bytes a rank).
  EXPECT_EQ(s.current(MemoryCategory::kCommBuffers), 4 * numel + 16);
}

}  // namespace
}  // namespace fsdp
