// File: comm/ucx/ucx_transport_benchmark.cc
//
// Ping-pong latency and one-direction bandwidth of the UCX transport between
// two ranks, message sizes 4 KiB..64 MiB. Run it directly; it re-launches
// itself as 2 ranks with the launcher:
//
//   bazel run -c opt //comm/ucx:ucx_transport_benchmark
//
// Compare with UCX's own tool (same machine, same moment):
//   ucx_perftest -t tag_bw -s 67108864 -n 20 &     # server
//   ucx_perftest 127.0.0.1 -t tag_bw -s 67108864 -n 20
//
// Waits spin on Progress() to measure the transport; with --block they call
// BlockUntilActivity() whenever Progress() finds nothing to do (the progress
// engine's way), which measures the wake-up path too.
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "comm/launcher/launcher.h"
#include "comm/rendezvous/job_env.h"
#include "comm/transport.h"
#include "comm/ucx/ucx_transport.h"

namespace {

bool g_block = false;  // --block

absl::Status WaitAll(comm::Transport& transport, std::vector<comm::Completion*> completions,
                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    bool all_done = true;
    for (comm::Completion* completion : completions) {
      if (!completion->done) {
        all_done = false;
      } else if (!completion->status.ok()) {
        return completion->status;
      }
    }
    if (all_done) return absl::OkStatus();
    if (!transport.Progress() && g_block) {
      FSDP_RETURN_IF_ERROR(transport.BlockUntilActivity(absl::Milliseconds(10)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", transport.rank(), ": benchmark wait timed out after ",
          absl::FormatDuration(timeout), " waiting for rank ", 1 - transport.rank()));
    }
  }
}

absl::Status Run() {
  FSDP_ASSIGN_OR_RETURN(comm::JobEnv env, comm::JobEnvFromEnvironment());
  if (env.world_size != 2) {
    return absl::InvalidArgumentError("the benchmark needs exactly 2 ranks");
  }
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Transport> transport,
                        comm::CreateUcxTransport(env, absl::Seconds(60)));
  const int me = transport->rank();
  const int peer = 1 - me;
  const size_t kMaxBytes = size_t{64} << 20;
  std::vector<char> send_buffer(kMaxBytes, 'x');
  std::vector<char> recv_buffer(kMaxBytes, 0);
  char ack = 0;
  if (me == 0) {
    std::printf("waits: %s\n", g_block ? "Progress, then BlockUntilActivity" : "spin on Progress");
    std::printf("%10s %14s %16s\n", "bytes", "pingpong_us", "bandwidth_GB/s");
  }
  uint64_t tag = 1;
  for (size_t bytes = 4096; bytes <= kMaxBytes; bytes *= 4) {
    const int iterations = static_cast<int>(std::max<size_t>(5, (size_t{256} << 20) / bytes / 4));
    // Ping-pong: half the round trip.
    const int warmup = 2;
    absl::Time start;
    for (int i = 0; i < iterations + warmup; ++i) {
      if (i == warmup) start = absl::Now();
      comm::Completion sent, received;
      if (me == 0) {
        FSDP_RETURN_IF_ERROR(transport->PostSend(peer, tag, send_buffer.data(), bytes, &sent));
        FSDP_RETURN_IF_ERROR(transport->PostRecv(peer, tag, recv_buffer.data(), bytes, &received));
      } else {
        FSDP_RETURN_IF_ERROR(transport->PostRecv(peer, tag, recv_buffer.data(), bytes, &received));
        FSDP_RETURN_IF_ERROR(WaitAll(*transport, {&received}, absl::Seconds(30)));
        FSDP_RETURN_IF_ERROR(transport->PostSend(peer, tag, send_buffer.data(), bytes, &sent));
      }
      FSDP_RETURN_IF_ERROR(WaitAll(*transport, {&sent, &received}, absl::Seconds(30)));
    }
    const double pingpong_us =
        absl::ToDoubleMicroseconds(absl::Now() - start) / iterations / 2;
    ++tag;

    // Bandwidth: a window of messages one way, then a 1-byte ack back.
    const int window = 8;
    const int rounds = std::max(2, iterations / window);
    std::vector<comm::Completion> completions(window);
    for (int round = 0; round < rounds + 1; ++round) {
      if (round == 1) start = absl::Now();
      std::vector<comm::Completion*> pending;
      for (int w = 0; w < window; ++w) {
        if (me == 0) {
          FSDP_RETURN_IF_ERROR(
              transport->PostSend(peer, tag, send_buffer.data(), bytes, &completions[w]));
        } else {
          FSDP_RETURN_IF_ERROR(
              transport->PostRecv(peer, tag, recv_buffer.data(), bytes, &completions[w]));
        }
        pending.push_back(&completions[w]);
      }
      FSDP_RETURN_IF_ERROR(WaitAll(*transport, pending, absl::Seconds(60)));
      comm::Completion ack_completion;
      if (me == 0) {
        FSDP_RETURN_IF_ERROR(transport->PostRecv(peer, tag + 1, &ack, 1, &ack_completion));
      } else {
        FSDP_RETURN_IF_ERROR(transport->PostSend(peer, tag + 1, &ack, 1, &ack_completion));
      }
      FSDP_RETURN_IF_ERROR(WaitAll(*transport, {&ack_completion}, absl::Seconds(30)));
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const double gbps = static_cast<double>(bytes) * window * rounds / seconds / 1e9;
    tag += 2;
    if (me == 0) std::printf("%10zu %14.2f %16.2f\n", bytes, pingpong_us, gbps);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--block") == 0) g_block = true;
  }
  if (!comm::IsLaunchedRank()) {
    absl::StatusOr<int> result = comm::LaunchLocalRanks(comm::SelfLaunchOptions(2, argc, argv));
    if (!result.ok()) {
      std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
    }
    return comm::JobExitCode(result);
  }
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "benchmark failed: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
