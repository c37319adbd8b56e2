// File: tests/comm/ucx/ucx_transport_test.cc
//
// The UCX transport between real processes over loopback (see
// ucx_transport_worker.cc for what each rank checks).
#include <signal.h>

#include <string>

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
  if (GetParam() > 1) EXPECT_TRUE(Contains(results[0].out, "message woke the receiver"));
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

// Starts the wait_for_peer scenario with `victim`, kills the victim once every
// other rank is waiting, and checks they report it within a few seconds.
void KillWhileOthersWait(int world_size, int victim) {
  const int port = FreePort();
  RankProcesses processes;
  for (int r = 0; r < world_size; ++r) {
    auto env = RankEnv(r, world_size, port, "ucx-kill");
    env["VICTIM"] = std::to_string(victim);
    env["WAIT_MS"] = "20000";
    processes.Start(RunfilePath(kWorker), {"wait_for_peer"}, env);
  }
  ASSERT_TRUE(processes.WaitForStdout(victim, "READY", absl::Seconds(30)));
  for (int r = 0; r < world_size; ++r) {
    if (r != victim) ASSERT_TRUE(processes.WaitForStdout(r, "WAITING", absl::Seconds(30)));
  }
  processes.Kill(victim, SIGKILL);
  const absl::Time killed = absl::Now();
  for (int r = 0; r < world_size; ++r) {
    if (r == victim) continue;
    ProcessResult result = processes.Wait(r, absl::Seconds(30));
    const absl::Duration noticed = absl::Now() - killed;
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ": " << Describe(result);
    EXPECT_TRUE(Contains(result.out, absl::StrCat("rank ", victim, " died")));
    EXPECT_TRUE(Contains(result.out, "UNAVAILABLE"));
    EXPECT_LT(noticed, absl::Seconds(10)) << "rank " << r << " noticed after " << noticed;
  }
}

TEST(UcxTransport, KilledPeerIsReportedToTheRankWaitingOnIt) { KillWhileOthersWait(2, 1); }

TEST(UcxTransport, KilledPeerIsReportedToEveryRank) { KillWhileOthersWait(3, 2); }

TEST(UcxTransport, KilledRankZeroIsReportedToTheOthers) { KillWhileOthersWait(3, 0); }

// A send to a live rank that will never receive it (its collective failed
// too) must still be released when the job fails, over shared memory and
// over TCP: otherwise the caller's buffer stays in the transport's hands.
void StrandedSendIsReleased(const std::string& tls) {
  const int port = FreePort();
  RankProcesses processes;
  for (int r = 0; r < 3; ++r) {
    auto env = RankEnv(r, 3, port, "ucx-stranded");
    env["WAIT_MS"] = "10000";
    if (!tls.empty()) env["UCX_TLS"] = tls;
    processes.Start(RunfilePath(kWorker), {"stranded_send"}, env);
  }
  ASSERT_TRUE(processes.WaitForStdout(2, "READY", absl::Seconds(30)));
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(processes.WaitForStdout(r, "WAITING", absl::Seconds(30)));
  processes.Kill(2, SIGKILL);
  ProcessResult sender = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(sender.exit_code, 0) << "rank 0: " << Describe(sender);
  EXPECT_TRUE(Contains(sender.out, "send to rank 1: UNAVAILABLE")) << Describe(sender);
  EXPECT_TRUE(Contains(sender.out, "rank 2 died")) << Describe(sender);
  // Rank 1 stayed in the job all along (it did not leave, which would
  // release the send for another reason).
  EXPECT_TRUE(processes.WaitForStdout(1, "HOLDING", absl::Seconds(5)));
  processes.Kill(1, SIGKILL);
  ProcessResult holder = processes.Wait(1, absl::Seconds(30));
  EXPECT_TRUE(Contains(holder.out, "receive from rank 2: UNAVAILABLE")) << Describe(holder);
  EXPECT_TRUE(Contains(holder.out, "rank 2 died")) << Describe(holder);
}

TEST(UcxTransport, SendToALiveRankIsReleasedWhenAnotherRankDies) {
  StrandedSendIsReleased("");
}

TEST(UcxTransport, SendToALiveRankIsReleasedWhenAnotherRankDiesOverTcp) {
  StrandedSendIsReleased("tcp,self");
}

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
