// File: tests/comm/rendezvous/rendezvous_test.cc
//
// The rendezvous between real processes over loopback: success at 1, 2 and 4
// ranks, and each way a job can be misconfigured, checking that the right
// ranks get the named error within the deadline.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/comm/rendezvous/rank_processes.h"

namespace comm::testing {
namespace {


const char kWorker[] = "tests/comm/rendezvous/rendezvous_worker";
// Errors must come within the rendezvous timeout plus this.
constexpr absl::Duration kSlack = absl::Seconds(6);

std::map<std::string, std::string> WithTimeout(std::map<std::string, std::string> env,
                                               absl::Duration timeout) {
  env["RDV_TIMEOUT_MS"] = std::to_string(absl::ToInt64Milliseconds(timeout));
  return env;
}

std::string Describe(const ProcessResult& result) {
  return absl::StrCat("exit=", result.exit_code, " signal=", result.signal,
                      " timed_out=", result.timed_out, "\nstdout: ", result.out,
                      "\nstderr: ", result.err);
}

class RendezvousSuccess : public ::testing::TestWithParam<int> {};

TEST_P(RendezvousSuccess, EveryRankGetsEveryBlob) {
  const int world_size = GetParam();
  const int port = FreePort();
  RankProcesses processes;
  for (int r = 0; r < world_size; ++r) {
    processes.Start(RunfilePath(kWorker), {},
                    WithTimeout(TorchrunEnv(r, world_size, port, "job-a"), absl::Seconds(20)));
  }
  for (int r = 0; r < world_size; ++r) {
    ProcessResult result = processes.Wait(r, absl::Seconds(30));
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ": " << Describe(result);
    EXPECT_TRUE(Contains(result.out, absl::StrCat("ROSTER OK ", world_size)));
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RendezvousSuccess, ::testing::Values(1, 2, 4));

TEST(Rendezvous, WorldOfOneNeedsNoMasterPort) {
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ProcessResult result = processes.Wait(0, absl::Seconds(10));
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_TRUE(Contains(result.out, "ROSTER OK 1"));
}

TEST(RendezvousErrors, WrongWorldSizeAbortsEveryRank) {
  const int port = FreePort();
  const absl::Duration timeout = absl::Seconds(3);
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(0, 2, port, "t"), timeout));
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(1, 3, port, "t"), timeout));
  for (int r = 0; r < 2; ++r) {
    ProcessResult result = processes.Wait(r, timeout + kSlack);
    EXPECT_EQ(result.exit_code, 1) << Describe(result);
    EXPECT_TRUE(Contains(result.out, "ABORTED"));
    EXPECT_TRUE(Contains(result.out, "rank 1 (host"));
    EXPECT_TRUE(Contains(result.out, "says WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2"));
    EXPECT_LT(result.elapsed, timeout + kSlack);
  }
}

TEST(RendezvousErrors, DuplicateRankAbortsTheJob) {
  const int port = FreePort();
  const absl::Duration timeout = absl::Seconds(3);
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(0, 3, port, "t"), timeout));
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(1, 3, port, "t"), timeout));
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(1, 3, port, "t"), timeout));
  for (int r = 0; r < 3; ++r) {
    ProcessResult result = processes.Wait(r, timeout + kSlack);
    EXPECT_EQ(result.exit_code, 1) << Describe(result);
    EXPECT_TRUE(Contains(result.out, "duplicate rank: two processes say RANK=1"));
  }
}

TEST(RendezvousErrors, MissingRankIsNamedByRankZeroAndOthers) {
  const int port = FreePort();
  const absl::Duration timeout = absl::Seconds(2);
  RankProcesses processes;
  // World of 4; rank 2 never starts.
  for (int r : {0, 1, 3}) {
    processes.Start(RunfilePath(kWorker), {},
                    WithTimeout(TorchrunEnv(r, 4, port, "t"), timeout));
  }
  for (int i = 0; i < 3; ++i) {
    ProcessResult result = processes.Wait(i, timeout + kSlack);
    EXPECT_EQ(result.exit_code, 1) << Describe(result);
    EXPECT_TRUE(Contains(result.out, "rendezvous timed out after"));
    EXPECT_TRUE(Contains(result.out, "rank 2 never arrived (3 of 4 ranks joined)"));
    EXPECT_LT(result.elapsed, timeout + kSlack);
  }
}

TEST(RendezvousErrors, PortInUseOnRankZero) {
  // Hold a listening socket on the port, as another program would.
  int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);

  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {},
                  WithTimeout(TorchrunEnv(0, 2, port, "t"), absl::Seconds(3)));
  ProcessResult result = processes.Wait(0, absl::Seconds(10));
  close(holder);
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.out, absl::StrCat("rank 0: MASTER_PORT ", port,
                                                 " is in use on this host; choose another")));
}

// A listening socket on a kernel-chosen port of 127.0.0.1, as another
// program (or a store left behind by an earlier job) would hold MASTER_PORT.
int ListenOnSomePort(int* port) {
  int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(holder, 4) != 0) {
    close(holder);
    return -1;
  }
  socklen_t length = sizeof(address);
  getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  *port = ntohs(address.sin_port);
  return holder;
}

// A rank that reaches something other than its store before the store proved
// itself (no challenge, or bytes that are no frame) ends with the named
// error, not a crash on the way out.
TEST(RendezvousErrors, APortHeldByASilentProgramIsNamedAfterTheTimeout) {
  int port = 0;
  const int holder = ListenOnSomePort(&port);
  ASSERT_GE(holder, 0);
  const absl::Duration timeout = absl::Seconds(2);
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(1, 2, port, "t"), timeout));
  // The kernel completes the connection from the backlog; nobody answers.
  ProcessResult result = processes.Wait(0, timeout + kSlack);
  close(holder);
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.out, absl::StrCat("rank 1: no challenge from the rendezvous store "
                                                "at 127.0.0.1:",
                                                port, " after")))
      << Describe(result);
}

TEST(RendezvousErrors, APortHeldByAnotherServiceIsNamed) {
  int port = 0;
  const int holder = ListenOnSomePort(&port);
  ASSERT_GE(holder, 0);
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {},
                  WithTimeout(TorchrunEnv(1, 2, port, "t"), absl::Seconds(10)));
  const int connection = accept(holder, nullptr, nullptr);
  ASSERT_GE(connection, 0);
  const char kGreeting[] = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n";
  ASSERT_EQ(write(connection, kGreeting, sizeof(kGreeting) - 1),
            static_cast<ssize_t>(sizeof(kGreeting) - 1));
  ProcessResult result = processes.Wait(0, absl::Seconds(15));
  close(connection);
  close(holder);
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.out, "is MASTER_PORT some other service's port")) << Describe(result);
}

TEST(RendezvousErrors, UnreachableMasterIsNamedAfterTheTimeout) {
  const int port = FreePort();  // nobody listens there
  const absl::Duration timeout = absl::Seconds(2);
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(1, 2, port, "t"), timeout));
  ProcessResult result = processes.Wait(0, timeout + kSlack);
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.out, absl::StrCat("rank 1: could not reach the rendezvous store at "
                                     "127.0.0.1:", port, " after")));
  EXPECT_GE(result.elapsed, timeout - absl::Milliseconds(200));
  EXPECT_LT(result.elapsed, timeout + kSlack);
}

TEST(RendezvousErrors, RankOfAnotherJobIsRefusedAndTheJobGoesOn) {
  const int port = FreePort();
  RankProcesses processes;
  const int rank0 = processes.Start(RunfilePath(kWorker), {},
                                    WithTimeout(TorchrunEnv(0, 2, port, "job-a"),
                                                absl::Seconds(20)));
  const int intruder = processes.Start(RunfilePath(kWorker), {},
                                       WithTimeout(TorchrunEnv(1, 2, port, "job-b"),
                                                   absl::Seconds(20)));
  ProcessResult refused = processes.Wait(intruder, absl::Seconds(25));
  EXPECT_EQ(refused.exit_code, 1) << Describe(refused);
  EXPECT_TRUE(Contains(refused.out, "PERMISSION_DENIED"));
  EXPECT_TRUE(Contains(refused.out, "job token mismatch"));
  EXPECT_TRUE(Contains(refused.out, "this rank was refused"));

  const int rank1 = processes.Start(RunfilePath(kWorker), {},
                                    WithTimeout(TorchrunEnv(1, 2, port, "job-a"),
                                                absl::Seconds(20)));
  for (int index : {rank0, rank1}) {
    ProcessResult result = processes.Wait(index, absl::Seconds(25));
    EXPECT_EQ(result.exit_code, 0) << Describe(result);
    EXPECT_TRUE(Contains(result.out, "ROSTER OK 2"));
  }
}

TEST(RendezvousErrors, RankThatCrashesWhileJoiningAbortsTheOthers) {
  const int port = FreePort();
  const absl::Duration timeout = absl::Seconds(20);
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(0, 3, port, "t"), timeout));
  processes.Start(RunfilePath(kWorker), {}, WithTimeout(TorchrunEnv(1, 3, port, "t"), timeout));
  // Rank 1 joins, then dies before rank 2 arrives.
  absl::SleepFor(absl::Seconds(1));
  processes.Kill(1, SIGKILL);
  ProcessResult result = processes.Wait(0, absl::Seconds(10));
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.out, "rank 1 (host"));
  EXPECT_TRUE(Contains(result.out, "disconnected during the rendezvous"));
}

// --- Heartbeats: hangs the connection alone cannot see ---

constexpr int kHangMs = 1000;
// A verdict comes within one heartbeat interval (bound / 5) past the bound;
// the rest is for a loaded machine.
constexpr absl::Duration kVerdictSlack = absl::Seconds(3);

// Starts `world_size` ranks that watch their failure detector for
// `watch`, with a 1 s hang bound, and waits until all have their roster.
void StartWatchers(RankProcesses& processes, int world_size, absl::Duration watch) {
  const int port = FreePort();
  for (int r = 0; r < world_size; ++r) {
    std::map<std::string, std::string> env =
        WithTimeout(TorchrunEnv(r, world_size, port, "hb"), absl::Seconds(20));
    env["RDV_HANG_MS"] = std::to_string(kHangMs);
    env["RDV_WATCH_MS"] = std::to_string(absl::ToInt64Milliseconds(watch));
    processes.Start(RunfilePath(kWorker), {}, env);
  }
  for (int r = 0; r < world_size; ++r) {
    ASSERT_TRUE(processes.WaitForStdout(r, "ROSTER OK", absl::Seconds(20)))
        << "rank " << r << ": " << processes.StdoutSoFar(r);
  }
}

TEST(Heartbeats, StoppedRankIsDeclaredHungToEveryOtherRank) {
  RankProcesses processes;
  StartWatchers(processes, 3, absl::Seconds(6));
  processes.Kill(2, SIGSTOP);
  const absl::Time stopped = absl::Now();
  for (int r : {0, 1}) {
    EXPECT_TRUE(processes.WaitForStdout(r, "EVENT 2 hung rank 2 is hung: no heartbeat",
                                        absl::Milliseconds(kHangMs) + kVerdictSlack))
        << "rank " << r << ": " << processes.StdoutSoFar(r);
  }
  EXPECT_GE(absl::Now() - stopped, absl::Milliseconds(kHangMs / 2));
  processes.Kill(2, SIGKILL);
  for (int r : {0, 1}) {
    ProcessResult result = processes.Wait(r, absl::Seconds(20));
    EXPECT_EQ(result.exit_code, 0) << Describe(result);
    // Only rank 2 was declared: the others kept beating. (Rank 2's death
    // once killed, and a watcher leaving at the end of its watch, are
    // reported too, as "died" and "left".)
    EXPECT_EQ(result.out.find("EVENT 0 hung"), std::string::npos) << result.out;
    EXPECT_EQ(result.out.find("EVENT 1 hung"), std::string::npos) << result.out;
  }
}

TEST(Heartbeats, StoppedRankZeroIsDeclaredHungByEachOtherRank) {
  RankProcesses processes;
  StartWatchers(processes, 3, absl::Seconds(6));
  processes.Kill(0, SIGSTOP);
  for (int r : {1, 2}) {
    EXPECT_TRUE(processes.WaitForStdout(
        r, absl::StrCat("EVENT 0 hung rank 0 is hung: no heartbeat from its rendezvous store "
                        "reached rank ", r),
        absl::Milliseconds(kHangMs) + kVerdictSlack))
        << "rank " << r << ": " << processes.StdoutSoFar(r);
  }
  processes.Kill(0, SIGKILL);
  for (int r : {1, 2}) processes.Wait(r, absl::Seconds(20));
}

// A stopped rank that is resumed hears that it was declared hung (so it
// cannot go on as if nothing happened); it does not, in turn, take the
// store's silence over its own stop for a hung rank 0.
TEST(Heartbeats, ResumedRankHearsThatItWasDeclaredHung) {
  RankProcesses processes;
  StartWatchers(processes, 3, absl::Seconds(7));
  processes.Kill(2, SIGSTOP);
  ASSERT_TRUE(processes.WaitForStdout(0, "EVENT 2 hung", absl::Milliseconds(kHangMs) +
                                                             kVerdictSlack))
      << processes.StdoutSoFar(0);
  processes.Kill(2, SIGCONT);
  EXPECT_TRUE(processes.WaitForStdout(2, "EVENT 2 hung rank 2 is hung", absl::Seconds(3)))
      << processes.StdoutSoFar(2);
  ProcessResult resumed = processes.Wait(2, absl::Seconds(20));
  EXPECT_EQ(resumed.exit_code, 0) << Describe(resumed);
  EXPECT_EQ(resumed.out.find("EVENT 0 hung"), std::string::npos) << resumed.out;
  for (int r : {0, 1}) processes.Wait(r, absl::Seconds(20));
}

// The whole job stopped and resumed (a suspended job step): nobody may
// declare anybody hung for a silence that everybody shared.
TEST(Heartbeats, WholeJobStoppedAndResumedDeclaresNobody) {
  RankProcesses processes;
  StartWatchers(processes, 3, absl::Seconds(6));
  for (int r = 0; r < 3; ++r) processes.Kill(r, SIGSTOP);
  absl::SleepFor(absl::Milliseconds(3 * kHangMs));
  for (int r = 0; r < 3; ++r) processes.Kill(r, SIGCONT);
  for (int r = 0; r < 3; ++r) {
    ProcessResult result = processes.Wait(r, absl::Seconds(20));
    EXPECT_EQ(result.exit_code, 0) << Describe(result);
    // (A watcher that finishes first and leaves is reported as "left".)
    EXPECT_EQ(result.out.find(" hung"), std::string::npos) << "rank " << r << ": " << result.out;
  }
}

}  // namespace
}  // namespace comm::testing
