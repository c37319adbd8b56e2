// File: tests/comm/rendezvous/rendezvous_worker.cc
//
// One rank of a rendezvous test: joins with the blob "blob of rank R" (rank 1's
// repeated to 1000 bytes, to cross a packet), checks every rank's blob and
// host name (all this machine's), and
// prints "ROSTER OK <world size>" or "ERROR <code>: <message>" (exit 1).
// Env RDV_TIMEOUT_MS sets the rendezvous timeout (default 10000).
// With RDV_HANG_MS (the hang bound) and RDV_WATCH_MS, it then watches the
// failure detector for that long and prints every event as
// "EVENT <rank> <died|left|hung> <reason>" (the heartbeat tests stop and
// resume ranks meanwhile).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/rendezvous/job_env.h"
#include "comm/rendezvous/rendezvous.h"

namespace {

std::string BlobOf(int rank) {
  std::string blob = absl::StrCat("blob of rank ", rank);
  if (rank == 1) blob.resize(1000, 'z');
  return blob;
}

int Fail(const absl::Status& status) {
  std::printf("ERROR %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
              std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main() {
  absl::StatusOr<comm::JobEnv> env = comm::JobEnvFromEnvironment();
  if (!env.ok()) return Fail(env.status());
  const char* timeout_ms = std::getenv("RDV_TIMEOUT_MS");
  absl::Duration timeout = absl::Milliseconds(timeout_ms ? std::atoi(timeout_ms) : 10000);
  comm::HangDetection hang_detection;
  if (const char* hang_ms = std::getenv("RDV_HANG_MS")) {
    hang_detection.bound = absl::Milliseconds(std::atoi(hang_ms));
  }
  absl::StatusOr<std::unique_ptr<comm::Rendezvous>> rendezvous =
      comm::Rendezvous::Join(*env, BlobOf(env->rank), timeout, hang_detection);
  if (!rendezvous.ok()) return Fail(rendezvous.status());
  const auto& blobs = (*rendezvous)->blobs();
  for (int r = 0; r < env->world_size; ++r) {
    if (blobs[r] != BlobOf(r)) {
      std::printf("ERROR BAD_BLOB: rank %d's blob is wrong\n", r);
      return 1;
    }
  }
  // Every rank runs on this machine: every roster entry is our host name.
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const auto& hosts = (*rendezvous)->hosts();
  if (static_cast<int>(hosts.size()) != env->world_size) {
    std::printf("ERROR BAD_HOSTS: %zu host names for %d ranks\n", hosts.size(), env->world_size);
    return 1;
  }
  for (int r = 0; r < env->world_size; ++r) {
    if (hosts[r] != host) {
      std::printf("ERROR BAD_HOST: rank %d's host is '%s', not '%s'\n", r, hosts[r].c_str(),
                  host);
      return 1;
    }
  }
  std::printf("ROSTER OK %d\n", env->world_size);
  std::fflush(stdout);
  if (const char* watch_ms = std::getenv("RDV_WATCH_MS")) {
    const absl::Time until = absl::Now() + absl::Milliseconds(std::atoi(watch_ms));
    while (absl::Now() < until) {
      for (const comm::PeerEvent& event : (*rendezvous)->PollPeerEvents()) {
        const char* kind = event.kind == comm::PeerEvent::Kind::kDied   ? "died"
                           : event.kind == comm::PeerEvent::Kind::kLeft ? "left"
                                                                        : "hung";
        std::printf("EVENT %d %s %s\n", event.rank, kind, event.reason.c_str());
        std::fflush(stdout);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  return 0;
}
