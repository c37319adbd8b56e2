// File: tests/fsdp/checkpoint/memory_snapshots_test.cc
//
// Memory snapshots and the handover (fsdp/checkpoint/memory_snapshots.h,
// handover.h) with N ranks as N threads over the in-process communicator and
// the bigram test model under AdamW:
//   - full_shard at 4 ranks: each rank holds its own shard and the previous
//     rank's; with rank 2 dead the three survivors' copies assemble into a
//     checkpoint of the last step, which loads at 3 ranks with the very
//     parameters of that step and trains on as the 4-rank run does;
//   - a generation that lost both copies of a shard is passed over for the
//     newest whole one, with a note naming the shard;
//   - with replicas (hybrid_shard, 2 groups of 2) nothing is sent: the other
//     group's own copies stand in for a dead rank.
// Through train_gpt over real processes: tests/integration/train/
// train_gpt_elastic_test.cc.
#include "fsdp/checkpoint/memory_snapshots.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint.h"
#include "fsdp/checkpoint/checkpoint_dir.h"
#include "fsdp/checkpoint/handover.h"
#include "fsdp/exchange/blob_exchange.h"
#include "fsdp/memory/memory_tracker.h"
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
using fsdp_test::SliceForRank;

constexpr int kVocab = 11;  // units of 55 and 66 floats: padding at 4 ranks
constexpr int kDim = 5;
constexpr int kSeqLen = 6;
constexpr int kGlobalBatch = 12;
constexpr float kLr = 0.05f;
constexpr absl::Duration kTimeout = absl::Seconds(20);

using Params = std::vector<std::vector<float>>;

std::string Tmp(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

struct Job {
  Strategy strategy = Strategy::kFullShard;
  int world = 4;
  int group_size = 0;
  std::string load;  // a checkpoint to start from, or ""
  int steps = 3;     // trained until this many steps were taken
  // With a handover directory: a memory snapshot after every step, and at
  // the end every rank but `dead` hands its pieces that `keep` accepts over.
  std::string handover;
  int dead = -1;
  std::function<bool(int rank, const checkpoint::SnapshotPiece&)> keep;
};

struct JobResult {
  std::vector<Params> params_after;  // [s]: after step s (from the first step taken)
  Params params_at_start;
  std::vector<float> losses;
  bool buddy_copies = false;
  int64_t snapshot_bytes = 0;            // the tracker's, on this rank
  int64_t predicted_snapshot_bytes = 0;  // the memory model's (rank 0 of its group)
  absl::Status status;
};

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
        options.comm_timeout = kTimeout;
        FSDP_ASSIGN_OR_RETURN(std::unique_ptr<UnitOptimizer> adamw,
                              MakeUnitOptimizer(OptimizerKind::kAdamW, 0.1f));
        FSDP_ASSIGN_OR_RETURN(auto trainer, DataParallelTrainer::Create(&model, &world, &tracker,
                                                                        std::move(adamw), options));
        int first = 0;
        if (!job.load.empty()) {
          FSDP_ASSIGN_OR_RETURN(
              checkpoint::LoadStats loaded,
              checkpoint::LoadCheckpoint(world, *trainer, job.load, kTimeout, &tracker));
          first = static_cast<int>(loaded.step);
        }
        FSDP_ASSIGN_OR_RETURN(out.params_at_start, trainer->GatherParamsInModelOrder());
        std::unique_ptr<checkpoint::MemorySnapshots> snapshots;
        if (!job.handover.empty()) {
          FSDP_ASSIGN_OR_RETURN(
              snapshots, checkpoint::MemorySnapshots::Create(world, *trainer, &tracker, kTimeout));
          out.buddy_copies = snapshots->buddy_copies();
          out.snapshot_bytes =
              tracker.Snapshot().current_bytes[static_cast<int>(MemoryCategory::kSnapshots)];
          out.predicted_snapshot_bytes =
              plan::MemorySnapshotBytes(trainer->plan(), plan::OptimizerKind::kAdam);
        }
        out.params_after.push_back(out.params_at_start);
        for (int step = first; step < job.steps; ++step) {
          const std::vector<Batch> batches =
              SliceForRank(MakeBatch(kGlobalBatch, kSeqLen, kVocab, step), r, job.world, 1);
          FSDP_ASSIGN_OR_RETURN(StepResult result, trainer->Step(batches, kLr));
          out.losses.push_back(result.loss);
          if (snapshots != nullptr) {
            proto::CheckpointManifest manifest;
            manifest.mutable_data()->set_global_batch(kGlobalBatch);
            FSDP_RETURN_IF_ERROR(snapshots->Take(step + 1, manifest, kTimeout));
            // The all-gather every rank joins after its Take: the commit.
            FSDP_RETURN_IF_ERROR(AllGatherU64(world, 0, kTimeout, "commit").status());
            snapshots->Commit();
          }
          FSDP_ASSIGN_OR_RETURN(Params params, trainer->GatherParamsInModelOrder());
          out.params_after.push_back(std::move(params));
        }
        if (snapshots != nullptr && r != job.dead) {
          std::vector<checkpoint::SnapshotPiece> pieces;
          for (const checkpoint::SnapshotPiece& piece : snapshots->CompletePieces()) {
            if (!job.keep || job.keep(r, piece)) pieces.push_back(piece);
          }
          FSDP_RETURN_IF_ERROR(checkpoint::WriteHandover(job.handover, r, pieces).status());
        }
        return absl::OkStatus();
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < job.world; ++r) {
    EXPECT_TRUE(results[r].status.ok()) << "rank " << r << ": " << results[r].status;
  }
  return results[0];
}

TEST(MemorySnapshotsTest, FullShardSurvivorsHandOverTheLastStepWithoutADeadRank) {
  Job whole;
  whole.steps = 5;
  const JobResult uninterrupted = RunJob(whole);
  ASSERT_TRUE(uninterrupted.status.ok()) << uninterrupted.status;

  Job failing;
  failing.handover = Tmp("full_shard_handover");
  failing.dead = 2;
  const JobResult before = RunJob(failing);
  ASSERT_TRUE(before.status.ok()) << before.status;
  EXPECT_TRUE(before.buddy_copies);
  // The memory model counts the copies byte for byte: two generations of
  // rank 0's shard (55/4 -> 14 and 66/4 -> 17 elements, x 3 states) and of
  // its buddy copy, fp32.
  EXPECT_EQ(before.snapshot_bytes, 2 * 2 * 3 * (14 + 17) * 4);
  EXPECT_EQ(before.predicted_snapshot_bytes, before.snapshot_bytes);
  // Snapshots only read the trainer: the same bits as the run without them.
  EXPECT_EQ(before.params_after[3], uninterrupted.params_after[3]);

  std::vector<std::string> notes;
  absl::StatusOr<std::string> assembled = checkpoint::AssembleHandover(failing.handover, &notes);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, checkpoint::JoinPath(failing.handover, "step-00000003"));
  EXPECT_TRUE(notes.empty()) << notes.front();
  // The generations are consumed: only the checkpoint is left.
  absl::StatusOr<checkpoint::CheckpointListing> listing =
      checkpoint::ListCheckpoints(failing.handover);
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->complete.size(), 1u);

  Job after;
  after.world = 3;
  after.load = *assembled;
  after.steps = 5;
  const JobResult resumed = RunJob(after);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_EQ(resumed.params_at_start, uninterrupted.params_after[3]);
  ASSERT_EQ(resumed.losses.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(resumed.losses[i], uninterrupted.losses[3 + i],
                1e-5 * std::abs(uninterrupted.losses[3 + i]))
        << "step " << 4 + i;
  }
}

TEST(MemorySnapshotsTest, AGenerationThatLostBothCopiesOfAShardIsPassedOver) {
  Job failing;
  failing.world = 3;
  failing.handover = Tmp("lost_both_handover");
  failing.dead = 1;
  // Rank 2 (which holds rank 1's buddy copy) hands over only step 2's.
  failing.keep = [](int rank, const checkpoint::SnapshotPiece& piece) {
    return rank != 2 || piece.step == 2;
  };
  const JobResult before = RunJob(failing);
  ASSERT_TRUE(before.status.ok()) << before.status;
  std::vector<std::string> notes;
  absl::StatusOr<std::string> assembled = checkpoint::AssembleHandover(failing.handover, &notes);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, checkpoint::JoinPath(failing.handover, "step-00000002"));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "the handover of step 3 lacks the shard of rank 1: both its copies were lost");

  Job after;
  after.world = 2;
  after.load = *assembled;
  const JobResult resumed = RunJob(after);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_EQ(resumed.params_at_start, before.params_after[2]);

  // Nothing whole at all: no checkpoint, and the notes say why.
  Job hopeless = failing;
  hopeless.handover = Tmp("hopeless_handover");
  hopeless.keep = [](int rank, const checkpoint::SnapshotPiece&) { return rank != 2; };
  ASSERT_TRUE(RunJob(hopeless).status.ok());
  notes.clear();
  assembled = checkpoint::AssembleHandover(hopeless.handover, &notes);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, "");
  EXPECT_EQ(notes.size(), 2u);
}

TEST(MemorySnapshotsTest, ReplicasStandInForADeadRankWithoutBuddyCopies) {
  Job failing;
  failing.strategy = Strategy::kHybridShard;
  failing.group_size = 2;
  failing.handover = Tmp("hybrid_handover");
  failing.dead = 0;
  const JobResult before = RunJob(failing);
  ASSERT_TRUE(before.status.ok()) << before.status;
  EXPECT_FALSE(before.buddy_copies);
  EXPECT_EQ(before.snapshot_bytes, 2 * 3 * (28 + 33) * 4);  // no buddy copy: 55/2, 66/2
  EXPECT_EQ(before.predicted_snapshot_bytes, before.snapshot_bytes);
  std::vector<std::string> notes;
  absl::StatusOr<std::string> assembled = checkpoint::AssembleHandover(failing.handover, &notes);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, checkpoint::JoinPath(failing.handover, "step-00000003"));

  Job after;
  after.world = 3;
  after.load = *assembled;
  const JobResult resumed = RunJob(after);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_EQ(resumed.params_at_start, before.params_after[3]);
}

}  // namespace
}  // namespace fsdp
