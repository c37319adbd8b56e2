// File: tests/integration/train/train_gpt_checkpoint_test.cc
//
// Sharded checkpoints through the train_gpt example, real ranks over
// loopback (docs/checkpoints.md):
//   - stop at step 10 of 20 (--exit_after_steps), resume: the losses of
//     steps 11-20 and the final digest are bit-identical to a run that never
//     stopped, for every strategy;
//   - a checkpoint saved by 4 ranks with full_shard continues at 2 ranks
//     shard_grad_op, 1 rank no_shard, 3 ranks full_shard (other padding) and
//     4 ranks hybrid_shard as a run at that world size would, within 1e-5;
//   - kill -9 of a rank during a save leaves the previous checkpoint usable;
//   - SIGTERM to the launcher saves at the next step and the resume matches;
//   - bad checkpoints and flags are clear errors naming the file or flag,
//     and an incomplete newest checkpoint is skipped with a note.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

constexpr int kSteps = 20;
constexpr int kStopAt = 10;

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::vector<std::string> Flags(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--layers=2",   "--d_model=32",      "--heads=2",
                                    "--vocab=64",   "--seq_len=16",      "--steps=20",
                                    "--warmup_steps=2", "--threads=1",   "--seed=7"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

TrainGptRun RunSmall(const std::string& name, std::vector<std::string> extra) {
  TrainGptRun run = RunTrainGpt(name, Flags(std::move(extra)));
  return run;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

struct StrategyCase {
  const char* name;
  std::vector<std::string> flags;
};

class ResumeTest : public testing::TestWithParam<StrategyCase> {};

TEST_P(ResumeTest, StopAtTenThenResumeIsBitIdenticalToAnUninterruptedRun) {
  const StrategyCase& c = GetParam();
  const std::string dir = absl::StrCat(TmpDir(), "/resume_", c.name);
  const TrainGptRun whole = RunSmall(absl::StrCat(c.name, "_whole"), c.flags);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  ASSERT_EQ(whole.losses.size(), static_cast<size_t>(kSteps));

  std::vector<std::string> first = c.flags;
  first.push_back("--checkpoint_dir=" + dir);
  first.push_back(absl::StrCat("--exit_after_steps=", kStopAt));
  const TrainGptRun stopped = RunSmall(absl::StrCat(c.name, "_first"), first);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_EQ(stopped.losses.size(), static_cast<size_t>(kStopAt));
  EXPECT_TRUE(absl::StrContains(stopped.output, "stopped after step 10 of 20")) << stopped.output;
  ASSERT_TRUE(Exists(dir + "/step-00000010/manifest.pb")) << stopped.output;

  std::vector<std::string> second = c.flags;
  second.push_back("--checkpoint_dir=" + dir);
  second.push_back("--resume");
  const TrainGptRun resumed = RunSmall(absl::StrCat(c.name, "_second"), second);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(absl::StrContains(resumed.output, "resumed from " + dir + "/step-00000010"))
      << resumed.output;
  ASSERT_EQ(resumed.losses.size(), static_cast<size_t>(kSteps - kStopAt)) << resumed.output;
  for (int s = kStopAt; s < kSteps; ++s) {
    EXPECT_EQ(resumed.losses[s - kStopAt], whole.losses[s]) << "step " << s + 1;
  }
  EXPECT_EQ(resumed.param_sha256, whole.param_sha256);
  // The first part's losses are the uninterrupted run's too.
  for (int s = 0; s < kStopAt; ++s) EXPECT_EQ(stopped.losses[s], whole.losses[s]);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, ResumeTest,
    testing::Values(
        StrategyCase{"no_shard", {"--nproc=2", "--strategy=no_shard", "--micro_batch=4"}},
        StrategyCase{"shard_optimizer",
                     {"--nproc=2", "--strategy=shard_optimizer", "--micro_batch=4"}},
        StrategyCase{"shard_grad_op",
                     {"--nproc=2", "--strategy=shard_grad_op", "--micro_batch=2", "--accum=2"}},
        StrategyCase{"full_shard", {"--nproc=2", "--strategy=full_shard", "--micro_batch=4"}},
        // The bf16 layout with 4-byte gradients (the case below has 2-byte).
        StrategyCase{"full_shard_bf16_fp32_grads",
                     {"--nproc=2", "--strategy=full_shard", "--micro_batch=4",
                      "--precision=bf16", "--reduce_dtype=fp32"}},
        StrategyCase{"hybrid_shard",
                     {"--nproc=4", "--strategy=hybrid_shard", "--group_size=2",
                      "--micro_batch=2"}},
        // The bf16 parameter layout: the fp32 master is saved and loaded,
        // the bf16 parameters rebuilt from it.
        StrategyCase{"no_shard_precision_bf16",
                     {"--nproc=2", "--strategy=no_shard", "--micro_batch=4", "--precision=bf16"}},
        StrategyCase{"shard_grad_op_precision_bf16",
                     {"--nproc=2", "--strategy=shard_grad_op", "--micro_batch=4",
                      "--precision=bf16"}},
        StrategyCase{"full_shard_precision_bf16",
                     {"--nproc=2", "--strategy=full_shard", "--micro_batch=4",
                      "--precision=bf16"}}),
    [](const testing::TestParamInfo<StrategyCase>& info) { return std::string(info.param.name); });

// One checkpoint of 4 ranks x full_shard (global batch 12) for every
// resharding case and the bad-input cases below.
class SavedCheckpointTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TmpDir() + "/saved_by_4");
    const TrainGptRun saved =
        RunSmall("saved_by_4", {"--nproc=4", "--strategy=full_shard", "--micro_batch=3",
                           "--checkpoint_dir=" + *dir_, "--exit_after_steps=10"});
    ASSERT_EQ(saved.exit_code, 0) << saved.output;
  }
  static std::string Checkpoint() { return *dir_ + "/step-00000010"; }
  // A copy of the checkpoint to damage.
  static std::string CopyOf(const std::string& name) {
    const std::string copy = absl::StrCat(TmpDir(), "/", name, "/step-00000010");
    EXPECT_EQ(std::system(absl::StrCat("rm -rf ", TmpDir(), "/", name, " && mkdir -p ", copy,
                                       " && cp ", Checkpoint(), "/* ", copy)
                              .c_str()),
              0);
    return copy;
  }
  static std::string* dir_;
};
std::string* SavedCheckpointTest::dir_ = nullptr;

TEST_F(SavedCheckpointTest, ReshardsIntoOtherWorldSizesAndStrategies) {
  const StrategyCase targets[] = {
      {"into_2_shard_grad_op", {"--nproc=2", "--strategy=shard_grad_op", "--micro_batch=6"}},
      {"into_1_no_shard", {"--nproc=1", "--strategy=no_shard", "--micro_batch=12"}},
      {"into_3_full_shard", {"--nproc=3", "--strategy=full_shard", "--micro_batch=4"}},
      {"into_4_hybrid", {"--nproc=4", "--strategy=hybrid_shard", "--group_size=2",
                         "--micro_batch=3"}},
  };
  for (const StrategyCase& target : targets) {
    SCOPED_TRACE(target.name);
    const TrainGptRun reference = RunSmall(absl::StrCat(target.name, "_reference"), target.flags);
    ASSERT_EQ(reference.exit_code, 0) << reference.output;
    std::vector<std::string> flags = target.flags;
    flags.push_back("--resume_from=" + Checkpoint());
    const TrainGptRun resumed = RunSmall(target.name, flags);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_TRUE(absl::StrContains(resumed.output, "resharded from another plan")) << resumed.output;
    ASSERT_EQ(resumed.losses.size(), static_cast<size_t>(kSteps - kStopAt)) << resumed.output;
    for (int s = kStopAt; s < kSteps; ++s) {
      EXPECT_NEAR(resumed.losses[s - kStopAt], reference.losses[s],
                  1e-5 * std::fabs(reference.losses[s]))
          << "step " << s + 1;
    }
  }
}

TEST_F(SavedCheckpointTest, DamagedCheckpointsAreClearErrorsNamingTheFile) {
  const std::vector<std::string> flags = {"--nproc=2", "--strategy=full_shard", "--micro_batch=6"};
  struct Damage {
    const char* name;
    std::string (*apply)(const std::string& checkpoint);
    const char* expected;
  };
  const Damage damages[] = {
      {"truncated_shard",
       [](const std::string& c) {
         const std::string path = c + "/rank-00001.bin";
         std::string bytes = ReadFile(path);
         WriteFile(path, bytes.substr(0, bytes.size() / 2));
         return std::string("rank-00001.bin");
       },
       "truncated"},
      {"flipped_byte",
       [](const std::string& c) {
         const std::string path = c + "/rank-00002.bin";
         std::string bytes = ReadFile(path);
         bytes[bytes.size() / 3] ^= 0x10;
         WriteFile(path, bytes);
         return std::string("rank-00002.bin");
       },
       "does not match its SHA-256"},
      {"missing_shard",
       [](const std::string& c) {
         std::remove((c + "/rank-00003.bin").c_str());
         return std::string("rank-00003.bin");
       },
       "missing shard file"},
      {"damaged_manifest",
       [](const std::string& c) {
         const std::string path = c + "/manifest.pb";
         std::string bytes = ReadFile(path);
         bytes[bytes.size() - 5] ^= 0x01;
         WriteFile(path, bytes);
         return std::string("manifest.pb");
       },
       "damaged"},
      {"no_manifest",
       [](const std::string& c) {
         std::remove((c + "/manifest.pb").c_str());
         return std::string("not a complete checkpoint");
       },
       "no manifest.pb"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.name);
    const std::string copy = CopyOf(damage.name);
    const std::string named = damage.apply(copy);
    std::vector<std::string> run_flags = flags;
    run_flags.push_back("--resume_from=" + copy);
    const TrainGptRun run = RunSmall(damage.name, run_flags);
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, named)) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, damage.expected)) << run.output;
    EXPECT_TRUE(run.losses.empty()) << "trained from a damaged checkpoint:\n" << run.output;
  }
}

TEST_F(SavedCheckpointTest, AnotherModelIsRefusedSayingWhatDiffers) {
  std::vector<std::string> flags = Flags({"--nproc=2", "--strategy=full_shard",
                                          "--micro_batch=6", "--resume_from=" + Checkpoint()});
  for (std::string& flag : flags) {
    if (flag == "--d_model=32") flag = "--d_model=48";
  }
  const TrainGptRun run = RunTrainGpt("another_model", flags);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "another model")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--d_model=32")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--d_model=48")) << run.output;
}

TEST_F(SavedCheckpointTest, ADifferentGlobalBatchIsRefused) {
  const TrainGptRun run = RunSmall("other_batch", {"--nproc=2", "--strategy=full_shard",
                                              "--micro_batch=4", "--resume_from=" + Checkpoint()});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "global batch of 12")) << run.output;
}

TEST_F(SavedCheckpointTest, AnIncompleteNewestCheckpointIsSkippedWithANote) {
  const std::string copy = CopyOf("incomplete_newest");
  const std::string dir = copy.substr(0, copy.rfind('/'));
  // An interrupted save of step 15, and a step-18 directory without manifest.
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", dir, "/step-00000015.partial ", dir,
                                     "/step-00000018 && cp ", copy, "/rank-00000.bin ", dir,
                                     "/step-00000015.partial/")
                            .c_str()),
            0);
  const TrainGptRun run = RunSmall("incomplete_newest", {"--nproc=2", "--strategy=full_shard",
                                                    "--micro_batch=6", "--checkpoint_dir=" + dir,
                                                    "--resume"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "ignoring incomplete checkpoint " + dir +
                                                "/step-00000015.partial"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "step-00000018 (no manifest.pb)")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "resumed from " + copy)) << run.output;
  EXPECT_EQ(run.losses.size(), static_cast<size_t>(kSteps - kStopAt));
}

TEST(CheckpointFlagsTest, BadCombinationsAreRefusedBeforeAnyRankStarts) {
  const std::string dir = TmpDir() + "/flags";
  const struct {
    std::vector<std::string> flags;
    const char* expected;
  } cases[] = {
      {{"--resume"}, "--resume needs --checkpoint_dir"},
      {{"--checkpoint_every=5"}, "--checkpoint_every needs --checkpoint_dir"},
      {{"--checkpoint_dir=" + dir, "--resume", "--resume_from=" + dir}, "conflict"},
      {{"--exit_after_steps=30"}, "beyond the schedule's --steps=20"},
      {{"--resume_from=" + TmpDir()}, "not a complete checkpoint"},
  };
  for (const auto& c : cases) {
    const TrainGptRun run = RunSmall("bad_flags", c.flags);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, c.expected)) << run.output;
  }
}

TEST(CheckpointSaveTest, AnUnwritableDirectoryFailsTheRunButNotTraining) {
  // A checkpoint directory under a regular file cannot be created.
  const std::string blocker = TmpDir() + "/blocker";
  WriteFile(blocker, "not a directory");
  const TrainGptRun run =
      RunSmall("unwritable", {"--nproc=2", "--strategy=full_shard", "--micro_batch=4",
                         "--checkpoint_dir=" + blocker + "/ckpt", "--checkpoint_every=5"});
  // Saves at steps 5, 10 and 15 warn and training goes on; the final one
  // at step 20 is an error.
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.losses.size(), static_cast<size_t>(kSteps)) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "warning: checkpoint of step 5")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "checkpoint of step 20")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, blocker)) << run.output;
  EXPECT_EQ(ReadFile(blocker), "not a directory");
}

TEST(CheckpointSaveTest, KeepPrunesOlderCompleteCheckpoints) {
  const std::string dir = TmpDir() + "/keep";
  const TrainGptRun run =
      RunSmall("keep", {"--nproc=2", "--strategy=full_shard", "--micro_batch=4",
                   "--checkpoint_dir=" + dir, "--checkpoint_every=5", "--keep_checkpoints=2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(Exists(dir + "/step-00000005"));
  EXPECT_FALSE(Exists(dir + "/step-00000010"));
  EXPECT_TRUE(Exists(dir + "/step-00000015/manifest.pb"));
  EXPECT_TRUE(Exists(dir + "/step-00000020/manifest.pb"));
}

}  // namespace
}  // namespace fsdp_test

namespace fsdp_test {
namespace {

// SIGTERM to the launcher (as Slurm sends before a time limit): it forwards
// it to the ranks, which save at the next step boundary and exit cleanly;
// resuming ends where a run that was never stopped ends.
TEST(CheckpointSignalTest, SigtermSavesAtTheNextStepAndResumeMatches) {
  const std::string dir = TmpDir() + "/sigterm";
  const std::vector<std::string> flags =
      Flags({"--nproc=2", "--strategy=full_shard", "--micro_batch=4", "--steps=200",
             "--warmup_steps=2"});
  const TrainGptRun whole = RunTrainGpt("sigterm_whole", flags);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  const std::string metrics = TmpDir() + "/sigterm_first.jsonl";
  const std::string log = TmpDir() + "/sigterm_first.log";
  std::remove(metrics.c_str());
  std::vector<std::string> first = flags;
  first.push_back("--checkpoint_dir=" + dir);
  first.push_back("--metrics_out=" + metrics);
  const pid_t pid = StartTrainGpt(first, log);
  ASSERT_GT(pid, 0);
  // Wait for three steps, then SIGTERM the launcher.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int lines = 0;
  while (lines < 3 && absl::Now() < deadline) {
    std::ifstream in(metrics);
    std::string line;
    lines = 0;
    while (std::getline(in, line)) ++lines;
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_GE(lines, 3) << ReadFile(log);
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string output = ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_TRUE(absl::StrContains(output, "(signal 15 (Terminated))")) << output;
  EXPECT_FALSE(absl::StrContains(output, "killed by signal")) << output;
  const size_t at = output.find("stopped after step ");
  ASSERT_NE(at, std::string::npos) << output;
  const int stopped_at = std::atoi(output.c_str() + at + std::strlen("stopped after step "));
  EXPECT_GE(stopped_at, 3) << output;
  ASSERT_LT(stopped_at, 200) << "the run ended before the signal landed:\n" << output;
  ASSERT_TRUE(Exists(absl::StrFormat("%s/step-%08d/manifest.pb", dir, stopped_at))) << output;

  std::vector<std::string> resume = flags;
  resume.push_back("--checkpoint_dir=" + dir);
  resume.push_back("--resume");
  const TrainGptRun resumed = RunTrainGpt("sigterm_second", resume);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_EQ(resumed.losses.size(), static_cast<size_t>(200 - stopped_at)) << resumed.output;
  EXPECT_EQ(resumed.losses.front(), whole.losses[stopped_at]);
  EXPECT_EQ(resumed.param_sha256, whole.param_sha256);
}

}  // namespace
}  // namespace fsdp_test

namespace fsdp_test {
namespace {

// The newest "step-N.partial" in dir, or "".
std::string PartialIn(const std::string& dir) {
  std::string found;
  if (DIR* handle = opendir(dir.c_str())) {
    while (dirent* entry = readdir(handle)) {
      const std::string name = entry->d_name;
      if (absl::EndsWith(name, ".partial")) found = name;
    }
    closedir(handle);
  }
  return found;
}

// kill -9 of rank 0 (the rank that commits) while a checkpoint is being
// written: the save never commits, the previous checkpoint stays intact,
// the partial one is ignored with a note, and the resumed run ends as the
// uninterrupted one does. (When another rank dies, rank 0 removes the
// partial directory itself.)
TEST(CheckpointCrashTest, AKillDuringASaveLeavesThePreviousCheckpointUsable) {
  // Large enough (38 MB of state) that a save takes a while to write.
  const std::vector<std::string> flags = {
      "--layers=4", "--d_model=256", "--heads=4", "--vocab=64", "--seq_len=32",
      "--micro_batch=2", "--nproc=2", "--strategy=full_shard", "--steps=16",
      "--warmup_steps=2", "--threads=1", "--seed=3", "--checkpoint_every=2"};
  std::vector<std::string> whole_flags = flags;
  whole_flags.push_back("--checkpoint_dir=" + TmpDir() + "/crash_whole");
  const TrainGptRun whole = RunTrainGpt("crash_whole", whole_flags);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  // The kill must land inside a save; a save that wins the race is tried again.
  std::string dir, partial, log;
  for (int attempt = 0; attempt < 5 && partial.empty(); ++attempt) {
    dir = absl::StrCat(TmpDir(), "/crash", attempt);
    log = dir + ".log";
    std::vector<std::string> attempt_flags = flags;
    attempt_flags.push_back("--checkpoint_dir=" + dir);
    const pid_t pid = StartTrainGpt(attempt_flags, log);
    ASSERT_GT(pid, 0);
    // After the first complete checkpoint, wait for the next save to start.
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    std::string seen;
    bool first_done = false;
    while (absl::Now() < deadline) {
      if (!first_done) first_done = Exists(dir + "/step-00000002/manifest.pb");
      if (first_done) seen = PartialIn(dir);
      if (!seen.empty() && seen != "step-00000002.partial") break;
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) break;  // finished without a hit
      absl::SleepFor(absl::Microseconds(200));
    }
    const pid_t rank0 = RankPid(ChildPids(pid), 0);
    if (!seen.empty() && rank0 > 0) kill(rank0, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string committed = dir + "/" + seen.substr(0, seen.size() - 8);  // no ".partial"
    if (!seen.empty() && Exists(dir + "/" + seen) && !Exists(committed)) {
      partial = seen;
      EXPECT_NE(status, 0) << ReadFile(log);
    }
  }
  ASSERT_FALSE(partial.empty()) << "no attempt killed a rank during a save";

  std::vector<std::string> resume = flags;
  resume.push_back("--checkpoint_dir=" + dir);
  resume.push_back("--resume");
  const TrainGptRun resumed = RunTrainGpt("crash_resumed", resume);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(absl::StrContains(resumed.output,
                                "ignoring incomplete checkpoint " + dir + "/" + partial))
      << resumed.output;
  EXPECT_TRUE(absl::StrContains(resumed.output, "resumed from " + dir + "/step-"))
      << resumed.output;
  EXPECT_EQ(resumed.param_sha256, whole.param_sha256) << resumed.output;
  // The next save removed the stale partial directory.
  EXPECT_FALSE(Exists(dir + "/" + partial));
}

}  // namespace
}  // namespace fsdp_test

namespace fsdp_test {
namespace {

// A disk that fills up during a save, as a file-size limit (RLIMIT_FSIZE,
// with SIGXFSZ ignored so that write(2) fails with EFBIG as on a full
// disk): each save fails on every rank, training goes on, the previous
// checkpoint stays intact and loadable, and no partial directory is left.
TEST(CheckpointSaveTest, AFullDiskDuringASaveLeavesThePreviousCheckpointIntact) {
  const std::string dir = TmpDir() + "/full_disk";
  // 3.2 M parameters: each rank's shard file is 18 MiB.
  const std::vector<std::string> flags = {
      "--layers=4", "--d_model=256", "--heads=4", "--vocab=64", "--seq_len=32",
      "--micro_batch=2", "--nproc=2", "--strategy=full_shard", "--steps=8",
      "--warmup_steps=2", "--threads=1", "--seed=3", "--checkpoint_dir=" + dir,
      "--checkpoint_every=2"};
  std::vector<std::string> first = flags;
  first.push_back("--exit_after_steps=2");
  const TrainGptRun saved = RunTrainGpt("full_disk_first", first);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const std::string shard = ReadFile(dir + "/step-00000002/rank-00001.bin");
  ASSERT_GT(shard.size(), size_t{8} << 20);

  // The resumed run may write files of at most 4 MiB.
  // UCX over TCP: its shared-memory transport keeps files in /dev/shm, which
  // the limit would refuse too.
  std::string command = "trap '' XFSZ; ulimit -f 4096; UCX_TLS=tcp exec " + TrainGptPath();
  for (const std::string& flag : flags) command += " '" + flag + "'";
  command += " --resume 2>&1";
  std::string output;
  std::FILE* pipe = popen(("bash -c \"" + command + "\"").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  // Steps 3-8 ran; the saves at 4 and 6 warned, the final one at 8 failed.
  EXPECT_NE(status, 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "step    8/8")) << output;
  EXPECT_TRUE(absl::StrContains(output, "warning: checkpoint of step 4")) << output;
  EXPECT_TRUE(absl::StrContains(output, "File too large")) << output;
  EXPECT_TRUE(absl::StrContains(output, "checkpoint of step 8")) << output;
  EXPECT_FALSE(Exists(dir + "/step-00000004")) << output;
  EXPECT_TRUE(PartialIn(dir).empty()) << "a partial directory was left: " << PartialIn(dir);
  // The previous checkpoint is intact and loadable.
  EXPECT_EQ(ReadFile(dir + "/step-00000002/rank-00001.bin"), shard);
  std::vector<std::string> again = flags;
  again.push_back("--resume");
  const TrainGptRun resumed = RunTrainGpt("full_disk_again", again);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(absl::StrContains(resumed.output, "resumed from " + dir + "/step-00000002"))
      << resumed.output;
}

}  // namespace
}  // namespace fsdp_test
