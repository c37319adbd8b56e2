// File: base/parallel_for.cc
#include "base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace base {
namespace {

std::atomic<int> g_threads{1};
std::atomic<std::thread::id> g_compute_thread{};

}  // namespace

void SetParallelThreads(int threads) {
  g_threads.store(std::max(1, threads), std::memory_order_relaxed);
  g_compute_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

int ParallelThreads() { return g_threads.load(std::memory_order_relaxed); }

bool ParallelForIsThreaded() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

int ParallelThreadIndex() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

void ParallelFor(int64_t n, int64_t piece, absl::FunctionRef<void(int64_t, int64_t)> body) {
  if (n <= 0) return;
  piece = std::max<int64_t>(piece, 1);
  const int64_t pieces = (n + piece - 1) / piece;
#ifdef _OPENMP
  const int threads = g_threads.load(std::memory_order_relaxed);
  if (pieces > 1 && threads > 1 && !omp_in_parallel() &&
      std::this_thread::get_id() == g_compute_thread.load(std::memory_order_relaxed)) {
    const int team = static_cast<int>(std::min<int64_t>(threads, pieces));
    // Static schedule: piece p always on the same thread of the team (its
    // caches hold what the previous kernel wrote there, when it was cut alike).
#pragma omp parallel for num_threads(team) schedule(static)
    for (int64_t p = 0; p < pieces; ++p) body(p * piece, std::min(n, (p + 1) * piece));
    return;
  }
#endif
  (void)pieces;
  body(0, n);
}

}  // namespace base
