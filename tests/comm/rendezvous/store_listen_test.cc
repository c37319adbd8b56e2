// File: tests/comm/rendezvous/store_listen_test.cc
//
// The store listens where told (issue 13), between real processes: on
// MASTER_ADDR's interface only, so a connection to another local address is
// refused while the job still forms; on every interface when asked
// (FSDP_STORE_BIND=all) only; on the host's one other address when
// MASTER_ADDR resolves to loopback and the job spans hosts ([Note: MASTER_ADDR
// resolving to loopback]). 127.0.1.1 plays
// Debian's address for a host's own name: the whole 127/8 is on loopback.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/comm/rendezvous/rank_processes.h"

namespace comm::testing {
namespace {

const char kWorker[] = "tests/comm/rendezvous/rendezvous_worker";

// 0 if a TCP connection to ip:port opens (it is closed at once), else errno.
int ConnectError(const std::string& ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  const int rc = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  const int error = rc == 0 ? 0 : errno;
  close(fd);
  return error;
}

// Waits until ip:port accepts connections (rank 0's store is up).
bool WaitUntilListening(const std::string& ip, int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ConnectError(ip, port) == 0) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

std::string Describe(const ProcessResult& result) {
  return absl::StrCat("exit=", result.exit_code, " signal=", result.signal,
                      "\nstdout: ", result.out, "\nstderr: ", result.err);
}

using Env = std::map<std::string, std::string>;

Env RankEnv(int rank, int port, const std::string& master_addr, Env extra) {
  Env env = TorchrunEnv(rank, 2, port, "listen-test");
  env["MASTER_ADDR"] = master_addr;
  env["RDV_TIMEOUT_MS"] = "20000";
  for (const auto& [key, value] : extra) env[key] = value;
  return env;
}

// Starts rank 0, waits for its store at `reachable`, probes `probe` (expects
// `probe_error`, 0 for reachable), then starts rank 1; both must form the job.
void FormJobAndProbe(const std::string& master_addr, const Env& extra,
                     const std::string& reachable, const std::string& probe, int probe_error,
                     ProcessResult* rank0_result) {
  const int port = FreePort();
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, RankEnv(0, port, master_addr, extra));
  ASSERT_TRUE(WaitUntilListening(reachable, port, absl::Seconds(15)))
      << "rank 0's store never listened at " << reachable << ":" << port;
  const int error = ConnectError(probe, port);
  EXPECT_EQ(error, probe_error) << "connecting to " << probe << ":" << port << ": "
                                << (error == 0 ? "connected" : strerror(error));
  processes.Start(RunfilePath(kWorker), {}, RankEnv(1, port, master_addr, extra));
  for (int r = 0; r < 2; ++r) {
    ProcessResult result = processes.Wait(r, absl::Seconds(30));
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ": " << Describe(result);
    EXPECT_TRUE(Contains(result.out, "ROSTER OK 2"));
    if (r == 0) *rank0_result = result;
  }
}

TEST(StoreListen, OnlyOnMasterAddrSoAnotherLocalAddressIsRefused) {
  ProcessResult rank0;
  ASSERT_NO_FATAL_FAILURE(
      FormJobAndProbe("127.0.0.1", {}, "127.0.0.1", "127.0.0.2", ECONNREFUSED, &rank0));
  // Nothing was widened, so there is nothing to warn about.
  EXPECT_FALSE(Contains(rank0.err, "rendezvous store on rank 0: MASTER_ADDR=")) << rank0.err;
}

// Rank 0 itself must connect to where the store listens, not to 127.0.0.1.
TEST(StoreListen, DebianStyleLoopbackNameOnOneHost) {
  ProcessResult rank0;
  FormJobAndProbe("127.0.1.1", {}, "127.0.1.1", "127.0.0.1", ECONNREFUSED, &rank0);
  EXPECT_FALSE(Contains(rank0.err, "rendezvous store on rank 0: MASTER_ADDR=")) << rank0.err;
}

TEST(StoreListen, EveryInterfaceWhenAsked) {
  ProcessResult rank0;
  ASSERT_NO_FATAL_FAILURE(FormJobAndProbe("127.0.0.1", {{"FSDP_STORE_BIND", "all"}}, "127.0.0.1",
                                          "127.0.0.2", 0, &rank0));
  // Asked for, so not warned about.
  EXPECT_FALSE(Contains(rank0.err, "rendezvous store on rank 0: MASTER_ADDR=")) << rank0.err;
}

TEST(StoreListen, OneAddressWhenAsked) {
  ProcessResult rank0;
  // MASTER_ADDR is where the others connect; the store listens on the bind
  // address, here the same interface under another loopback address.
  ASSERT_NO_FATAL_FAILURE(FormJobAndProbe("127.0.0.3", {{"FSDP_STORE_BIND", "127.0.0.3"}},
                                          "127.0.0.3", "127.0.0.1", ECONNREFUSED, &rank0));
  // One address, as asked: not every interface.
  EXPECT_FALSE(Contains(rank0.err, "rendezvous store on rank 0: MASTER_ADDR=")) << rank0.err;
}

// This host's IPv4 addresses outside 127/8.
std::vector<std::string> NonLoopbackAddresses() {
  std::vector<std::string> addresses;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return addresses;
  for (ifaddrs* entry = interfaces; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr, text,
              sizeof(text));
    if (std::string(text).rfind("127.", 0) != 0) addresses.push_back(text);
  }
  freeifaddrs(interfaces);
  return addresses;
}

// Loopback MASTER_ADDR in a job that says it spans hosts (one rank per
// host): others could not reach loopback, so the store listens on this host's
// one other address, said aloud, and not on loopback; where the host has none
// or several, rank 0 refuses and says what to set (every interface only when
// asked, above). Rank 1 plays a rank on another host, which resolves rank 0's
// name to its real address.
TEST(StoreListen, LoopbackNameAcrossHostsListensOnTheOneOtherAddressAndSaysWhy) {
  const Env one_per_host = {{"LOCAL_WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}};
  const std::vector<std::string> others = NonLoopbackAddresses();
  const int port = FreePort();
  RankProcesses processes;
  processes.Start(RunfilePath(kWorker), {}, RankEnv(0, port, "127.0.1.1", one_per_host));
  if (others.size() != 1) {
    ProcessResult result = processes.Wait(0, absl::Seconds(20));
    EXPECT_EQ(result.exit_code, 1) << Describe(result);
    EXPECT_TRUE(Contains(result.out, "MASTER_ADDR=127.0.1.1 resolves to 127.0.1.1 (loopback)"))
        << Describe(result);
    EXPECT_TRUE(Contains(result.out, "FSDP_STORE_BIND")) << Describe(result);
    return;
  }
  ASSERT_TRUE(WaitUntilListening(others[0], port, absl::Seconds(15)))
      << "rank 0's store never listened at " << others[0] << ":" << port;
  EXPECT_EQ(ConnectError("127.0.1.1", port), ECONNREFUSED) << "the store listens on loopback";
  processes.Start(RunfilePath(kWorker), {}, RankEnv(1, port, others[0], one_per_host));
  for (int r = 0; r < 2; ++r) {
    ProcessResult result = processes.Wait(r, absl::Seconds(30));
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ": " << Describe(result);
    EXPECT_TRUE(Contains(result.out, "ROSTER OK 2"));
    if (r == 0) {
      EXPECT_TRUE(Contains(result.err, "rendezvous store on rank 0: MASTER_ADDR=127.0.1.1 "
                                       "resolves to 127.0.1.1 (loopback)"))
          << result.err;
      EXPECT_TRUE(Contains(result.err, "listens on this host's one other address, " +
                                           others[0]))
          << result.err;
    }
  }
}

TEST(StoreListen, MasterAddrOfAnotherHostIsNamedByRankZero) {
  RankProcesses processes;
  // TEST-NET-3 (RFC 5737): never this host's.
  processes.Start(RunfilePath(kWorker), {}, RankEnv(0, FreePort(), "203.0.113.7", {}));
  ProcessResult result = processes.Wait(0, absl::Seconds(20));
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.out, "ERROR INVALID_ARGUMENT: rank 0: MASTER_ADDR=203.0.113.7 "
                                   "resolves to 203.0.113.7"));
}

}  // namespace
}  // namespace comm::testing
