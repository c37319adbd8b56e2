// File: examples/cma_bandwidth.cc
//
// What the hardware allows for the single copy UCX uses on one host: two
// processes copy from each other with process_vm_readv (CMA), the call UCX's
// rendezvous runs on the receiver, with nothing else around it (no UCX, no
// protocol, no progress engine). It measures one direction (one process
// reads while the other waits) and both directions at once (each reads the
// other's buffer at the same time: the traffic of a 2-rank all-gather), with
// the buffers in 4 KiB pages and in transparent huge pages
// (comm/transfer_memory.h).
//
//   bazel run -c opt //examples:cma_bandwidth -- --mib=32 --iters=20
//
// Each line is the best and the median over --iters copies of --mib MiB, in
// GB/s (10^9 B/s) per direction. The two processes are pinned to two
// different CPUs when there are two. See docs/collective-bench.md for how the
// numbers bound the collectives.
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/launcher/launcher.h"
#include "comm/transfer_memory.h"

ABSL_FLAG(int, mib, 32, "MiB copied per direction per iteration.");
ABSL_FLAG(int, iters, 20, "Timed copies per case.");

namespace {

// Lives in a MAP_SHARED page both processes see: the addresses to read
// from, a barrier, and each side's timings.
struct Shared {
  std::atomic<int> ready[2];
  std::atomic<uintptr_t> buffer[2];
  std::atomic<int> barrier;
  double seconds[2][1024];
  int failed;
};

void Barrier(Shared* shared, int* generation) {
  *generation += 2;
  shared->barrier.fetch_add(1);
  while (shared->barrier.load() < *generation) {
  }
}

// One side of one case: `me` reads the peer's buffer `iters` times (if it
// reads in this case), with a barrier around every copy so both sides copy
// at the same time.
// The first two CPUs this program may use, read once before any pinning
// (-1 if there are fewer than two).
int g_cpus[2] = {-1, -1};

void FindTwoCpus() {
  absl::StatusOr<std::vector<int>> cpus = comm::AllowedCpus();
  if (!cpus.ok() || cpus->size() < 2) return;
  g_cpus[0] = (*cpus)[0];
  g_cpus[1] = (*cpus)[1];
}

// Pins side `me` to its own CPU, so the two sides copy on separate cores:
// left to the scheduler they sometimes share one, and "both at once" then
// halves.
void PinToOwnCpu(int me) {
  if (g_cpus[me] < 0) return;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  CPU_SET(g_cpus[me], &mine);
  (void)sched_setaffinity(0, sizeof(mine), &mine);
}

void RunSide(Shared* shared, int me, pid_t peer, bool reads, bool huge, size_t bytes,
             int iters) {
  PinToOwnCpu(me);
  void* source = huge ? comm::AllocateTransferMemory(bytes) : std::aligned_alloc(4096, bytes);
  void* destination =
      huge ? comm::AllocateTransferMemory(bytes) : std::aligned_alloc(4096, bytes);
  if (source == nullptr || destination == nullptr) {
    shared->failed = 1;
    std::_Exit(1);
  }
  std::memset(source, me + 1, bytes);
  std::memset(destination, 0, bytes);
  shared->buffer[me].store(reinterpret_cast<uintptr_t>(source));
  shared->ready[me].store(1);
  while (shared->ready[1 - me].load() == 0) {
  }
  void* remote = reinterpret_cast<void*>(shared->buffer[1 - me].load());
  int generation = 0;
  for (int i = -2; i < iters; ++i) {  // two untimed copies first
    Barrier(shared, &generation);
    absl::Time start = absl::Now();
    if (reads) {
      iovec local{destination, bytes};
      iovec far{remote, bytes};
      ssize_t got = process_vm_readv(peer, &local, 1, &far, 1, 0);
      if (got != static_cast<ssize_t>(bytes)) {
        std::fprintf(stderr, "process_vm_readv: %s (got %zd of %zu bytes)\n",
                     got < 0 ? std::strerror(errno) : "short read", got, bytes);
        shared->failed = 1;
      }
    }
    if (i >= 0) shared->seconds[me][i] = absl::ToDoubleSeconds(absl::Now() - start);
    Barrier(shared, &generation);
  }
  std::free(source);
  std::free(destination);
}

// Runs one case in two fresh processes; returns false if it failed.
bool RunCase(const char* name, bool huge, bool both_directions, size_t bytes, int iters) {
  void* page = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    std::fprintf(stderr, "mmap: %s\n", std::strerror(errno));
    return false;
  }
  Shared* shared = new (page) Shared();
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "fork: %s\n", std::strerror(errno));
    return false;
  }
  if (child == 0) {
    RunSide(shared, 1, parent, /*reads=*/true, huge, bytes, iters);
    std::_Exit(0);
  }
  RunSide(shared, 0, child, /*reads=*/both_directions, huge, bytes, iters);
  int status = 0;
  waitpid(child, &status, 0);
  bool ok = shared->failed == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (ok) {
    // Per direction: the child's reads (and the parent's, if it read).
    std::vector<double> rates;
    for (int side = both_directions ? 0 : 1; side < 2; ++side) {
      for (int i = 0; i < iters; ++i) rates.push_back(bytes / shared->seconds[side][i] / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    std::printf("  %-28s best %6.2f GB/s   median %6.2f GB/s\n", name, rates.back(),
                rates[rates.size() / 2]);
  }
  munmap(page, sizeof(Shared));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "process_vm_readv bandwidth between two processes, one and two directions, 4 KiB and "
      "huge pages.\n  bazel run -c opt //examples:cma_bandwidth -- --mib=32");
  absl::ParseCommandLine(argc, argv);
  const int mib = absl::GetFlag(FLAGS_mib);
  const int iters = absl::GetFlag(FLAGS_iters);
  if (mib < 1 || mib > 4096) {
    std::fprintf(stderr, "cma_bandwidth: --mib=%d: expected 1..4096\n", mib);
    return 2;
  }
  if (iters < 1 || iters > 1024) {
    std::fprintf(stderr, "cma_bandwidth: --iters=%d: expected 1..1024\n", iters);
    return 2;
  }
  const size_t bytes = static_cast<size_t>(mib) << 20;
  FindTwoCpus();
  std::printf("# process_vm_readv, %d MiB per copy, %d copies per case, GB/s per direction%s\n",
              mib, iters,
              comm::TransparentHugePagesAvailable() ? ""
                                                    : " (THP disabled: 'huge' = 4 KiB pages)");
  bool ok = true;
  ok &= RunCase("4 KiB pages, one direction", false, false, bytes, iters);
  ok &= RunCase("4 KiB pages, both at once", false, true, bytes, iters);
  ok &= RunCase("huge pages, one direction", true, false, bytes, iters);
  ok &= RunCase("huge pages, both at once", true, true, bytes, iters);
  if (!ok) {
    std::fprintf(stderr,
                 "cma_bandwidth: a case failed (process_vm_readv needs ptrace permission "
                 "over the peer: check /proc/sys/kernel/yama/ptrace_scope)\n");
    return 1;
  }
  return 0;
}
