// File: tests/integration/train/train_gpt_restart_test.cc
//
// Automatic restarts (--max_restarts, comm/launcher/restarts.h) with real
// ranks over loopback: a rank killed with kill -9 in the middle of a run
// with --max_restarts=1 and checkpoints every 2 steps; the launcher stops
// every rank, starts them again, and the job resumes from the newest
// checkpoint and ends with the digest of a run that never failed. Killed
// twice with one restart, the job fails naming the rank and the signal.
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fsdp/run/metrics_plot.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::vector<std::string> Flags(const std::string& dir) {
  return {"--layers=2", "--d_model=64", "--heads=2", "--vocab=64", "--seq_len=32",
          "--micro_batch=4", "--nproc=2", "--strategy=full_shard", "--steps=60",
          "--warmup_steps=2", "--threads=1", "--seed=5", "--checkpoint_every=2",
          "--checkpoint_dir=" + dir};
}

// Waits until `log` shows `text`, or `timeout` passes.
bool WaitForText(const std::string& log, const std::string& text, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (absl::StrContains(ReadWholeFile(log), text)) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

// Kills rank `rank` of the launcher `pid`'s current attempt; true if it did.
bool KillRank(pid_t pid, int rank) {
  const pid_t victim = RankPid(ChildPids(pid), rank);
  return victim > 0 && kill(victim, SIGKILL) == 0;
}

TEST(RestartTest, AKilledRankIsRestartedAndTheRunEndsAsIfNothingHappened) {
  const TrainGptRun whole = RunTrainGpt("restart_whole", Flags(TmpDir() + "/whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  const std::string log = TmpDir() + "/restart.log";
  const std::string metrics = TmpDir() + "/restart.jsonl";
  std::vector<std::string> flags = Flags(TmpDir() + "/restart");
  flags.push_back("--max_restarts=1");
  flags.push_back("--metrics_out=" + metrics);
  const pid_t pid = StartTrainGpt(flags, log);
  ASSERT_GT(pid, 0);
  // Mid-run, after a few checkpoints: kill rank 1 between step lines.
  ASSERT_TRUE(WaitForText(log, "step   15/60", absl::Seconds(60))) << ReadWholeFile(log);
  ASSERT_TRUE(KillRank(pid, 1)) << ReadWholeFile(log);
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(WaitForText(log, "restart 1 of at most 1", absl::Seconds(60))) << ReadWholeFile(log);
  ASSERT_TRUE(WaitForText(log, "resumed from", absl::Seconds(60))) << ReadWholeFile(log);
  const absl::Duration to_resumed = absl::Now() - killed;
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string output = ReadWholeFile(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "rank 1 was killed by signal 9")) << output;
  EXPECT_TRUE(absl::StrContains(output, "restarting every rank (restart 1 of 1)")) << output;
  EXPECT_TRUE(absl::StrContains(output, "params sha256 " + whole.param_sha256)) << output;
  std::printf("from kill -9 to training again (resumed) in %.2f s\n",
              absl::ToDoubleSeconds(to_resumed));

  // The metrics file keeps the first attempt's lines; the restarted one
  // appends after a "resumed" line, and a reader sees each step once.
  const std::string lines = ReadWholeFile(metrics);
  const size_t marker = lines.find("\"resumed\":true");
  ASSERT_NE(marker, std::string::npos) << lines;
  EXPECT_NE(lines.substr(0, marker).find("{\"step\":15,"), std::string::npos) << lines;
  absl::StatusOr<fsdp::MetricsRun> run = fsdp::ParseMetrics(lines, "restart", metrics);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->points.size(), 60u) << lines;
  for (int s = 0; s < 60; ++s) EXPECT_EQ(run->points[s].step, s + 1);
}

TEST(RestartTest, WhenTheRestartsAreUsedUpTheJobFailsNamingTheRank) {
  const std::string log = TmpDir() + "/used_up.log";
  std::vector<std::string> flags = Flags(TmpDir() + "/used_up");
  flags.push_back("--max_restarts=1");
  const pid_t pid = StartTrainGpt(flags, log);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitForText(log, "step    5/60", absl::Seconds(60))) << ReadWholeFile(log);
  ASSERT_TRUE(KillRank(pid, 1)) << ReadWholeFile(log);
  ASSERT_TRUE(WaitForText(log, "resumed from", absl::Seconds(60))) << ReadWholeFile(log);
  // The second attempt's ranks: kill rank 0 this time.
  ASSERT_TRUE(KillRank(pid, 0)) << ReadWholeFile(log);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string output = ReadWholeFile(log);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL) << output;
  EXPECT_TRUE(absl::StrContains(output, "rank 0 was killed by signal 9")) << output;
  EXPECT_TRUE(absl::StrContains(output, "(after 1 restart)")) << output;
}

TEST(RestartTest, MaxRestartsNeedsACheckpointDirectory) {
  const TrainGptRun run = RunTrainGpt("restart_flags", {"--max_restarts=2"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--max_restarts needs --checkpoint_dir")) << run.output;
}

}  // namespace
}  // namespace fsdp_test
