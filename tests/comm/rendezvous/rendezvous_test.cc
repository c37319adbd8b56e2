// File: tests/comm/rendezvous/rendezvous_test.cc
//
// The rendezvous between real processes over loopback: success at 1, 2 and 4
// ranks, and each way a job can be misconfigured, checking that the right
// ranks get the named error within the deadline.
#include <netinet/in.h>
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

}  // namespace
}  // namespace comm::testing
