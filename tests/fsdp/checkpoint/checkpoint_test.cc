// File: tests/fsdp/checkpoint/checkpoint_test.cc
//
// SaveCheckpoint and LoadCheckpoint as a library, with N ranks as N threads
// over the in-process communicator (tests/fsdp/train/thread_communicator.h)
// and the bigram test model under AdamW (so there is optimizer state to keep):
//   - a resume at the same world size and strategy continues with the very
//     bits of the run that never stopped (losses and parameters);
//   - a checkpoint saved at 4 ranks full_shard loads at 1, 2 and 3 ranks and
//     under every other strategy (hybrid at group size 2): right after the
//     load the parameters are the saved ones bit for bit, and training goes on
//     within 1e-5 relative of the 4-rank run that never stopped (another
//     world size sums in another order);
//   - the manifest names the step, the plan's world size and every tensor, and
//     one shard file per rank of replica group 0; keep=1 prunes the older
//     checkpoint; loading a directory that is not a checkpoint fails on every
//     rank alike, naming the path.
// The same through train_gpt over real processes:
// tests/integration/train/train_gpt_checkpoint_test.cc.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint.h"
#include "fsdp/checkpoint/checkpoint_reader.h"
#include "fsdp/memory/memory_tracker.h"
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
using fsdp_test::SliceForRank;

constexpr int kVocab = 11;  // units of 55 and 66 floats: padding at 4 ranks
constexpr int kDim = 5;
constexpr int kSeqLen = 6;
constexpr int kGlobalBatch = 12;  // splits over 1, 2, 3 and 4 ranks
constexpr int kSteps = 6;
constexpr float kLr = 0.05f;

using Params = std::vector<std::vector<float>>;

std::string Tmp(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

struct Job {
  Strategy strategy = Strategy::kFullShard;
  int world = 4;
  int group_size = 0;
  std::string load;       // a checkpoint to start from, or ""
  int last_step = kSteps; // trains until this many steps were taken
  std::string save_dir;   // saves after step `save_after` into it, or ""
  int save_after = -1;
  int keep = 0;
};

struct JobResult {
  int first_step = 0;      // steps taken before this job's first (the checkpoint's)
  std::vector<float> losses;  // of this job's steps
  Params params_at_start;  // after Create (and the load)
  Params params;           // after the last step
  std::string saved;       // the checkpoint written, if any
  absl::Status status;     // rank 0's; every rank's must be the same
};

std::string Describe(const Job& j) {
  return absl::StrCat(StrategyName(j.strategy), " at ", j.world, " ranks",
                      j.load.empty() ? "" : " from " + j.load);
}

// Runs `job` with job.world threads; returns rank 0's view after checking that
// every rank reached the same status and parameters.
JobResult RunJob(const Job& job) {
  auto comms = MakeThreadCommunicators(job.world);
  std::vector<JobResult> results(job.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < job.world; ++r) {
    threads.emplace_back([&, r] {
      JobResult& out = results[r];
      out.status = [&]() -> absl::Status {
        comm::Communicator& world = *comms[r];
        MemoryTracker tracker;
        BigramModel model(kVocab, kDim);
        TrainStepOptions options;
        options.sharding.strategy = job.strategy;
        options.sharding.group_size = job.group_size;
        options.seed = 7;
        options.comm_timeout = absl::Seconds(20);
        FSDP_ASSIGN_OR_RETURN(std::unique_ptr<UnitOptimizer> adamw,
                              MakeUnitOptimizer(OptimizerKind::kAdamW, 0.1f));
        FSDP_ASSIGN_OR_RETURN(auto trainer,
                              DataParallelTrainer::Create(&model, &world, &tracker,
                                                          std::move(adamw), options));
        if (!job.load.empty()) {
          FSDP_ASSIGN_OR_RETURN(checkpoint::LoadStats loaded,
                                checkpoint::LoadCheckpoint(world, *trainer, job.load,
                                                           absl::Seconds(20), &tracker));
          out.first_step = static_cast<int>(loaded.step);
        }
        FSDP_ASSIGN_OR_RETURN(out.params_at_start, trainer->GatherParamsInModelOrder());
        for (int step = out.first_step; step < job.last_step; ++step) {
          const std::vector<Batch> batches =
              SliceForRank(MakeBatch(kGlobalBatch, kSeqLen, kVocab, step), r, job.world, 1);
          FSDP_ASSIGN_OR_RETURN(StepResult result, trainer->Step(batches, kLr));
          out.losses.push_back(result.loss);
          if (!job.save_dir.empty() && step + 1 == job.save_after) {
            checkpoint::SaveOptions save;
            save.dir = job.save_dir;
            save.keep = job.keep;
            save.timeout = absl::Seconds(20);
            FSDP_ASSIGN_OR_RETURN(
                checkpoint::SaveStats saved,
                checkpoint::SaveCheckpoint(world, *trainer, proto::CheckpointManifest(), save));
            out.saved = saved.path;
          }
        }
        FSDP_ASSIGN_OR_RETURN(out.params, trainer->GatherParamsInModelOrder());
        return absl::OkStatus();
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < job.world; ++r) {
    EXPECT_EQ(results[r].status.code(), results[0].status.code())
        << Describe(job) << " rank " << r << ": " << results[r].status;
    EXPECT_EQ(results[r].params, results[0].params) << Describe(job) << " rank " << r;
  }
  return results[0];
}

// Success if every value of `got` is within `relative` of `want`'s (plus
// 1e-7 absolute); else the first mismatch.
::testing::AssertionResult Within(const Params& got, const Params& want, double relative) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " units against " << want.size();
  }
  for (size_t u = 0; u < want.size(); ++u) {
    if (got[u].size() != want[u].size()) {
      return ::testing::AssertionFailure() << "unit " << u << ": " << got[u].size()
                                           << " elements against " << want[u].size();
    }
    for (size_t i = 0; i < want[u].size(); ++i) {
      if (!(std::fabs(double{got[u][i]} - want[u][i]) <=
            relative * std::fabs(want[u][i]) + 1e-7)) {
        return ::testing::AssertionFailure() << "unit " << u << " element " << i << ": "
                                             << got[u][i] << " against " << want[u][i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// The 4-rank full_shard run that never stops, and the same run saving a
// checkpoint after step 3 (saving only reads the trainer: the same bits).
struct Reference {
  JobResult uninterrupted;
  Params at_save;     // its parameters after step 3
  std::string saved;  // the checkpoint after step 3
};

const Reference& FourRankReference() {
  static const Reference* reference = [] {
    auto* ref = new Reference;
    Job stopped;
    stopped.last_step = 3;
    ref->at_save = RunJob(stopped).params;
    Job saving;
    saving.save_dir = Tmp("reference");
    saving.save_after = 3;
    ref->uninterrupted = RunJob(saving);
    EXPECT_TRUE(ref->uninterrupted.status.ok()) << ref->uninterrupted.status;
    ref->saved = ref->uninterrupted.saved;
    return ref;
  }();
  return *reference;
}

TEST(CheckpointLibraryTest, ResumeAtTheSameWorldSizeAndStrategyHasTheSameBits) {
  const Reference& ref = FourRankReference();
  ASSERT_FALSE(ref.saved.empty());
  const JobResult& whole = ref.uninterrupted;
  ASSERT_EQ(whole.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(whole.losses.back(), whole.losses.front());  // it learns

  Job resumed;
  resumed.load = ref.saved;
  const JobResult after = RunJob(resumed);
  ASSERT_TRUE(after.status.ok()) << after.status;
  EXPECT_EQ(after.first_step, 3);
  EXPECT_EQ(after.params_at_start, ref.at_save);
  // The steps after the checkpoint, loss for loss and bit for bit: the
  // optimizer state came back too (without it AdamW's next step differs).
  ASSERT_EQ(after.losses.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(after.losses[i], whole.losses[3 + i]) << "step " << 4 + i;
  EXPECT_EQ(after.params, whole.params);
}

TEST(CheckpointLibraryTest, AFourRankFullShardCheckpointLoadsAtEveryWorldSizeAndStrategy) {
  const Reference& ref = FourRankReference();
  ASSERT_FALSE(ref.saved.empty());
  struct Case {
    Strategy strategy;
    int world, group_size;
  };
  const std::vector<Case> cases = {
      {Strategy::kFullShard, 1, 0},       {Strategy::kFullShard, 2, 0},
      {Strategy::kFullShard, 3, 0},       {Strategy::kNoShard, 2, 0},
      {Strategy::kShardOptimizer, 3, 0},  {Strategy::kShardGradOp, 4, 0},
      {Strategy::kHybridShard, 4, 2},
  };
  for (const Case& c : cases) {
    Job job;
    job.strategy = c.strategy;
    job.world = c.world;
    job.group_size = c.group_size;
    job.load = ref.saved;
    const JobResult after = RunJob(job);
    ASSERT_TRUE(after.status.ok()) << Describe(job) << ": " << after.status;
    EXPECT_EQ(after.first_step, 3) << Describe(job);
    EXPECT_EQ(after.params_at_start, ref.at_save) << Describe(job);
    EXPECT_TRUE(Within(after.params, ref.uninterrupted.params, 1e-5)) << Describe(job);
  }
}

TEST(CheckpointLibraryTest, TheManifestDescribesTheSaveAndKeepPrunes) {
  const std::string dir = Tmp("pruned");
  Job job;
  job.world = 2;
  job.save_dir = dir;
  job.keep = 1;
  // Two saves into one directory: after step 2 and after step 4.
  job.last_step = 2;
  job.save_after = 2;
  const JobResult first = RunJob(job);
  ASSERT_TRUE(first.status.ok()) << first.status;
  Job second = job;
  second.load = first.saved;
  second.last_step = 4;
  second.save_after = 4;
  const JobResult later = RunJob(second);
  ASSERT_TRUE(later.status.ok()) << later.status;
  EXPECT_FALSE(std::filesystem::exists(first.saved)) << "keep=1 should prune " << first.saved;
  ASSERT_TRUE(std::filesystem::exists(later.saved));

  absl::StatusOr<proto::CheckpointManifest> manifest = checkpoint::ReadManifest(later.saved);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->step(), 4);
  EXPECT_EQ(manifest->plan().world_size(), 2);
  EXPECT_EQ(manifest->files_size(), 2);  // full_shard: every rank owns a shard
  int64_t numel = 0;
  for (const proto::TensorEntry& t : manifest->tensors()) {
    EXPECT_EQ(t.model_offset(), numel) << t.name();
    numel += t.numel();
  }
  EXPECT_EQ(numel, manifest->model_numel());
  EXPECT_EQ(numel, kVocab * kDim + kDim * kVocab + kVocab);  // E, W, b
}

TEST(CheckpointLibraryTest, ADirectoryThatIsNotACheckpointFailsOnEveryRank) {
  const std::string dir = Tmp("not_a_checkpoint");
  std::filesystem::create_directories(dir);
  Job job;
  job.world = 3;
  job.load = dir;
  const JobResult result = RunJob(job);  // checks every rank's code is rank 0's
  ASSERT_FALSE(result.status.ok());
  EXPECT_NE(std::string(result.status.message()).find(dir), std::string::npos)
      << result.status;
}

}  // namespace
}  // namespace fsdp
