// File: tests/integration/train/train_gpt_elastic_test.cc
//
// Elastic jobs (train_gpt --min_nproc, comm/launcher/elastic.h) with real
// ranks over loopback. Seeded random kill -9s of random ranks at random
// moments shrink a 4-rank --exact job to 2 ranks; two slots coming back
// (SIGUSR1 to the launcher, as soon as the 2-rank attempt starts, so that it
// cannot end first) grow it to 4 again; it ends with the digest of
// the run that never failed: from checkpoints on disk, and from the
// survivors' copies in memory (--buddy_every=1, no checkpoint directory).
// Without --exact one failure ends within 1e-5 (relative) of its loss.
// FSDP_ELASTIC_TEST_SEED chooses other moments.
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "fsdp/run/metrics_plot.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

constexpr int kSteps = 60;

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

uint32_t TestSeed() {
  const char* seed = std::getenv("FSDP_ELASTIC_TEST_SEED");
  return seed != nullptr ? static_cast<uint32_t>(std::strtoul(seed, nullptr, 10)) : 37;
}

std::vector<std::string> Flags() { return ElasticJobFlags(kSteps); }

// Flags() with checkpoints every 2 steps in `dir`.
std::vector<std::string> Flags(const std::string& dir) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--checkpoint_every=2");
  flags.push_back("--checkpoint_dir=" + dir);
  return flags;
}

// Waits until `text` appears in `log` at or after byte `from`; returns where
// it ends, or npos after `timeout`.
size_t WaitForTextAfter(const std::string& log, const std::string& text, size_t from,
                        absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    const std::string contents = ReadWholeFile(log);
    const size_t at = contents.find(text, std::min(from, contents.size()));
    if (at != std::string::npos) return at + text.size();
    absl::SleepFor(absl::Milliseconds(2));
  }
  return std::string::npos;
}

std::string StepLine(int step) { return absl::StrFormat("step %4d/%d | loss", step, kSteps); }

// The digest of the last "done" line (earlier attempts that stopped to grow
// print their own).
std::string LastDigest(const std::string& output) {
  const size_t at = output.rfind("params sha256 ");
  if (at == std::string::npos) return "";
  return output.substr(at + 14, 64);
}

// Kills a random rank of the launcher `pid`'s current attempt of `world`
// ranks, a random 0-150 ms after the line of step `step` appeared after
// `from`; returns where that line ended.
size_t KillRandomRankAfterStep(pid_t pid, const std::string& log, int step, int world, size_t from,
                               std::mt19937& rng, std::string* what) {
  const size_t seen = WaitForTextAfter(log, StepLine(step), from, absl::Seconds(120));
  if (seen == std::string::npos) return seen;
  absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 150)(rng)));
  const int rank = std::uniform_int_distribution<int>(0, world - 1)(rng);
  const pid_t victim = RankPid(ChildPids(pid), rank);
  if (victim <= 0 || kill(victim, SIGKILL) != 0) return std::string::npos;
  absl::StrAppend(what, "killed rank ", rank, " of ", world, " after step ", step, "; ");
  return seen;
}

const TrainGptRun& ExactWhole() {
  static const TrainGptRun* whole = [] {
    std::vector<std::string> flags = Flags();
    flags.push_back("--exact");
    return new TrainGptRun(RunTrainGpt("elastic_exact_whole", flags));
  }();
  return *whole;
}

// Two random kills at random moments, then two slots back: the 4-rank
// --exact job with `flags` (where its state is kept) must end cleanly, at 4
// ranks, with the losses of the run that never failed (checked here) and
// its digest (checked by the caller on the output returned).
std::string KillTwiceGrowBack(const std::string& name, std::vector<std::string> flags,
                              uint32_t seed) {
  const TrainGptRun& whole = ExactWhole();
  EXPECT_EQ(whole.exit_code, 0) << whole.output;
  if (whole.exit_code != 0) return "";
  const std::string log = TmpDir() + "/" + name + ".log";
  const std::string metrics = TmpDir() + "/" + name + ".jsonl";
  flags.push_back("--exact");
  flags.push_back("--min_nproc=2");
  flags.push_back("--metrics_out=" + metrics);
  std::mt19937 rng(seed);
  const int first_kill = std::uniform_int_distribution<int>(3, 10)(rng);
  const int second_kill = first_kill + std::uniform_int_distribution<int>(3, 8)(rng);
  std::string what = absl::StrCat(name, ", seed ", seed, ": ");
  const pid_t pid = StartTrainGpt(flags, log);
  EXPECT_GT(pid, 0);
  if (pid <= 0) return "";
  // Each step of the scenario; on a failure the job is killed and waited for.
  auto fail = [&](const std::string& why) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    ADD_FAILURE() << what << why << "\n" << ReadWholeFile(log);
    return std::string();
  };
  size_t at = KillRandomRankAfterStep(pid, log, first_kill, 4, 0, rng, &what);
  if (at == std::string::npos) return fail("no first kill");
  at = WaitForTextAfter(log, "attempt 1 at 3 ranks", at, absl::Seconds(60));
  if (at == std::string::npos) return fail("no attempt at 3 ranks");
  at = KillRandomRankAfterStep(pid, log, second_kill, 3, at, rng, &what);
  if (at == std::string::npos) return fail("no second kill");
  at = WaitForTextAfter(log, "attempt 2 at 2 ranks", at, absl::Seconds(60));
  if (at == std::string::npos) return fail("no attempt at 2 ranks");
  // Two slots come back: the job grows to 4 (in one stop or two).
  kill(pid, SIGUSR1);
  absl::SleepFor(absl::Milliseconds(50));
  kill(pid, SIGUSR1);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string output = ReadWholeFile(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << what << output;
  EXPECT_TRUE(absl::StrContains(output, "going on without rank")) << output;
  EXPECT_TRUE(absl::StrContains(output, "going on with 4 ranks")) << what << output;
  EXPECT_TRUE(absl::StrContains(output, absl::StrCat("train_gpt: done, ", kSteps, " steps")))
      << output;
  EXPECT_EQ(UcxWarningLines(output), std::vector<std::string>()) << output;
  // Each step once in the metrics a reader sees.
  absl::StatusOr<fsdp::MetricsRun> run = fsdp::ReadMetricsFile(metrics, name);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return output;
  EXPECT_EQ(run->points.size(), static_cast<size_t>(kSteps));
  for (size_t s = 0; s < run->points.size() && s < whole.losses.size(); ++s) {
    EXPECT_EQ(run->points[s].step, static_cast<int>(s + 1));
    EXPECT_EQ(run->points[s].loss, whole.losses[s]) << "step " << s + 1 << "; " << what;
  }
  std::printf("%s\n", what.c_str());
  return output;
}

TEST(ElasticTest, RandomKillsShrinkTheJobSlotsComingBackGrowItAndTheExactDigestIsKept) {
  const std::string output =
      KillTwiceGrowBack("elastic_disk", Flags(TmpDir() + "/elastic_disk"), TestSeed());
  EXPECT_EQ(LastDigest(output), ExactWhole().param_sha256) << output;
  EXPECT_TRUE(absl::StrContains(output, "resumed from " + TmpDir() + "/elastic_disk/step-"))
      << output;
}

TEST(ElasticTest, FromTheSurvivorsMemoryWithoutACheckpointOnDisk) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--buddy_every=1");
  const std::string output = KillTwiceGrowBack("elastic_memory", flags, TestSeed() + 7);
  EXPECT_EQ(LastDigest(output), ExactWhole().param_sha256) << output;
  EXPECT_TRUE(absl::StrContains(output, "the survivors' memory copies assembled into")) << output;
  EXPECT_FALSE(absl::StrContains(output, "checkpoint: step")) << output;  // nothing on disk
  EXPECT_FALSE(absl::StrContains(output, "starting from step 0")) << output;
}

TEST(ElasticTest, WithoutExactOneFailureEndsWithinRoundingOfTheUninterruptedLoss) {
  const TrainGptRun whole = RunTrainGpt("elastic_whole", Flags(TmpDir() + "/whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  std::mt19937 rng(TestSeed() + 1);
  std::string what = absl::StrCat("seed ", TestSeed() + 1, ": ");
  const std::string log = TmpDir() + "/elastic.log";
  const std::string metrics = TmpDir() + "/elastic.jsonl";
  std::vector<std::string> flags = Flags(TmpDir() + "/elastic");
  flags.push_back("--min_nproc=3");
  flags.push_back("--metrics_out=" + metrics);
  const pid_t pid = StartTrainGpt(flags, log);
  ASSERT_GT(pid, 0);
  const int kill_step = std::uniform_int_distribution<int>(3, 30)(rng);
  ASSERT_NE(KillRandomRankAfterStep(pid, log, kill_step, 4, 0, rng, &what), std::string::npos)
      << what << ReadWholeFile(log);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string output = ReadWholeFile(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << what << output;
  EXPECT_TRUE(absl::StrContains(output, "attempt 1 at 3 ranks")) << output;
  absl::StatusOr<fsdp::MetricsRun> run = fsdp::ReadMetricsFile(metrics, "elastic");
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->points.size(), static_cast<size_t>(kSteps));
  const double last = run->points.back().loss;
  const double expected = whole.losses.back();
  EXPECT_LE(std::abs(last - expected), 1e-5 * std::abs(expected))
      << what << "final loss " << last << " against " << expected;
  std::printf("%sfinal loss %.9g against %.9g uninterrupted (relative %.2e)\n", what.c_str(), last,
              expected, std::abs(last - expected) / std::abs(expected));
}

TEST(ElasticTest, ARangeTheGlobalBatchCannotSplitIsRefusedBeforeAnyRankStarts) {
  std::vector<std::string> flags = Flags(TmpDir() + "/refused");
  flags.push_back("--min_nproc=2");
  flags.push_back("--max_nproc=5");
  const TrainGptRun run = RunTrainGpt("elastic_refused", flags);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "does not split over 5 ranks")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "[rank")) << run.output;
}

}  // namespace
}  // namespace fsdp_test
