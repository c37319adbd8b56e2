// File: tests/comm/ucx/ucx_transport_test.cc
//
// The UCX transport between real processes over loopback (see
// ucx_transport_worker.cc for what each rank checks).
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/comm/rendezvous/rank_processes.h"

namespace comm::testing {
namespace {

const char kWorker[] = "tests/comm/ucx/ucx_transport_worker";

// The environment of rank `rank`. Under ThreadSanitizer, UCX's malloc/mmap
// hooks (UCM) crash the process (SIGSEGV in too_long and kill scenarios), so
// they are turned off there; the transport does not need them.
std::map<std::string, std::string> RankEnv(int rank, int world_size, int port,
                                           const std::string& token) {
  std::map<std::string, std::string> env = TorchrunEnv(rank, world_size, port, token);
#if defined(__SANITIZE_THREAD__)
  env["UCX_MEM_MALLOC_HOOKS"] = "no";
  env["UCX_MEM_MMAP_HOOK_MODE"] = "none";
  env["UCX_MEM_EVENTS"] = "no";
#endif
  return env;
}

std::string Describe(const ProcessResult& result) {
  return absl::StrCat("exit=", result.exit_code, " signal=", result.signal,
                      " timed_out=", result.timed_out, "\nstdout: ", result.out,
                      "\nstderr: ", result.err);
}

// Starts `world_size` workers running `scenario`; returns their results.
std::vector<ProcessResult> RunJob(int world_size, const std::string& scenario,
                                  absl::Duration timeout) {
  const int port = FreePort();
  RankProcesses processes;
  for (int r = 0; r < world_size; ++r) {
    processes.Start(RunfilePath(kWorker), {scenario},
                    RankEnv(r, world_size, port, "ucx-test"));
  }
  std::vector<ProcessResult> results;
  for (int r = 0; r < world_size; ++r) results.push_back(processes.Wait(r, timeout));
  return results;
}

class Exchange : public ::testing::TestWithParam<int> {};

TEST_P(Exchange, AllPairsAllTagsAllSizes) {
  std::vector<ProcessResult> results = RunJob(GetParam(), "exchange", absl::Seconds(90));
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << Describe(results[r]);
    EXPECT_TRUE(Contains(results[r].out, "PASS"));
  }
}

// 1: no UCX at all (self messages only); 3: an odd world.
INSTANTIATE_TEST_SUITE_P(WorldSizes, Exchange, ::testing::Values(1, 2, 3, 4));

class Blocking : public ::testing::TestWithParam<int> {};

TEST_P(Blocking, InterruptAndArrivalsWakeBlockUntilActivity) {
  std::vector<ProcessResult> results = RunJob(GetParam(), "block", absl::Seconds(60));
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << Describe(results[r]);
    EXPECT_TRUE(Contains(results[r].out, "interrupt woke after"));
  }
  if (GetParam() > 1) {
    EXPECT_TRUE(Contains(results[0].out, "message woke the receiver"));
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Blocking, ::testing::Values(1, 2));

TEST(UcxTransport, MessageLongerThanTheReceiveFailsThatReceive) {
  std::vector<ProcessResult> results = RunJob(2, "too_long", absl::Seconds(60));
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << Describe(results[r]);
  }
  EXPECT_TRUE(Contains(results[1].out, "too long (10)"));
  EXPECT_TRUE(Contains(results[1].out, "too long (1048576)"));
}

// One rank that outlived the victim: how it ended, and how long after the
// kill.
struct Survivor {
  int rank = 0;
  ProcessResult result;
  absl::Duration noticed;
};

struct KillOutcome {
  bool all_waiting = false;  // every rank got to its wait before the kill
  std::vector<Survivor> survivors;
};

// Starts the wait_for_peer scenario with `victim` and kills the victim once
// every other rank is waiting.
KillOutcome KillWhileOthersWait(int world_size, int victim) {
  const int port = FreePort();
  RankProcesses processes;
  for (int r = 0; r < world_size; ++r) {
    auto env = RankEnv(r, world_size, port, "ucx-kill");
    env["VICTIM"] = std::to_string(victim);
    env["WAIT_MS"] = "20000";
    processes.Start(RunfilePath(kWorker), {"wait_for_peer"}, env);
  }
  KillOutcome outcome;
  if (!processes.WaitForStdout(victim, "READY", absl::Seconds(30))) return outcome;
  for (int r = 0; r < world_size; ++r) {
    if (r != victim && !processes.WaitForStdout(r, "WAITING", absl::Seconds(30))) return outcome;
  }
  outcome.all_waiting = true;
  processes.Kill(victim, SIGKILL);
  const absl::Time killed = absl::Now();
  for (int r = 0; r < world_size; ++r) {
    if (r == victim) continue;
    ProcessResult result = processes.Wait(r, absl::Seconds(30));
    outcome.survivors.push_back({r, result, absl::Now() - killed});
  }
  return outcome;
}

struct KillCase {
  int world_size;
  int victim;
};

class KilledPeer : public ::testing::TestWithParam<KillCase> {};

TEST_P(KilledPeer, IsReportedToEveryWaitingRankWithinSeconds) {
  const KillCase c = GetParam();
  KillOutcome outcome = KillWhileOthersWait(c.world_size, c.victim);
  ASSERT_TRUE(outcome.all_waiting) << "a rank did not reach its wait";
  ASSERT_EQ(outcome.survivors.size(), static_cast<size_t>(c.world_size - 1));
  for (const Survivor& survivor : outcome.survivors) {
    SCOPED_TRACE(absl::StrCat("rank ", survivor.rank, ": ", Describe(survivor.result)));
    EXPECT_EQ(survivor.result.exit_code, 0);
    EXPECT_TRUE(Contains(survivor.result.out, absl::StrCat("rank ", c.victim, " died")));
    EXPECT_TRUE(Contains(survivor.result.out, "UNAVAILABLE"));
    EXPECT_LT(survivor.noticed, absl::Seconds(10)) << "noticed after " << survivor.noticed;
  }
}

// The rank waiting on the victim; every rank; rank 0 (the store) as victim.
INSTANTIATE_TEST_SUITE_P(Cases, KilledPeer,
                         ::testing::Values(KillCase{2, 1}, KillCase{3, 2}, KillCase{3, 0}),
                         [](const ::testing::TestParamInfo<KillCase>& info) {
                           return absl::StrCat("world", info.param.world_size, "_victim",
                                               info.param.victim);
                         });

// A send to a live rank that will never receive it (its collective failed
// too) must still be released when the job fails, over shared memory and
// over TCP: otherwise the caller's buffer stays in the transport's hands.
struct StrandedOutcome {
  bool all_waiting = false;
  ProcessResult sender;   // rank 0
  bool holder_held = false;  // rank 1 was still in the job after rank 0 ended
  ProcessResult holder;   // rank 1
};

StrandedOutcome RunStrandedSend(const std::string& tls) {
  const int port = FreePort();
  RankProcesses processes;
  for (int r = 0; r < 3; ++r) {
    auto env = RankEnv(r, 3, port, "ucx-stranded");
    env["WAIT_MS"] = "10000";
    if (!tls.empty()) env["UCX_TLS"] = tls;
    processes.Start(RunfilePath(kWorker), {"stranded_send"}, env);
  }
  StrandedOutcome outcome;
  if (!processes.WaitForStdout(2, "READY", absl::Seconds(30))) return outcome;
  for (int r = 0; r < 2; ++r) {
    if (!processes.WaitForStdout(r, "WAITING", absl::Seconds(30))) return outcome;
  }
  outcome.all_waiting = true;
  processes.Kill(2, SIGKILL);
  outcome.sender = processes.Wait(0, absl::Seconds(30));
  outcome.holder_held = processes.WaitForStdout(1, "HOLDING", absl::Seconds(5));
  processes.Kill(1, SIGKILL);
  outcome.holder = processes.Wait(1, absl::Seconds(30));
  return outcome;
}

class StrandedSend : public ::testing::TestWithParam<std::string> {};

TEST_P(StrandedSend, SendToALiveRankIsReleasedWhenAnotherRankDies) {
  StrandedOutcome outcome = RunStrandedSend(GetParam());
  ASSERT_TRUE(outcome.all_waiting) << "a rank did not reach its wait";
  EXPECT_EQ(outcome.sender.exit_code, 0) << "rank 0: " << Describe(outcome.sender);
  EXPECT_TRUE(Contains(outcome.sender.out, "send to rank 1: UNAVAILABLE"))
      << Describe(outcome.sender);
  EXPECT_TRUE(Contains(outcome.sender.out, "rank 2 died")) << Describe(outcome.sender);
  // Rank 1 stayed in the job all along (had it left, that would release the
  // send for another reason).
  EXPECT_TRUE(outcome.holder_held) << Describe(outcome.holder);
  EXPECT_TRUE(Contains(outcome.holder.out, "receive from rank 2: UNAVAILABLE"))
      << Describe(outcome.holder);
}

INSTANTIATE_TEST_SUITE_P(Transports, StrandedSend, ::testing::Values("", "tcp,self"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::string(info.param.empty() ? "default" : "tcp");
                         });

TEST(UcxTransport, PeerThatShutsDownCleanlyEndsWaitsWithAnErrorNotAHang) {
  const int port = FreePort();
  RankProcesses processes;
  for (int r = 0; r < 2; ++r) {
    auto env = RankEnv(r, 2, port, "ucx-leave");
    env["VICTIM_LEAVES"] = "1";
    env["WAIT_MS"] = "20000";
    processes.Start(RunfilePath(kWorker), {"wait_for_peer"}, env);
  }
  ProcessResult leaver = processes.Wait(1, absl::Seconds(30));
  EXPECT_EQ(leaver.exit_code, 0) << Describe(leaver);
  ProcessResult waiter = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(waiter.exit_code, 0) << Describe(waiter);
  EXPECT_TRUE(Contains(waiter.out, "rank 1 shut down (said goodbye)"));
  // A clean departure is not a death.
  EXPECT_TRUE(Contains(waiter.out, "health: OK"));
  EXPECT_LT(waiter.elapsed, absl::Seconds(15));
}

}  // namespace
}  // namespace comm::testing
