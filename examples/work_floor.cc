// File: examples/work_floor.cc
#include "examples/work_floor.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "comm/dtype.h"
#include "comm/launcher/launcher.h"
#include "comm/reduce.h"
#include "comm/transfer_memory.h"

namespace collective_bench {
namespace {

constexpr int kMaxRanks = 64;
constexpr int kMaxIters = 1 << 20;
constexpr int kUntimedIters = 2;
// UCX 1.13's CMA transport moves a large message in process_vm_readv calls
// of 512 KiB (seen with strace on ucx_perftest tag_bw); so do the floors.
constexpr size_t kReadPieceBytes = size_t{512} << 10;

// The receive slots of one rank, (n-1) of them, take this much: one slot
// per peer of 4 MiB at 2 ranks, 1.3 MiB at 4. Measured at 64 MiB with huge
// pages, slots of 256 KiB to 8 MiB: larger ones win at 2 ranks (fewer
// calls), 1-2 MiB at 4 ranks (two ranks share a core's caches).
constexpr size_t kSlotBudgetBytes = size_t{4} << 20;
constexpr size_t kSlotAlignBytes = size_t{64} << 10;

size_t SlotBytesFor(int ranks) {
  const size_t share = kSlotBudgetBytes / static_cast<size_t>(ranks - 1);
  return std::max(kSlotAlignBytes, share / kSlotAlignBytes * kSlotAlignBytes);
}
enum class Pattern { kPointToPoint, kAllGather, kReduceScatter, kAllReduce, kBroadcast };

// What every process of one measurement shares, in one MAP_SHARED mapping.
struct Control {
  pthread_barrier_t barrier;
  std::atomic<uintptr_t> big[kMaxRanks];    // the total buffer of each rank
  std::atomic<uintptr_t> small[kMaxRanks];  // its out-of-place per-rank side
  std::atomic<pid_t> pid[kMaxRanks];
  std::atomic<uint64_t> reduced[kMaxRanks];  // all-reduce: segments reduced so far
  double seconds[kMaxRanks];                  // the timed iterations, in total
  char error[kMaxRanks][200];
};

struct Job {
  Pattern pattern;
  int ranks;
  bool in_place;
  size_t total_bytes;
  bool huge_pages;
  int iters;
};

void* Allocate(size_t bytes, bool huge_pages) {
  if (bytes == 0) bytes = 1;
  if (huge_pages) return comm::AllocateTransferMemory(bytes);
  return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}

// One rank's process: everything it does between fork and _exit.
class RankProcess {
 public:
  RankProcess(Control* control, const Job& job, int rank)
      : control_(control),
        job_(job),
        rank_(rank),
        chunk_(job.total_bytes / job.ranks),
        slot_bytes_(SlotBytesFor(job.ranks)) {}

  // 0 on success; else control_->error[rank_] says why.
  int Run() {
    big_ = static_cast<std::byte*>(Allocate(job_.total_bytes, job_.huge_pages));
    small_ = static_cast<std::byte*>(Allocate(chunk_, job_.huge_pages));
    const size_t slots = static_cast<size_t>(job_.ranks - 1) * slot_bytes_;
    slots_ = static_cast<std::byte*>(Allocate(slots, /*huge_pages=*/false));
    if (big_ == nullptr || small_ == nullptr || slots_ == nullptr) {
      return Fail(absl::StrCat("cannot allocate ", job_.total_bytes, " bytes"));
    }
    // Zeros, so that sums stay finite; writing them also faults the pages in.
    std::memset(big_, 0, job_.total_bytes);
    std::memset(small_, 0, chunk_);
    std::memset(slots_, 0, slots);
    control_->big[rank_].store(reinterpret_cast<uintptr_t>(big_));
    control_->small[rank_].store(reinterpret_cast<uintptr_t>(small_));
    control_->pid[rank_].store(getpid());
    Barrier();
    for (int i = 0; i < kUntimedIters; ++i) {
      if (!Work()) return 1;
    }
    // Then the timed iterations back to back, with no barrier between them,
    // as collective_bench posts its collectives: a rank that finishes one
    // starts the next, and only the all-reduce waits on its peers.
    Barrier();
    const absl::Time start = absl::Now();
    for (int i = 0; i < job_.iters; ++i) {
      if (!Work()) return 1;
    }
    control_->seconds[rank_] = absl::ToDoubleSeconds(absl::Now() - start);
    // One checked iteration on known values, so a floor is known to have
    // moved the bytes its pattern names (the timed ones ran on zeros).
    Barrier();
    FillKnownValues();
    Barrier();
    if (!Work()) return 1;
    const bool right = Check();
    Barrier();  // no rank exits while a peer may still read its memory
    return right ? 0 : 1;
  }

 private:
  int Fail(const std::string& message) {
    std::snprintf(control_->error[rank_], sizeof(control_->error[rank_]), "%s",
                  message.c_str());
    return 1;
  }

  void Barrier() { pthread_barrier_wait(&control_->barrier); }

  static void Fill(std::byte* data, size_t bytes, float value) {
    float* values = reinterpret_cast<float*>(data);
    std::fill(values, values + bytes / sizeof(float), value);
  }

  // Every rank's contribution is rank + 1 (the root's, for a broadcast or
  // point to point: 1, the others' 0).
  void FillKnownValues() {
    const bool sends_all = job_.pattern == Pattern::kBroadcast ||
                           job_.pattern == Pattern::kPointToPoint;
    Fill(big_, job_.total_bytes, sends_all ? (rank_ == 0 ? 1.0f : 0.0f) : rank_ + 1.0f);
    Fill(small_, chunk_, job_.pattern == Pattern::kAllGather ? rank_ + 1.0f : 0.0f);
  }

  // Whether the checked iteration left what its pattern promises in this
  // rank's buffers; if not, control_->error says where.
  bool Check() {
    const float n = static_cast<float>(job_.ranks);
    const float sum = n * (n + 1) / 2;
    auto expect = [&](const std::byte* data, size_t bytes, float value, const char* what) {
      const float* values = reinterpret_cast<const float*>(data);
      for (size_t i = 0; i < bytes / sizeof(float); ++i) {
        if (values[i] != value) {
          Fail(absl::StrCat("checked iteration: ", what, " element ", i, " is ", values[i],
                            ", expected ", value));
          return false;
        }
      }
      return true;
    };
    switch (job_.pattern) {
      case Pattern::kPointToPoint:
        return rank_ != 1 || expect(big_, job_.total_bytes, 1.0f, "received");
      case Pattern::kBroadcast:
        return expect(big_, job_.total_bytes, 1.0f, "broadcast");
      case Pattern::kAllGather:
        for (int j = 0; j < job_.ranks; ++j) {
          if (!expect(big_ + j * chunk_, chunk_, j + 1.0f, "gathered")) return false;
        }
        return true;
      case Pattern::kReduceScatter:
        return expect(job_.in_place ? big_ + rank_ * chunk_ : small_, chunk_, sum, "reduced");
      case Pattern::kAllReduce:
        return expect(big_, job_.total_bytes, sum, "all-reduced");
    }
    return false;
  }

  std::byte* Remote(const std::atomic<uintptr_t>* table, int peer) const {
    return reinterpret_cast<std::byte*>(table[peer].load());
  }

  // Copies `bytes` from `peer`'s address `from` to our `to`, in calls of at
  // most kReadPieceBytes.
  bool Read(int peer, const std::byte* from, std::byte* to, size_t bytes) {
    while (bytes > 0) {
      const size_t piece = std::min(bytes, kReadPieceBytes);
      iovec local{to, piece};
      iovec remote{const_cast<std::byte*>(from), piece};
      const ssize_t got = process_vm_readv(control_->pid[peer].load(), &local, 1, &remote, 1, 0);
      if (got <= 0) {
        Fail(absl::StrCat("process_vm_readv from rank ", peer, ": ",
                          got < 0 ? std::strerror(errno) : "read nothing",
                          " (it needs ptrace permission over the peer: see "
                          "/proc/sys/kernel/yama/ptrace_scope)"));
        return false;
      }
      from += got;
      to += got;
      bytes -= static_cast<size_t>(got);
    }
    return true;
  }

  bool Work() {
    switch (job_.pattern) {
      case Pattern::kPointToPoint:
        return rank_ != 1 || Read(0, Remote(control_->big, 0), big_, job_.total_bytes);
      case Pattern::kBroadcast:
        return rank_ == 0 || Read(0, Remote(control_->big, 0), big_, job_.total_bytes);
      case Pattern::kAllGather:
        return AllGather(job_.in_place);
      case Pattern::kReduceScatter:
        return ReduceScatter(job_.in_place);
      case Pattern::kAllReduce:
        return ReduceScatter(/*in_place=*/true) && GatherReduced();
    }
    return false;
  }

  // Chunk j of rank j's input (its slot of the total buffer in place, its
  // separate input out of place) into our slot j; our own input into our
  // slot when out of place. Peers are read in ring order, nearest first.
  bool AllGather(bool in_place) {
    for (int distance = 1; distance < job_.ranks; ++distance) {
      const int peer = (rank_ + job_.ranks - distance) % job_.ranks;
      const std::byte* from = in_place ? Remote(control_->big, peer) + peer * chunk_
                                       : Remote(control_->small, peer);
      if (!Read(peer, from, big_ + peer * chunk_, chunk_)) return false;
    }
    if (!in_place) std::memcpy(big_ + rank_ * chunk_, small_, chunk_);
    return true;
  }

  // Segment by segment: our chunk from every peer into a slot each, then one
  // pass summing our own contribution and the slots into the result.
  bool ReduceScatter(bool in_place) {
    const size_t n = static_cast<size_t>(job_.ranks);
    std::byte* own = big_ + rank_ * chunk_;
    std::byte* result = in_place ? own : small_;
    // Large out-of-place results are stored non-temporally, as the direct
    // reduce-scatter does.
    const bool stream = !in_place && chunk_ >= comm::kStreamOutputMinBytes;
    std::vector<const void*> inputs(n);
    for (size_t offset = 0; offset < chunk_; offset += slot_bytes_) {
      const size_t bytes = std::min(slot_bytes_, chunk_ - offset);
      inputs[0] = own + offset;
      for (size_t distance = 1; distance < n; ++distance) {
        const int peer = static_cast<int>((rank_ + distance) % n);
        std::byte* slot = slots_ + (distance - 1) * slot_bytes_;
        if (!Read(peer, Remote(control_->big, peer) + rank_ * chunk_ + offset, slot, bytes)) {
          return false;
        }
        inputs[distance] = slot;
      }
      comm::ReduceSumChain(comm::Dtype::kFloat32, inputs.data(), n, result + offset,
                           bytes / sizeof(float), 1.0f, stream);
      control_->reduced[rank_].fetch_add(1, std::memory_order_release);
    }
    return true;
  }

  // All-reduce's second half: every peer's reduced chunk into ours, segment
  // by segment, each as soon as that peer has reduced it (this rank's
  // round of iterations so far tells how many segments that is).
  bool GatherReduced() {
    const uint64_t segments = (chunk_ + slot_bytes_ - 1) / slot_bytes_;
    ++gathers_;
    for (int distance = 1; distance < job_.ranks; ++distance) {
      const int peer = (rank_ + job_.ranks - distance) % job_.ranks;
      for (uint64_t k = 0; k < segments; ++k) {
        const uint64_t needed = (gathers_ - 1) * segments + k + 1;
        // The parent's deadline bounds this wait: it kills a job that hangs.
        while (control_->reduced[peer].load(std::memory_order_acquire) < needed) sched_yield();
        const size_t offset = peer * chunk_ + k * slot_bytes_;
        const size_t bytes = std::min(slot_bytes_, chunk_ - k * slot_bytes_);
        if (!Read(peer, Remote(control_->big, peer) + offset, big_ + offset, bytes)) {
          return false;
        }
      }
    }
    return true;
  }

  Control* const control_;
  const Job job_;
  const int rank_;
  const size_t chunk_;
  const size_t slot_bytes_;
  std::byte* big_ = nullptr;
  std::byte* small_ = nullptr;
  std::byte* slots_ = nullptr;
  uint64_t gathers_ = 0;  // all-reduce iterations begun
};

void Pin(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  for (int cpu : cpus) CPU_SET(cpu, &mine);
  (void)sched_setaffinity(0, sizeof(mine), &mine);
}

// Seconds per iteration on the slowest rank.
absl::StatusOr<double> Measure(const Job& job, absl::Duration timeout) {
  if (job.ranks < 2 || job.ranks > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("work floor: ", job.ranks, " ranks; expected 2 to ", kMaxRanks));
  }
  if (job.iters < 1 || job.iters > kMaxIters) {
    return absl::InvalidArgumentError(
        absl::StrCat("work floor: ", job.iters, " iterations; expected 1 to ", kMaxIters));
  }
  // Whole fp32 elements per rank, so every pattern splits the buffer evenly.
  const size_t unit = static_cast<size_t>(job.ranks) * sizeof(float);
  if (job.total_bytes < unit || job.total_bytes % unit != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "work floor: ", job.total_bytes, " bytes is not a positive multiple of ", job.ranks,
        " ranks x 4 bytes"));
  }
  void* page = mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                    -1, 0);
  if (page == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("work floor: mmap: ", std::strerror(errno)));
  }
  Control* control = new (page) Control();
  pthread_barrierattr_t attributes;
  pthread_barrierattr_init(&attributes);
  pthread_barrierattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&control->barrier, &attributes, job.ranks);
  pthread_barrierattr_destroy(&attributes);

  // Unknown CPUs (sched_getaffinity failed): unpinned, as the launcher's
  // CoresForRank gives for an empty list.
  const std::vector<int> cpus = comm::AllowedCpus().value_or(std::vector<int>{});
  std::vector<pid_t> children;
  absl::Status status;
  for (int rank = 0; rank < job.ranks; ++rank) {
    const std::vector<int> mine = comm::CoresForRank(cpus, rank, job.ranks);
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t pid = fork();
    if (pid < 0) {
      status = absl::InternalError(
          absl::StrCat("work floor: fork for rank ", rank, ": ", std::strerror(errno)));
      break;
    }
    if (pid == 0) {
      Pin(mine);
      std::_Exit(RankProcess(control, job, rank).Run());
    }
    children.push_back(pid);
  }

  // Reap: the first rank to fail (or the deadline) stops the others, which
  // would otherwise wait at a barrier forever.
  std::vector<bool> running(children.size(), true);
  size_t left = children.size();
  const absl::Time deadline = absl::Now() + timeout;
  while (left > 0) {
    if (!status.ok() || absl::Now() > deadline) {
      if (status.ok()) {
        std::vector<int> late;
        for (size_t r = 0; r < children.size(); ++r) {
          if (running[r]) late.push_back(static_cast<int>(r));
        }
        status = absl::DeadlineExceededError(absl::StrCat(
            "work floor: rank(s) ", absl::StrJoin(late, ", "), " of ", job.ranks,
            " still running after ", absl::FormatDuration(timeout), "; killed"));
      }
      for (size_t r = 0; r < children.size(); ++r) {
        if (running[r]) kill(children[r], SIGKILL);
      }
      for (size_t r = 0; r < children.size(); ++r) {
        if (running[r]) waitpid(children[r], nullptr, 0);
      }
      break;
    }
    bool reaped = false;
    for (size_t r = 0; r < children.size(); ++r) {
      int wait_status = 0;
      if (!running[r] || waitpid(children[r], &wait_status, WNOHANG) != children[r]) continue;
      running[r] = false;
      --left;
      reaped = true;
      if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) continue;
      const std::string said = control->error[r];
      status = absl::InternalError(absl::StrCat(
          "work floor: rank ", r, " of ", job.ranks, " failed",
          said.empty() ? "" : ": ", said,
          WIFSIGNALED(wait_status) ? absl::StrCat(" (signal ", WTERMSIG(wait_status), ")")
                                   : ""));
    }
    if (!reaped) absl::SleepFor(absl::Milliseconds(2));
  }

  double slowest = 0;
  if (status.ok()) {
    for (int r = 0; r < job.ranks; ++r) slowest = std::max(slowest, control->seconds[r]);
    // Only after a clean end: a rank killed inside the barrier leaves it
    // busy, and destroying a busy barrier waits forever. Unmapping needs no
    // destroy.
    pthread_barrier_destroy(&control->barrier);
  }
  munmap(page, sizeof(Control));
  if (!status.ok()) return status;
  return slowest / job.iters;
}

Floor FloorOf(double seconds, size_t total_bytes, double bus_factor) {
  return Floor{seconds * 1e6, total_bytes / seconds / 1e9 * bus_factor};
}

Pattern PatternOf(Collective c) {
  switch (c) {
    case Collective::kAllGather:
      return Pattern::kAllGather;
    case Collective::kReduceScatter:
      return Pattern::kReduceScatter;
    case Collective::kAllReduce:
      return Pattern::kAllReduce;
    case Collective::kBroadcast:
      return Pattern::kBroadcast;
  }
  return Pattern::kBroadcast;
}

}  // namespace

absl::StatusOr<Floor> MeasureWorkFloor(const FloorCase& c, size_t total_bytes, bool huge_pages,
                                       int iters, absl::Duration timeout) {
  absl::StatusOr<double> seconds = Measure(
      Job{PatternOf(c.collective), c.ranks, c.in_place, total_bytes, huge_pages, iters}, timeout);
  if (!seconds.ok()) return seconds.status();
  return FloorOf(*seconds, total_bytes, BusFactor(c.collective, c.ranks));
}

absl::StatusOr<Floor> PointToPointFloor(size_t total_bytes, bool huge_pages, int iters,
                                        absl::Duration timeout) {
  absl::StatusOr<double> seconds =
      Measure(Job{Pattern::kPointToPoint, 2, false, total_bytes, huge_pages, iters}, timeout);
  if (!seconds.ok()) return seconds.status();
  return FloorOf(*seconds, total_bytes, 1.0);
}

namespace {

Row FloorRow(const std::string& name, int ranks, size_t bytes, const Floor& floor) {
  Row row;
  row.collective = name;
  row.ranks = ranks;
  row.bytes = bytes;
  row.time_us = floor.time_us;
  row.algbw_gbps = bytes / (floor.time_us * 1e3);
  row.busbw_gbps = floor.busbw_gbps;
  return row;
}

void PrintFloor(const std::string& name, const absl::StatusOr<Floor>& floor) {
  if (floor.ok()) {
    std::printf("#   %-36s %10.1f us %8.2f GB/s busbw\n", name.c_str(), floor->time_us,
                floor->busbw_gbps);
  } else {
    std::printf("#   %-36s %s\n", name.c_str(), floor.status().ToString().c_str());
  }
  std::fflush(stdout);
}

}  // namespace

std::vector<Row> MeasureFloorSweep(const std::vector<Collective>& collectives,
                                   const std::vector<int>& nprocs, size_t total_bytes,
                                   bool huge_pages, bool in_place, int iters) {
  std::vector<Row> rows;
  std::printf("# work floors at %zu bytes: each pattern's copies and sums alone, in pinned "
              "processes (examples/work_floor.h; %s, %s; mean of %d)\n",
              total_bytes, huge_pages ? "huge pages" : "4 KiB pages",
              in_place ? "in place" : "out of place", iters);
  absl::StatusOr<Floor> point = PointToPointFloor(total_bytes, huge_pages, iters);
  PrintFloor("point to point (tag_bw's copy)", point);
  if (point.ok()) rows.push_back(FloorRow(kPointToPointFloorName, 2, total_bytes, *point));
  for (int n : nprocs) {
    if (n < 2 || total_bytes % (static_cast<size_t>(n) * sizeof(float)) != 0) continue;
    for (Collective collective : collectives) {
      const FloorCase c{collective, n, in_place};
      absl::StatusOr<Floor> floor = MeasureWorkFloor(c, total_bytes, huge_pages, iters);
      PrintFloor(FloorCaseName(c), floor);
      if (!floor.ok()) continue;
      rows.push_back(FloorRow(absl::StrCat(kFloorPrefix, CollectiveName(collective)), n,
                              total_bytes, *floor));
    }
  }
  return rows;
}

std::string FloorCaseName(const FloorCase& c) {
  const bool has_variant =
      c.collective == Collective::kAllGather || c.collective == Collective::kReduceScatter;
  return absl::StrCat(CollectiveName(c.collective), " ", c.ranks, " ranks",
                      has_variant ? (c.in_place ? ", in place" : ", out of place") : "");
}

}  // namespace collective_bench
