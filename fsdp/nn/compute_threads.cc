// File: fsdp/nn/compute_threads.cc
#include "fsdp/nn/compute_threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/parallel_for.h"
#include "fsdp/nn/matmul.h"

namespace fsdp {

namespace {

// The CPUs this process may run on: its affinity mask (a launcher or cgroup
// may have narrowed it), or the hardware threads when it cannot be read.
int AllowedCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    const int count = CPU_COUNT(&mask);
    if (count > 0) return count;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int LocalRanks(int when_unset = 1) {
  int parsed = 0;
  if (const char* env = std::getenv("LOCAL_WORLD_SIZE");
      env != nullptr && absl::SimpleAtoi(env, &parsed) && parsed > 0) {
    return parsed;
  }
  return when_unset;
}

}  // namespace

int DefaultComputeThreads() { return std::max(1, AllowedCpus() / LocalRanks()); }

int DefaultComputeThreadsOfLocalRanks(int local_ranks) {
  return std::max(1, AllowedCpus() / LocalRanks(std::max(1, local_ranks)));
}

std::string DefaultComputeThreadsReason() {
  const int cpus = AllowedCpus(), ranks = LocalRanks();
  return absl::StrCat(cpus, " CPU", cpus == 1 ? "" : "s", " in this process's affinity / ", ranks,
                      " rank", ranks == 1 ? "" : "s", " on this host");
}

absl::Status SetComputeThreads(int threads) {
  if (threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute threads must be at least 1, got ", threads));
  }
  SetMatmulThreads(threads);  // OpenBLAS's pool and oneDNN's OpenMP runtime
  // The kernels between the products, on the same OpenMP team and this thread.
  base::SetParallelThreads(threads);
  return absl::OkStatus();
}

int ComputeThreads() { return openblas_get_num_threads(); }

}  // namespace fsdp
