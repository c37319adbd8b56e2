// File: tests/integration/comm/failure_test.cc
//
// Failures across real processes on loopback: a rank SIGKILLed in the middle
// of an all-reduce, a rank that hangs instead (SIGSTOPped, or spinning in a
// computation without calling the communicator), a rank with a wrong
// WORLD_SIZE, a rank that never arrives, and a rank that dies of SIGSEGV
// under the launcher (its stack trace must reach the launcher's output). Ranks are started directly (tests/integration/comm/
// rank_processes.h), not through //comm/launcher, because the launcher
// tears the whole job down as soon as one rank dies, which would hide what the
// survivors' communicators report.
//
// Each case checks the contract of comm/communicator.h and
// comm/rendezvous/rendezvous.h from the worker's output lines:
//   - every survivor fails (no one reports PASS) within its deadline,
//   - with the documented code,
//   - and the message names the culprit rank.
//
// Usage (Bazel passes it): failure_test <path of collective_worker> <path of
// //comm/launcher:launch> [--gtest_filter=...]
// (BUILD makes four targets of it: kill_rank_test, hang_rank_test,
// rendezvous_failure_test and crash_trace_test.)
#include <signal.h>
#include <stdlib.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tests/comm/rendezvous/rank_processes.h"
#include "tests/integration/comm/rank_processes.h"

namespace comm_test {
namespace {

std::string g_worker_path;
std::string g_launch_path;

// The survivors' Wait() timeout in the kill test: short, so the test is fast
// even when the communicator only notices the death by timing out.
constexpr int kWaitTimeoutMs = 5000;
// How long a survivor may take past that to report and exit (loaded 2-core
// machine, teardown of a UCX worker with a dead peer).
constexpr absl::Duration kExitSlack = absl::Seconds(15);
constexpr int kRendezvousTimeoutMs = 2000;

std::string Describe(const RankOutcome& outcome) {
  return absl::StrCat("rank ", outcome.rank, ": exited=", outcome.exited,
                      " code=", outcome.exit_code, " signal=", outcome.term_signal,
                      " killed_at_deadline=", outcome.killed_at_deadline,
                      " lifetime=", absl::FormatDuration(outcome.lifetime),
                      "\n--- output ---\n", outcome.output, "--------------");
}

// A new empty directory under $TEST_TMPDIR (or /tmp).
std::string FreshDirectory(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_XXXXXX");
  char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
  return pattern;
}

// The "STATUS <CODE> after <ms> ms in <where>: <message>" line, parsed.
struct StatusLine {
  std::string code;
  long long after_ms = -1;
  std::string text;  // the whole line
};

bool ParseStatusLine(const std::string& output, StatusLine* parsed) {
  std::string line = FindLine(output, " STATUS ");
  if (line.empty()) return false;
  parsed->text = line;
  size_t at = line.find(" STATUS ") + 8;
  size_t space = line.find(' ', at);
  parsed->code = line.substr(at, space - at);
  size_t after = line.find("after ", space);
  if (after != std::string::npos) parsed->after_ms = std::atoll(line.c_str() + after + 6);
  return true;
}

struct KillCase {
  int world_size;
  int victim;
  bool victim_posts;  // dies after posting its all-reduce, or just before
};

class KillRankTest : public testing::TestWithParam<KillCase> {};

TEST_P(KillRankTest, SurvivorsFailInTimeNamingTheDeadRank) {
  const KillCase c = GetParam();
  // The victim dies only once every survivor has posted its all-reduce.
  const std::string posted_dir = FreshDirectory("kill");
  RankProcesses job(g_worker_path,
                    {"--scenario=kill", absl::StrCat("--victim=", c.victim),
                     c.victim_posts ? "--victim_posts" : "--novictim_posts",
                     absl::StrCat("--timeout_ms=", kWaitTimeoutMs),
                     "--rendezvous_timeout_ms=20000",
                     absl::StrCat("--posted_dir=", posted_dir)});
  std::vector<int> ranks;
  for (int r = 0; r < c.world_size; ++r) ranks.push_back(r);
  ASSERT_TRUE(job.Start(c.world_size, ranks, {}).ok());
  std::vector<RankOutcome> outcomes =
      job.WaitAll(absl::Seconds(20) + absl::Milliseconds(kWaitTimeoutMs) + kExitSlack);

  const std::string dead = absl::StrCat("rank ", c.victim);
  for (const RankOutcome& outcome : outcomes) {
    SCOPED_TRACE(Describe(outcome));
    if (outcome.rank == c.victim) {
      EXPECT_EQ(outcome.term_signal, SIGKILL);
      EXPECT_FALSE(FindLine(outcome.output, "raising SIGKILL").empty())
          << "the victim died before it reached the kill point";
      continue;
    }
    EXPECT_FALSE(outcome.killed_at_deadline) << "a survivor hung";
    EXPECT_TRUE(FindLine(outcome.output, " PASS ").empty())
        << "a survivor finished an all-reduce that a dead rank was part of";
    StatusLine status;
    ASSERT_TRUE(ParseStatusLine(outcome.output, &status)) << "no STATUS line";
    EXPECT_TRUE(status.code == "UNAVAILABLE" || status.code == "DEADLINE_EXCEEDED")
        << status.text;
    EXPECT_TRUE(absl::StrContains(status.text, "all_reduce")) << status.text;
    // Detected within the Wait() deadline (plus scheduling slack).
    EXPECT_GE(status.after_ms, 0) << status.text;
    EXPECT_LE(status.after_ms, kWaitTimeoutMs + 2000) << status.text;
    EXPECT_TRUE(absl::StrContains(status.text, dead))
        << "the error does not name the dead " << dead << ": " << status.text;
    EXPECT_TRUE(outcome.exited) << "a survivor did not exit by itself";
    EXPECT_EQ(outcome.exit_code, 3);
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, KillRankTest,
    testing::Values(KillCase{2, 1, true}, KillCase{3, 1, true}, KillCase{3, 0, true},
                    KillCase{4, 2, true}, KillCase{2, 0, false}, KillCase{3, 2, false},
                    KillCase{4, 1, false}),
    [](const testing::TestParamInfo<KillCase>& info) {
      return absl::StrCat("world", info.param.world_size, "_victim", info.param.victim,
                          info.param.victim_posts ? "_after_posting" : "_before_posting");
    });

// --- Hangs: a rank that stops or computes forever instead of dying ---

// The hang bound of these jobs, and the survivors' Wait() timeout: far
// longer, so that only the hang detector can end their wait in time.
constexpr int kHangBoundMs = 3000;
constexpr int kHangWaitTimeoutMs = 30000;
// How long past the bound a survivor may take to report: the verdict comes
// within one heartbeat interval (bound / 5) of the bound, plus scheduling on
// a loaded 2-core machine.
constexpr int kHangReportSlackMs = 3000;
// A spinning victim computes until well after it was declared hung, then
// posts, and must hear that it was.
constexpr int kSpinMs = kHangBoundMs + 5000;

enum class HangMode { kStop, kSpin };

struct HangCase {
  int world_size;
  int victim;
  HangMode mode;
};

class HangRankTest : public testing::TestWithParam<HangCase> {};

TEST_P(HangRankTest, SurvivorsNameTheHungRankWithinTheBound) {
  const HangCase c = GetParam();
  const std::string posted_dir = FreshDirectory("hang");
  RankProcesses job(g_worker_path,
                    {"--scenario=hang", absl::StrCat("--victim=", c.victim),
                     c.mode == HangMode::kStop ? "--hang_mode=stop" : "--hang_mode=spin",
                     absl::StrCat("--spin_ms=", kSpinMs),
                     absl::StrCat("--hang_timeout_ms=", kHangBoundMs),
                     absl::StrCat("--timeout_ms=", kHangWaitTimeoutMs),
                     "--rendezvous_timeout_ms=20000",
                     absl::StrCat("--posted_dir=", posted_dir)});
  std::vector<int> ranks;
  for (int r = 0; r < c.world_size; ++r) ranks.push_back(r);
  ASSERT_TRUE(job.Start(c.world_size, ranks, {}).ok());
  // A stopped victim is killed (and reaped) once the survivors are done; a
  // spinning one finishes by itself.
  std::vector<int> linger;
  if (c.mode == HangMode::kStop) linger.push_back(c.victim);
  std::vector<RankOutcome> outcomes =
      job.WaitAll(absl::Seconds(20) + absl::Milliseconds(kSpinMs + kHangWaitTimeoutMs), linger);

  const std::string hung = absl::StrCat("rank ", c.victim, " is hung");
  for (const RankOutcome& outcome : outcomes) {
    SCOPED_TRACE(Describe(outcome));
    EXPECT_FALSE(outcome.killed_at_deadline) << "a rank hung past the test's deadline";
    EXPECT_TRUE(FindLine(outcome.output, " PASS ").empty())
        << "an all-reduce finished although a rank of it hung";
    if (outcome.rank == c.victim) {
      if (c.mode == HangMode::kStop) {
        EXPECT_FALSE(FindLine(outcome.output, "raising SIGSTOP").empty())
            << "the victim failed before it reached the stop point";
        EXPECT_TRUE(outcome.killed_after_others);
      } else {
        // Once it calls again, it hears that the others gave up on it.
        StatusLine status;
        ASSERT_TRUE(ParseStatusLine(outcome.output, &status)) << "no STATUS line";
        EXPECT_EQ(status.code, "UNAVAILABLE") << status.text;
        EXPECT_TRUE(absl::StrContains(status.text, "(this rank) was declared hung"))
            << status.text;
        EXPECT_EQ(outcome.exit_code, 3);
      }
      continue;
    }
    StatusLine status;
    ASSERT_TRUE(ParseStatusLine(outcome.output, &status)) << "no STATUS line";
    // kUnavailable: the verdict is final, like a death (comm/ucx/ucx_transport.h).
    EXPECT_EQ(status.code, "UNAVAILABLE") << status.text;
    EXPECT_TRUE(absl::StrContains(status.text, "all_reduce")) << status.text;
    EXPECT_TRUE(absl::StrContains(status.text, hung))
        << "the error does not name the hung rank " << c.victim << ": " << status.text;
    if (c.mode == HangMode::kStop) {
      EXPECT_TRUE(absl::StrContains(status.text, "no heartbeat")) << status.text;
    } else {
      EXPECT_TRUE(absl::StrContains(status.text, "has not called into the communicator"))
          << status.text;
    }
    // Not from some other cause before the bound could pass, and not much
    // after it.
    EXPECT_GE(status.after_ms, kHangBoundMs / 2) << status.text;
    EXPECT_LE(status.after_ms, kHangBoundMs + kHangReportSlackMs) << status.text;
    EXPECT_TRUE(outcome.exited) << "a survivor did not exit by itself";
    EXPECT_EQ(outcome.exit_code, 3);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, HangRankTest,
    testing::Values(HangCase{3, 1, HangMode::kStop}, HangCase{4, 3, HangMode::kStop},
                    HangCase{4, 0, HangMode::kStop}, HangCase{3, 0, HangMode::kStop},
                    HangCase{4, 2, HangMode::kSpin}, HangCase{3, 0, HangMode::kSpin}),
    [](const testing::TestParamInfo<HangCase>& info) {
      return absl::StrCat("world", info.param.world_size, "_victim", info.param.victim,
                          info.param.mode == HangMode::kStop ? "_stopped" : "_spinning");
    });

// The same hangs under //comm/launcher:launch: the launcher's final message
// must name the hung rank as the root cause, although a survivor is the first
// rank to exit; and the launcher must end the stopped (or spinning) rank and
// return, not wait on it.
class LaunchedHangTest : public testing::TestWithParam<HangMode> {};

TEST_P(LaunchedHangTest, LauncherNamesTheHungRankAsTheRootCause) {
  const HangMode mode = GetParam();
  const int victim = mode == HangMode::kStop ? 3 : 1;
  const std::string posted_dir = FreshDirectory("launched_hang");
  comm::testing::RankProcesses processes;
  processes.Start(g_launch_path,
                  {"--nproc", "4", "--", g_worker_path, "--scenario=hang",
                   absl::StrCat("--victim=", victim),
                   mode == HangMode::kStop ? "--hang_mode=stop" : "--hang_mode=spin",
                   // Longer than the test: only the launcher can end it.
                   "--spin_ms=600000", absl::StrCat("--hang_timeout_ms=", kHangBoundMs),
                   absl::StrCat("--timeout_ms=", kHangWaitTimeoutMs),
                   absl::StrCat("--posted_dir=", posted_dir)},
                  {});
  comm::testing::ProcessResult result = processes.Wait(0, absl::Seconds(60));
  const std::string trace = absl::StrCat("exit=", result.exit_code, " timed_out=",
                                         result.timed_out, "\nstdout:\n", result.out,
                                         "\nstderr:\n", result.err);
  SCOPED_TRACE(trace);
  EXPECT_FALSE(result.timed_out) << "the launcher did not end its hung rank";
  EXPECT_EQ(result.exit_code, 3);  // the first survivor's code
  const std::string cause = absl::StrCat("launch: rank ", victim, " is hung: ");
  EXPECT_TRUE(absl::StrContains(result.err, cause)) << "no root cause naming rank " << victim;
  EXPECT_TRUE(absl::StrContains(result.err, "the root cause; rank "));
  EXPECT_TRUE(absl::StrContains(result.err, "(the first rank to exit)"));
  if (mode == HangMode::kStop) {
    EXPECT_TRUE(absl::StrContains(result.err, "[launcher] rank 3 was stopped by signal 19"));
  }
  // The bound, the survivors' exit, the launcher's SIGTERM (a hung rank
  // that ignored it would take the 3 s grace), slack for a loaded machine.
  EXPECT_LT(result.elapsed, absl::Milliseconds(kHangBoundMs + kHangReportSlackMs) +
                                absl::Seconds(3 + 6));
}

INSTANTIATE_TEST_SUITE_P(Modes, LaunchedHangTest,
                         testing::Values(HangMode::kStop, HangMode::kSpin),
                         [](const testing::TestParamInfo<HangMode>& info) {
                           return info.param == HangMode::kStop ? "stopped" : "spinning";
                         });

// --- Crashes: a rank that dies of SIGSEGV under //comm/launcher:launch ---

// The crashed rank's stack trace reaches the launcher's output (prefixed
// with the rank), naming the function that crashed, and the launcher still
// reports the signal and stops the others. Under a sanitizer the
// sanitizer's own report stands in for the trace (comm/launcher/crash_trace.h).
TEST(LaunchedCrashTest, TheCrashedRanksStackTraceReachesTheLaunchersOutput) {
  comm::testing::RankProcesses processes;
  processes.Start(g_launch_path,
                  {"--nproc", "2", "--", g_worker_path, "--scenario=crash", "--victim=1",
                   "--timeout_ms=30000"},
                  {});
  comm::testing::ProcessResult result = processes.Wait(0, absl::Seconds(60));
  const std::string all = absl::StrCat(result.out, result.err);
  SCOPED_TRACE(absl::StrCat("exit=", result.exit_code, " timed_out=", result.timed_out,
                            "\nstdout:\n", result.out, "\nstderr:\n", result.err));
  ASSERT_FALSE(result.timed_out) << "the launcher did not end the job";
  EXPECT_NE(result.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(all, "[rank 1/2] crashing (SIGSEGV)"));
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_TRUE(absl::StrContains(all, "AddressSanitizer: SEGV"));
#elif defined(__SANITIZE_THREAD__)
  EXPECT_TRUE(absl::StrContains(all, "ThreadSanitizer: SEGV"));
#else
  EXPECT_TRUE(absl::StrContains(all, "[launcher] rank 1 was killed by signal 11"));
  EXPECT_TRUE(absl::StrContains(all, "*** SIGSEGV received"));
  // Symbolized frames, forwarded with the rank's prefix: the faulting
  // function and its caller (the unwinding went past the signal frame).
  for (const char* function : {"CrashOnPurposeInTheVictim()", "RunCrash()"}) {
    bool named = false;
    for (absl::string_view line : absl::StrSplit(all, '\n')) {
      if (absl::StartsWith(line, "[rank 1]") && absl::StrContains(line, function)) named = true;
    }
    EXPECT_TRUE(named) << "no line of rank 1 names " << function;
  }
#endif
}

TEST(RendezvousFailureTest, WrongWorldSizeOnOneRankFailsEveryRank) {
  RankProcesses job(g_worker_path,
                    {"--scenario=join", "--timeout_ms=5000",
                     absl::StrCat("--rendezvous_timeout_ms=", kRendezvousTimeoutMs)});
  ASSERT_TRUE(job.Start(/*world_size=*/2, {0, 1}, /*world_size_override=*/{{1, 3}}).ok());
  std::vector<RankOutcome> outcomes = job.WaitAll(absl::Seconds(20));
  for (const RankOutcome& outcome : outcomes) {
    SCOPED_TRACE(Describe(outcome));
    EXPECT_FALSE(outcome.killed_at_deadline) << "a rank hung";
    EXPECT_TRUE(FindLine(outcome.output, " PASS ").empty());
    StatusLine status;
    ASSERT_TRUE(ParseStatusLine(outcome.output, &status)) << "no STATUS line";
    EXPECT_TRUE(absl::StrContains(status.text, "in rendezvous")) << status.text;
    EXPECT_TRUE(absl::StrContains(status.text, "WORLD_SIZE")) << status.text;
    EXPECT_EQ(outcome.exit_code, 3);
  }
}

TEST(RendezvousFailureTest, MissingRankIsNamedAfterTheTimeout) {
  RankProcesses job(g_worker_path,
                    {"--scenario=join", "--timeout_ms=5000",
                     absl::StrCat("--rendezvous_timeout_ms=", kRendezvousTimeoutMs)});
  ASSERT_TRUE(job.Start(/*world_size=*/3, {0, 1}, {}).ok());  // rank 2 never starts
  std::vector<RankOutcome> outcomes = job.WaitAll(absl::Seconds(20));
  for (const RankOutcome& outcome : outcomes) {
    SCOPED_TRACE(Describe(outcome));
    EXPECT_FALSE(outcome.killed_at_deadline) << "a rank hung";
    StatusLine status;
    ASSERT_TRUE(ParseStatusLine(outcome.output, &status)) << "no STATUS line";
    EXPECT_TRUE(status.code == "ABORTED" || status.code == "DEADLINE_EXCEEDED")
        << status.text;
    EXPECT_TRUE(absl::StrContains(status.text, "rank 2")) << status.text;
    // Not before the rendezvous timeout, and not much after it. The deadline
    // is rank 0's (it hosts the store), counted from its own start: a rank
    // that started later under load sees less of it on its own clock, so the
    // lower bound is checked on rank 0's clock, the time its message reports.
    const size_t waited_at = status.text.find("timed out after ");
    ASSERT_NE(waited_at, std::string::npos) << status.text;
    const double waited_s = std::atof(status.text.c_str() + waited_at + 16);
    EXPECT_GE(waited_s * 1000, kRendezvousTimeoutMs - 100) << status.text;
    if (outcome.rank == 0) {
      EXPECT_GE(status.after_ms, kRendezvousTimeoutMs - 100) << status.text;
    }
    EXPECT_LE(status.after_ms, kRendezvousTimeoutMs + 5000) << status.text;
    EXPECT_EQ(outcome.exit_code, 3);
  }
}

}  // namespace
}  // namespace comm_test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <path of collective_worker> <path of launch>\n", argv[0]);
    return 2;
  }
  comm_test::g_worker_path = argv[1];
  comm_test::g_launch_path = argv[2];
  return RUN_ALL_TESTS();
}
