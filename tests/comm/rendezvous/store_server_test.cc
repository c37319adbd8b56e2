// File: tests/comm/rendezvous/store_server_test.cc
//
// The store's bounds (issue 39), in process, with raw sockets as clients:
//   - connections waiting to join are capped per peer address and in all; one
//     over a cap is closed at once with a Refused reply that says why, and is
//     counted as over capacity, while other addresses still get in;
//   - the listener closes once the roster is out: a connection after that is
//     refused by the kernel;
//   - out of descriptors, the store pauses accepting instead of spinning on
//     the listener (a child process with a low RLIMIT_NOFILE; its CPU time
//     over two seconds is measured);
//   - FramedSocket::ReadAvailable stops near its byte budget and leaves the
//     rest in the kernel for the next call.
#include "comm/rendezvous/store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/rendezvous/framed_socket.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.pb.h"
#include "tests/comm/rendezvous/store_peer.h"

namespace comm {
namespace {

// A TCP connection from `source_ip` to 127.0.0.1:`port`, or -errno.
int ConnectFrom(const std::string& source_ip, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_in source = {};
  source.sin_family = AF_INET;
  inet_pton(AF_INET, source_ip.c_str(), &source.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
    const int error = errno;
    close(fd);
    return -error;
  }
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

// What the store says on `socket` within `timeout`: the reason of a Refused
// reply, "closed" if it closes without one, "open" if it does neither.
// A challenge (the first message of every accepted connection) is skipped.
std::string StoreVerdict(FramedSocket& socket, absl::Duration timeout) {
  fsdp::proto::ServerMessage message;
  do {
    absl::StatusOr<std::string> frame = socket.ReadFrame(absl::Now() + timeout);
    if (absl::IsDeadlineExceeded(frame.status())) return "open";
    if (!frame.ok()) return "closed";
    if (!message.ParseFromString(*frame)) return "other";
  } while (message.has_challenge());
  if (!message.has_refused()) return "other";
  return message.refused().reason();
}

fsdp::proto::JoinRequest JoinOf(int rank, int world_size) {
  fsdp::proto::JoinRequest join;
  join.set_rank(rank);
  join.set_world_size(world_size);
  join.set_blob(absl::StrCat("rank ", rank));
  join.set_host("here");
  return join;
}

StoreServerOptions Options(int world_size) {
  StoreServerOptions options;
  options.world_size = world_size;
  options.job_token = "store-server-test";
  options.join_timeout = absl::Seconds(30);
  options.first_message_timeout = absl::Seconds(20);
  return options;
}

TEST(StoreServerBounds, PendingConnectionsAreCappedPerAddressAndInAll) {
  StoreServerOptions options = Options(2);
  options.max_pending_connections = 3;
  options.max_pending_per_address = 2;
  absl::StatusOr<std::unique_ptr<StoreServer>> store = StoreServer::Start(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const int port = (*store)->port();

  std::vector<std::unique_ptr<FramedSocket>> held;
  for (int i = 0; i < 2; ++i) {
    const int fd = ConnectFrom("127.0.0.1", port);
    ASSERT_GE(fd, 0) << strerror(-fd);
    held.push_back(std::make_unique<FramedSocket>(fd));
  }
  for (auto& socket : held) EXPECT_EQ(StoreVerdict(*socket, absl::Milliseconds(200)), "open");

  // A third from the same address: over the per-address cap.
  int fd = ConnectFrom("127.0.0.1", port);
  ASSERT_GE(fd, 0) << strerror(-fd);
  FramedSocket third(fd);
  const std::string verdict = StoreVerdict(third, absl::Seconds(5));
  EXPECT_NE(verdict.find("over capacity"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find(absl::StrCat("MASTER_PORT ", port)), std::string::npos) << verdict;

  // Another address still gets in, up to the total.
  fd = ConnectFrom("127.0.0.2", port);
  ASSERT_GE(fd, 0) << strerror(-fd);
  held.push_back(std::make_unique<FramedSocket>(fd));
  EXPECT_EQ(StoreVerdict(*held.back(), absl::Milliseconds(200)), "open");
  fd = ConnectFrom("127.0.0.3", port);
  ASSERT_GE(fd, 0) << strerror(-fd);
  FramedSocket fourth(fd);
  EXPECT_NE(StoreVerdict(fourth, absl::Seconds(5)).find("over capacity"), std::string::npos);

  const StoreRefusals refusals = (*store)->refusals();
  EXPECT_EQ(refusals.over_capacity, 2);
  EXPECT_EQ(refusals.total(), 2);
  EXPECT_NE(DescribeRefusals(refusals).find("2 over capacity"), std::string::npos);
}

TEST(StoreServerBounds, TheListenerClosesOnceTheRosterIsOut) {
  absl::StatusOr<std::unique_ptr<StoreServer>> store = StoreServer::Start(Options(2));
  ASSERT_TRUE(store.ok()) << store.status();
  const int port = (*store)->port();
  std::vector<std::unique_ptr<FramedSocket>> ranks;
  std::vector<std::unique_ptr<SealedChannel>> channels;
  for (int rank = 0; rank < 2; ++rank) {
    const int fd = ConnectFrom("127.0.0.1", port);
    ASSERT_GE(fd, 0) << strerror(-fd);
    ranks.push_back(std::make_unique<FramedSocket>(fd));
    absl::StatusOr<std::unique_ptr<SealedChannel>> channel = testing::JoinAsRank(
        *ranks.back(), "store-server-test", JoinOf(rank, 2), absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(channel.ok()) << channel.status();
    channels.push_back(*std::move(channel));
  }
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<fsdp::proto::ServerMessage> welcome =
        testing::ReadSealed(*ranks[rank], *channels[rank], absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(welcome.ok()) << welcome.status();
    ASSERT_TRUE(welcome->has_welcome());
    absl::StatusOr<fsdp::proto::ServerMessage> roster =
        testing::ReadSealed(*ranks[rank], *channels[rank], absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(roster.ok()) << roster.status();
    ASSERT_TRUE(roster->has_roster());
    EXPECT_EQ(roster->roster().blobs_size(), 2);
  }
  // The roster is sent before the listener closes, in the same turn of the
  // store's loop; give that turn a moment.
  int error = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ConnectFrom("127.0.0.1", port);
    if (fd < 0) {
      error = -fd;
      break;
    }
    close(fd);
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(error, ECONNREFUSED) << "the store still listens after the roster";
}

// Child: a store under RLIMIT_NOFILE just above what is open, its stderr to
// `log`; writes its port to `port_pipe`, serves for two seconds, exits.
[[noreturn]] void StoreWithFewDescriptors(int port_pipe, const std::string& log) {
  if (std::freopen(log.c_str(), "w", stderr) == nullptr) _exit(3);
  int open_fds = 0;
  for (int fd = 0; fd < 1024; ++fd) {
    if (fcntl(fd, F_GETFD) != -1) open_fds = fd + 1;
  }
  // The store's listener and wake-up pipe, and a few connections.
  const rlim_t limit = static_cast<rlim_t>(open_fds + 8);
  const rlimit rl = {limit, limit};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(4);
  absl::StatusOr<std::unique_ptr<StoreServer>> store = StoreServer::Start(Options(2));
  if (!store.ok()) _exit(5);
  const int port = (*store)->port();
  if (write(port_pipe, &port, sizeof(port)) != sizeof(port)) _exit(6);
  absl::SleepFor(absl::Seconds(2));
  _exit(0);
}

TEST(StoreServerBounds, OutOfDescriptorsTheStorePausesInsteadOfSpinning) {
  const std::string log = absl::StrCat(std::getenv("TEST_TMPDIR"), "/few_fds.err");
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) StoreWithFewDescriptors(pipe_fds[1], log);
  close(pipe_fds[1]);
  int port = 0;
  ASSERT_EQ(read(pipe_fds[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  close(pipe_fds[0]);
  // More connections than the child has descriptors for; the kernel queues
  // them on the listener, which the child cannot accept.
  std::vector<int> connections;
  for (int i = 0; i < 24; ++i) {
    const int fd = ConnectFrom("127.0.0.1", port);
    if (fd >= 0) connections.push_back(fd);
  }
  int status = 0;
  rusage usage = {};
  ASSERT_EQ(wait4(child, &status, 0, &usage), child);
  for (int fd : connections) close(fd);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  const double cpu_s = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
                       usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
  // Spinning on the listener for two seconds would take about two seconds of
  // CPU; pausing 100 ms between tries takes a few milliseconds.
  EXPECT_LT(cpu_s, 0.5) << "the store spun on a listener it could not accept from";
  std::FILE* file = std::fopen(log.c_str(), "r");
  ASSERT_NE(file, nullptr);
  char text[4096] = {};
  const size_t n = std::fread(text, 1, sizeof(text) - 1, file);
  std::fclose(file);
  EXPECT_NE(std::string(text, n).find("cannot accept a connection (Too many open files); "
                                      "accepting again in 100ms"),
            std::string::npos)
      << std::string(text, n);
}

TEST(FramedSocketBudget, ReadAvailableStopsNearItsBudget) {
  // Over TCP loopback, whose buffers take a few hundred KiB of frames.
  absl::StatusOr<int> listener = ListenOnPort("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  sockaddr_in address = {};
  socklen_t size = sizeof(address);
  ASSERT_EQ(getsockname(*listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const int client = ConnectFrom("127.0.0.1", ntohs(address.sin_port));
  ASSERT_GE(client, 0) << strerror(-client);
  int server = -1;
  for (int attempt = 0; attempt < 100 && server < 0; ++attempt) {
    server = accept4(*listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (server < 0) absl::SleepFor(absl::Milliseconds(10));
  }
  close(*listener);
  ASSERT_GE(server, 0);
  FramedSocket writer(client);
  FramedSocket reader(server);
  fsdp::proto::ClientMessage beat;
  beat.mutable_heartbeat()->set_awaited_what(std::string(1000, 'x'));
  const size_t frame_bytes = 4 + beat.ByteSizeLong();
  // Until the buffers are full (a write would wait), at most 4 MiB.
  int written = 0;
  while (written < 4000 && writer.Write(beat, absl::Now() + absl::Milliseconds(200)).ok()) {
    ++written;
  }
  const size_t budget = 16 << 10;
  ASSERT_GT(written * frame_bytes, budget + (64 << 10)) << "too little buffered to test";
  std::vector<std::string> frames;
  absl::StatusOr<bool> open = reader.ReadAvailable(&frames, budget);
  ASSERT_TRUE(open.ok() && *open);
  // At most the budget plus one 64 KiB read chunk; the rest stays queued.
  EXPECT_GT(frames.size(), 0u);
  EXPECT_LE(frames.size() * frame_bytes, budget + (64 << 10));
  size_t total = frames.size();
  for (int call = 0; call < 10000 && total < static_cast<size_t>(written); ++call) {
    std::vector<std::string> more;
    open = reader.ReadAvailable(&more, budget);
    ASSERT_TRUE(open.ok() && *open);
    EXPECT_LE(more.size() * frame_bytes, budget + (64 << 10));
    total += more.size();
  }
  EXPECT_EQ(total, static_cast<size_t>(written));
}

}  // namespace
}  // namespace comm
