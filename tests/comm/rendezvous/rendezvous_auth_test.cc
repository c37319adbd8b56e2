// File: tests/comm/rendezvous/rendezvous_auth_test.cc
//
// The authenticated rendezvous (issue 39), attacked as a stranger on the same
// network would, with the ranks as real processes (rendezvous_worker):
//   - strangers who know the job's id, and so its old derived token, can
//     neither join, nor abort the forming job (a wrong world size, a
//     duplicate rank): they are refused and the job forms;
//   - a forged heartbeat with a long-pending collective, injected on a
//     rank's connection, is ignored (no rank is declared hung), and one from
//     a connection that never joined is refused;
//   - a fake store that bound the port first is refused by the rank, which
//     names it, and the join it saw does not contain the secret; before the
//     store proved itself a rank reads no frame over 64 KiB;
//   - a forged or replayed peer-gone report is refused and said on stderr;
//     only the store's sealed one counts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/rendezvous/framed_socket.h"
#include "comm/rendezvous/rendezvous_auth.h"
#include "comm/rendezvous/store_server.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.pb.h"
#include "tests/comm/rendezvous/rank_processes.h"
#include "tests/comm/rendezvous/store_peer.h"

namespace comm::testing {
namespace {

const char kWorker[] = "tests/comm/rendezvous/rendezvous_worker";
const char kSecret[] = "9f3c2a7e51d04b8c6e2f1a0d9b7c5e3f";

std::string Describe(const ProcessResult& result) {
  return absl::StrCat("exit=", result.exit_code, " signal=", result.signal,
                      " timed_out=", result.timed_out, "\nstdout: ", result.out,
                      "\nstderr: ", result.err);
}

std::map<std::string, std::string> Env(int rank, int world_size, int port,
                                       const std::string& token) {
  std::map<std::string, std::string> env = TorchrunEnv(rank, world_size, port, token);
  env["RDV_TIMEOUT_MS"] = "20000";
  return env;
}

int CountOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// Waits until something listens on 127.0.0.1:`port`.
bool WaitUntilListening(int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<int> fd = ConnectWithRetry("127.0.0.1", port, absl::Now());
    if (fd.ok()) {
      close(*fd);
      return true;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

TEST(Strangers, WithTheOldDerivedTokenTheyCannotJoinOrAbortTheJob) {
  const int port = FreePort();
  // What the token was before issue 39, and anyone could compute.
  const std::string derived = absl::StrCat("master-127.0.0.1:", port);
  RankProcesses processes;
  const int rank0 = processes.Start(RunfilePath(kWorker), {}, Env(0, 3, port, kSecret));
  ASSERT_TRUE(WaitUntilListening(port, absl::Seconds(10)));
  const int rank1 = processes.Start(RunfilePath(kWorker), {}, Env(1, 3, port, kSecret));
  // The last missing rank; a wrong world size; a duplicate rank: each would
  // have taken the last seat or aborted the job with the token in clear.
  std::vector<int> strangers = {
      processes.Start(RunfilePath(kWorker), {}, Env(2, 3, port, derived)),
      processes.Start(RunfilePath(kWorker), {}, Env(2, 5, port, derived)),
      processes.Start(RunfilePath(kWorker), {}, Env(1, 3, port, derived)),
  };
  for (int stranger : strangers) {
    ProcessResult result = processes.Wait(stranger, absl::Seconds(25));
    EXPECT_EQ(result.exit_code, 1) << Describe(result);
    EXPECT_TRUE(Contains(result.out, "PERMISSION_DENIED"));
    EXPECT_TRUE(Contains(result.out, "job token mismatch"));
    EXPECT_EQ(result.out.find(kSecret), std::string::npos) << result.out;
  }
  const int rank2 = processes.Start(RunfilePath(kWorker), {}, Env(2, 3, port, kSecret));
  for (int index : {rank0, rank1, rank2}) {
    ProcessResult result = processes.Wait(index, absl::Seconds(25));
    EXPECT_EQ(result.exit_code, 0) << Describe(result);
    EXPECT_TRUE(Contains(result.out, "ROSTER OK 3"));
  }
  ProcessResult store = processes.Wait(rank0, absl::Seconds(1));
  EXPECT_TRUE(Contains(store.err, "3 wrong token"));
}

// A job without a secret (no FSDP_JOB_TOKEN: the token derived from
// MASTER_ADDR:MASTER_PORT) forms on one host with its store on loopback, and
// is refused on every rank when the store would listen on every interface.
TEST(NoSecret, ADerivedTokenIsKeptOnlyWithTheStoreOnLoopback) {
  for (const bool every_interface : {false, true}) {
    SCOPED_TRACE(every_interface ? "FSDP_STORE_BIND=all" : "loopback");
    const int port = FreePort();
    RankProcesses processes;
    std::vector<int> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      std::map<std::string, std::string> env = Env(rank, 2, port, "");
      env.erase("FSDP_JOB_TOKEN");
      if (every_interface) env["FSDP_STORE_BIND"] = "all";
      ranks.push_back(processes.Start("/usr/bin/env", {"-u", "FSDP_JOB_TOKEN",
                                                       RunfilePath(kWorker)}, env));
    }
    for (int index : ranks) {
      ProcessResult result = processes.Wait(index, absl::Seconds(25));
      if (!every_interface) {
        EXPECT_EQ(result.exit_code, 0) << Describe(result);
        EXPECT_TRUE(Contains(result.out, "ROSTER OK 2"));
        continue;
      }
      EXPECT_EQ(result.exit_code, 1) << Describe(result);
      EXPECT_TRUE(Contains(result.out, "FAILED_PRECONDITION"));
      EXPECT_TRUE(Contains(result.out, "the job has no secret: its token is derived from "
                                       "MASTER_ADDR and MASTER_PORT"));
      EXPECT_TRUE(Contains(result.out, "would listen on 0.0.0.0"));
      EXPECT_TRUE(Contains(result.out, "FSDP_JOB_TOKEN=$(openssl rand -hex 32)"));
      EXPECT_LT(result.elapsed, absl::Seconds(5));
    }
  }
}

fsdp::proto::JoinRequest JoinOf(int rank) {
  fsdp::proto::JoinRequest join;
  join.set_rank(rank);
  join.set_world_size(2);
  join.set_blob(absl::StrCat("rank ", rank));
  join.set_host("here");
  return join;
}

fsdp::proto::ClientMessage Beat(int64_t pending_ms, int awaited_rank, int64_t idle_ms = 0) {
  fsdp::proto::ClientMessage message;
  message.mutable_heartbeat()->set_idle_ms(idle_ms);
  message.mutable_heartbeat()->set_pending_ms(pending_ms);
  message.mutable_heartbeat()->set_awaited_rank(awaited_rank);
  message.mutable_heartbeat()->set_awaited_what("all_reduce #1: recv of segment 0");
  return message;
}

TEST(Strangers, AForgedPendingReportGetsNoRankDeclaredHung) {
  StoreServerOptions options;
  options.world_size = 2;
  options.job_token = kSecret;
  options.join_timeout = absl::Seconds(20);
  options.hang_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<StoreServer>> store = StoreServer::Start(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);

  // A stranger's report before any join is refused at once.
  absl::StatusOr<int> stranger_fd = ConnectWithRetry("127.0.0.1", (*store)->port(), deadline);
  ASSERT_TRUE(stranger_fd.ok()) << stranger_fd.status();
  FramedSocket stranger(*stranger_fd);
  ASSERT_TRUE(stranger.Write(Beat(60000, 0), deadline).ok());

  std::vector<std::unique_ptr<FramedSocket>> ranks;
  std::vector<std::unique_ptr<SealedChannel>> channels;
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<int> fd = ConnectWithRetry("127.0.0.1", (*store)->port(), deadline);
    ASSERT_TRUE(fd.ok()) << fd.status();
    ranks.push_back(std::make_unique<FramedSocket>(*fd));
    absl::StatusOr<std::unique_ptr<SealedChannel>> channel =
        JoinAsRank(*ranks.back(), kSecret, JoinOf(rank), deadline);
    ASSERT_TRUE(channel.ok()) << channel.status();
    channels.push_back(*std::move(channel));
  }
  for (int rank = 0; rank < 2; ++rank) {
    for (const char* what : {"welcome", "roster"}) {
      absl::StatusOr<fsdp::proto::ServerMessage> message =
          ReadSealed(*ranks[rank], *channels[rank], deadline);
      ASSERT_TRUE(message.ok()) << what << ": " << message.status();
    }
  }
  // Rank 0 computes for long (legal while nobody waits for it); rank 1 "waits
  // for rank 0" for a minute, says the forger, on rank 1's own connection,
  // sealed with a guessed key. Accepted, that would get rank 0 declared hung.
  SealedChannel forger(SessionKey("a guess", "nonce", "nonce"), SealedChannel::Side::kRank);
  std::vector<std::string> heard;
  const absl::Time until = absl::Now() + absl::Seconds(3);
  while (absl::Now() < until) {
    for (int rank = 0; rank < 2; ++rank) {
      fsdp::proto::ClientMessage sealed;
      channels[rank]->Seal(Beat(0, -1, rank == 0 ? 60000 : 0), sealed.mutable_sealed());
      ASSERT_TRUE(ranks[rank]->Write(sealed, until + absl::Seconds(1)).ok());
      // After rank 1's own beat, so that it would be the latest one.
      if (rank == 1) {
        fsdp::proto::ClientMessage forged;
        forger.Seal(Beat(60000, 0), forged.mutable_sealed());
        ASSERT_TRUE(ranks[1]->Write(forged, until + absl::Seconds(1)).ok());
      }
      std::vector<std::string> frames;
      ASSERT_TRUE(ranks[rank]->ReadAvailable(&frames).ok());
      for (const std::string& frame : frames) {
        fsdp::proto::ServerMessage outer, inner;
        std::string body;
        ASSERT_TRUE(outer.ParseFromString(frame) && outer.has_sealed());
        ASSERT_TRUE(channels[rank]->Open(outer.sealed(), &body));
        ASSERT_TRUE(inner.ParseFromString(body));
        if (!inner.has_heartbeat()) heard.push_back(inner.ShortDebugString());
      }
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(heard.empty()) << heard.front();
  const StoreRefusals refusals = (*store)->refusals();
  EXPECT_EQ(refusals.out_of_order, 1) << DescribeRefusals(refusals);
  EXPECT_GE(refusals.forged, 20) << DescribeRefusals(refusals);
}

// Listens on a port the kernel picks, as a process that bound MASTER_PORT
// before rank 0 would.
struct FakeStore {
  FakeStore() {
    absl::StatusOr<int> fd = ListenOnPort("127.0.0.1", 0);
    listener = fd.ok() ? *fd : -1;
    sockaddr_in address = {};
    socklen_t size = sizeof(address);
    if (listener >= 0 && getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
      port = ntohs(address.sin_port);
    }
  }
  ~FakeStore() {
    if (listener >= 0) close(listener);
  }
  // The next connection, within 10 s.
  std::unique_ptr<FramedSocket> Accept() {
    pollfd ready = {listener, POLLIN, 0};
    if (poll(&ready, 1, 10000) != 1) return nullptr;
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    return fd < 0 ? nullptr : std::make_unique<FramedSocket>(fd);
  }
  int listener = -1;
  int port = 0;
};

enum class Forgery { kUnsealedRoster, kGuessedKey, kHugeFrame };

class FakeStoreTest : public ::testing::TestWithParam<Forgery> {};

TEST_P(FakeStoreTest, TheRankRefusesAndNamesIt) {
  FakeStore fake;
  ASSERT_GT(fake.port, 0);
  RankProcesses processes;
  const int rank1 = processes.Start(RunfilePath(kWorker), {}, Env(1, 2, fake.port, kSecret));
  std::unique_ptr<FramedSocket> connection = fake.Accept();
  ASSERT_NE(connection, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<ReceivedJoin> join = ChallengeAndReadJoin(*connection, deadline);
  ASSERT_TRUE(join.ok()) << join.status();
  // What the fake store learned: no secret, and a MAC it cannot turn into one.
  EXPECT_EQ(join->frame.find(kSecret), std::string::npos);
  EXPECT_TRUE(MacEquals(JoinMac(kSecret, join->store_nonce, join->sealed.body()),
                        join->sealed.mac()));

  fsdp::proto::ServerMessage roster;
  roster.mutable_roster()->add_blobs("blob of rank 0");
  roster.mutable_roster()->add_blobs(join->request.blob());
  roster.mutable_roster()->add_hosts(join->request.host());
  roster.mutable_roster()->add_hosts(join->request.host());
  if (GetParam() == Forgery::kHugeFrame) {
    // A frame announcing 1 GiB, as the store before issue 39 would have read
    // from anyone.
    const unsigned char header[4] = {0, 0, 0, 0x40};
    ASSERT_EQ(write(connection->fd(), header, sizeof(header)), 4);
    ASSERT_TRUE(connection->Write(roster, deadline).ok());
    ProcessResult result = processes.Wait(rank1, absl::Seconds(25));
    EXPECT_EQ(result.exit_code, 1) << Describe(result);
    EXPECT_TRUE(Contains(result.out, absl::StrCat("rank 1: awaiting the welcome from the "
                                                  "rendezvous store at 127.0.0.1:", fake.port,
                                                  ": received a frame announcing 1073741824 "
                                                  "bytes (limit 65536)")));
    EXPECT_LT(result.elapsed, absl::Seconds(5));
    return;
  }
  if (GetParam() == Forgery::kUnsealedRoster) {
    ASSERT_TRUE(connection->Write(roster, deadline).ok());
  } else {
    SealedChannel guessed(SessionKey("a guess at the secret", join->store_nonce,
                                     join->request.rank_nonce()),
                          SealedChannel::Side::kStore);
    fsdp::proto::ServerMessage welcome;
    welcome.mutable_welcome();
    ASSERT_TRUE(WriteSealed(*connection, guessed, welcome, deadline).ok());
    ASSERT_TRUE(WriteSealed(*connection, guessed, roster, deadline).ok());
  }
  ProcessResult result = processes.Wait(rank1, absl::Seconds(25));
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.out, "UNAUTHENTICATED"));
  EXPECT_TRUE(Contains(result.out,
                       absl::StrCat("rank 1: the rendezvous store at 127.0.0.1:", fake.port,
                                    " could not prove it knows this job's secret")));
  EXPECT_EQ(result.out.find("ROSTER OK"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Forgeries, FakeStoreTest,
                         ::testing::Values(Forgery::kUnsealedRoster, Forgery::kGuessedKey,
                                           Forgery::kHugeFrame),
                         [](const ::testing::TestParamInfo<Forgery>& info) {
                           switch (info.param) {
                             case Forgery::kUnsealedRoster: return "unsealed_roster";
                             case Forgery::kGuessedKey: return "guessed_key";
                             case Forgery::kHugeFrame: return "huge_frame";
                           }
                           return "unknown";
                         });

// The store side played by the test, knowing the secret (the real store's
// view), so that it can put forged reports into the rank's stream.
TEST(ForgedReports, AForgedOrReplayedPeerGoneIsRefusedAndSaid) {
  FakeStore store;
  ASSERT_GT(store.port, 0);
  RankProcesses processes;
  std::map<std::string, std::string> env = Env(1, 2, store.port, kSecret);
  env["RDV_WATCH_MS"] = "3000";
  const int rank1 = processes.Start(RunfilePath(kWorker), {}, env);
  std::unique_ptr<FramedSocket> connection = store.Accept();
  ASSERT_NE(connection, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<ReceivedJoin> join = ChallengeAndReadJoin(*connection, deadline);
  ASSERT_TRUE(join.ok()) << join.status();
  SealedChannel channel(SessionKey(kSecret, join->store_nonce, join->request.rank_nonce()),
                        SealedChannel::Side::kStore);
  fsdp::proto::ServerMessage welcome, roster;
  welcome.mutable_welcome();
  ASSERT_TRUE(WriteSealed(*connection, channel, welcome, deadline).ok());
  roster.mutable_roster()->add_blobs("blob of rank 0");
  roster.mutable_roster()->add_blobs(join->request.blob());
  roster.mutable_roster()->add_hosts(join->request.host());
  roster.mutable_roster()->add_hosts(join->request.host());
  fsdp::proto::ServerMessage sealed_roster;
  SealedChannel copy = channel;
  copy.Seal(roster, sealed_roster.mutable_sealed());
  ASSERT_TRUE(WriteSealed(*connection, channel, roster, deadline).ok());
  ASSERT_TRUE(processes.WaitForStdout(rank1, "ROSTER OK 2", absl::Seconds(10)));

  fsdp::proto::ServerMessage died;
  died.mutable_peer_gone()->set_rank(0);
  // Unsealed; sealed with a guessed key; a replay of the store's own sealed
  // roster: all refused.
  ASSERT_TRUE(connection->Write(died, deadline).ok());
  fsdp::proto::ServerMessage hung = died;
  hung.mutable_peer_gone()->set_hung(true);
  hung.mutable_peer_gone()->set_reason("rank 0 is hung (forged)");
  SealedChannel guessed(SessionKey("a guess", join->store_nonce, join->request.rank_nonce()),
                        SealedChannel::Side::kStore);
  ASSERT_TRUE(WriteSealed(*connection, guessed, hung, deadline).ok());
  ASSERT_TRUE(connection->Write(sealed_roster, deadline).ok());
  // The store's own report counts.
  fsdp::proto::ServerMessage left = died;
  left.mutable_peer_gone()->set_clean(true);
  ASSERT_TRUE(WriteSealed(*connection, channel, left, deadline).ok());

  ProcessResult result = processes.Wait(rank1, absl::Seconds(25));
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_TRUE(Contains(result.out, "EVENT 0 left"));
  EXPECT_EQ(result.out.find("EVENT 0 died"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("hung"), std::string::npos) << result.out;
  EXPECT_EQ(CountOf(result.err, "does not carry this job's MAC"), 3) << result.err;
  EXPECT_TRUE(Contains(result.err, absl::StrCat("rank 1: refused a message on the connection to "
                                                "the rendezvous store at 127.0.0.1:",
                                                store.port)));
}

}  // namespace
}  // namespace comm::testing
