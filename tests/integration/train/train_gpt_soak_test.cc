// File: tests/integration/train/train_gpt_soak_test.cc
//
// The soak test of issue 37: a 4-rank elastic --exact job (--min_nproc=2,
// --buddy_every=1, no checkpoint directory) takes random faults at random
// moments: kill -9 or SIGSTOP of a random rank while it can shrink, and a
// slot coming back (SIGUSR1 to the launcher) while it can grow. A stopped
// rank is found hung within --hang_timeout_s and left out like a dead one.
// After the faults the job runs to its end, and its parameters must be the
// very bits of the run that never failed.
//
// Seeded: FSDP_SOAK_SEED (default 37) chooses the faults, FSDP_SOAK_FAULTS
// how many kills and stops (default 12; the returns come on top),
// FSDP_SOAK_STEPS the run's length (default 600);
// the whole test is bounded by the test's timeout. Each fault is printed.
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  int parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) ? parsed : fallback;
}

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::vector<std::string> Flags(int steps) {
  std::vector<std::string> flags = ElasticJobFlags(steps);
  flags.push_back("--exact");
  return flags;
}

// The attempt the log is at: its number and world size, and where its
// announcement ends; {-1, 0, npos} before the first.
struct Attempt {
  int number = -1;
  int world = 0;
  size_t end = std::string::npos;
};

Attempt LastAttempt(const std::string& log) {
  Attempt attempt;
  const std::string marker = "elastic job, attempt ";
  const size_t at = log.rfind(marker);
  if (at == std::string::npos) return attempt;
  int number = 0, world = 0;
  if (std::sscanf(log.c_str() + at + marker.size(), "%d at %d ranks", &number, &world) != 2) {
    return attempt;
  }
  attempt.number = number;
  attempt.world = world;
  attempt.end = at + marker.size();
  return attempt;
}

// The step of the last progress line after `from`, or -1.
int LastStepAfter(const std::string& log, size_t from) {
  const size_t at = log.rfind("] step ");
  if (at == std::string::npos || at < from) return -1;
  int step = -1;
  std::sscanf(log.c_str() + at + 7, "%d", &step);
  return step;
}

TEST(SoakTest, RandomKillsStopsAndReturnsEndWithTheBitsOfARunWithoutFaults) {
  const int seed = EnvInt("FSDP_SOAK_SEED", 37);
  const int faults_wanted = EnvInt("FSDP_SOAK_FAULTS", 12);
  const int steps = EnvInt("FSDP_SOAK_STEPS", 600);
  const TrainGptRun whole = RunTrainGpt("soak_whole", Flags(steps));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;

  std::vector<std::string> flags = Flags(steps);
  flags.push_back("--min_nproc=2");
  flags.push_back("--buddy_every=1");
  flags.push_back("--hang_timeout_s=2");
  flags.push_back("--comm_timeout_s=30");
  const std::string log_path = TmpDir() + "/soak.log";
  const pid_t pid = StartTrainGpt(flags, log_path);
  ASSERT_GT(pid, 0);

  std::mt19937 rng(seed);
  std::string what = absl::StrCat("seed ", seed, ":");
  int faults = 0, kills = 0, stops = 0, returns = 0;
  int last_fault_attempt = -1;
  const absl::Time deadline = absl::Now() + absl::Minutes(8);
  bool finished = false;
  int status = 0;
  while (kills + stops < faults_wanted && absl::Now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      finished = true;
      break;
    }
    const std::string log = ReadWholeFile(log_path);
    const Attempt attempt = LastAttempt(log);
    const int step = attempt.number < 0 ? -1 : LastStepAfter(log, attempt.end);
    // One fault per attempt, once it trains: a fault during start-up or
    // while a stop is under way is another test's business.
    if (attempt.number < 0 || attempt.number == last_fault_attempt || step < 0) {
      absl::SleepFor(absl::Milliseconds(5));
      continue;
    }
    if (step > steps - 40) break;  // leave the end alone: the job must finish
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    const bool can_shrink = attempt.world > 2;
    const bool can_grow = attempt.world < 4;
    const bool grow = can_grow && (!can_shrink || std::bernoulli_distribution(0.4)(rng));
    if (grow) {
      kill(pid, SIGUSR1);
      ++returns;
      absl::StrAppend(&what, " [", faults + 1, "] a slot back at ", attempt.world, " ranks;");
    } else {
      const int rank = std::uniform_int_distribution<int>(0, attempt.world - 1)(rng);
      const pid_t victim = RankPid(ChildPids(pid), rank);
      if (victim <= 0) continue;  // the attempt ended meanwhile: look again
      const bool stop = std::bernoulli_distribution(0.3)(rng);
      kill(victim, stop ? SIGSTOP : SIGKILL);
      ++(stop ? stops : kills);
      absl::StrAppend(&what, " [", faults + 1, "] ", stop ? "stopped" : "killed", " rank ", rank,
                      " of ", attempt.world, " after step ", step, ";");
    }
    ++faults;
    last_fault_attempt = attempt.number;
  }
  std::printf("%s\n", what.c_str());
  if (!finished) {
    // Let it finish, for as long as it makes progress: on a loaded machine
    // the last steps may crawl, but a minute without a new step line (or a
    // new attempt) is a job that is stuck.
    size_t seen = 0;
    absl::Time progress_at = absl::Now();
    while (waitpid(pid, &status, WNOHANG) != pid) {
      const size_t now_seen = ReadWholeFile(log_path).size();
      if (now_seen != seen) {
        seen = now_seen;
        progress_at = absl::Now();
      } else if (absl::Now() - progress_at > absl::Seconds(60)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL() << what << " the job made no progress for 60 s\n" << ReadWholeFile(log_path);
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  const std::string output = ReadWholeFile(log_path);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << what << "\n" << output;
  EXPECT_GE(kills + stops, faults_wanted) << what << "\n" << output;
  EXPECT_GT(returns, 0) << what;
  const size_t last = output.rfind("params sha256 ");
  ASSERT_NE(last, std::string::npos) << output;
  EXPECT_EQ(output.substr(last + 14, 64), whole.param_sha256) << what << "\n" << output;
  EXPECT_TRUE(absl::StrContains(output, absl::StrCat("train_gpt: done, ", steps, " steps")));
  EXPECT_EQ(UcxWarningLines(output), std::vector<std::string>()) << output;
  std::printf("%d faults (%d kills, %d stops, %d slots back), recovered; final digest %s\n", faults,
              kills, stops, returns, whole.param_sha256.c_str());
}

}  // namespace
}  // namespace fsdp_test
