// File: tests/base/parallel_for_test.cc
//
// base::ParallelFor: the pieces are fixed by n and the piece size alone, each
// index is covered once, several threads run them when the build has OpenMP,
// and a thread other than the compute thread runs the body once, serially.
#include "base/parallel_for.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace base {
namespace {

using Pieces = std::vector<std::pair<int64_t, int64_t>>;

Pieces Record(int64_t n, int64_t piece, std::set<std::thread::id>* threads = nullptr) {
  std::mutex mu;
  Pieces pieces;
  ParallelFor(n, piece, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    pieces.emplace_back(begin, end);
    if (threads != nullptr) threads->insert(std::this_thread::get_id());
  });
  std::sort(pieces.begin(), pieces.end());
  return pieces;
}

TEST(ParallelFor, OneThreadRunsTheBodyOnceOverEverything) {
  SetParallelThreads(1);
  EXPECT_EQ(Record(1000, 64), (Pieces{{0, 1000}}));
  EXPECT_EQ(Record(0, 64), Pieces{});
}

TEST(ParallelFor, PiecesDependOnNAndPieceSizeOnly) {
  const int64_t n = 1000, piece = 64;
  Pieces expected;
  for (int64_t b = 0; b < n; b += piece) expected.emplace_back(b, std::min(n, b + piece));
  for (int threads : {2, 3, 7}) {
    SetParallelThreads(threads);
    if (!ParallelForIsThreaded()) {
      EXPECT_EQ(Record(n, piece), (Pieces{{0, n}})) << "built without OpenMP: serial";
      continue;
    }
    EXPECT_EQ(Record(n, piece), expected) << threads << " threads";
  }
  SetParallelThreads(2);
  // One piece or fewer: the caller runs it.
  if (ParallelForIsThreaded()) EXPECT_EQ(Record(64, 64), (Pieces{{0, 64}}));
  SetParallelThreads(1);
}

TEST(ParallelFor, TwoThreadsShareThePieces) {
  if (!ParallelForIsThreaded()) GTEST_SKIP() << "built without OpenMP (the TSan build)";
  SetParallelThreads(2);
  std::set<std::thread::id> threads;
  Record(64 * 100, 64, &threads);
  EXPECT_EQ(threads.size(), 2u);
  SetParallelThreads(1);
}

// Each piece sees the index of the thread that runs it: distinct threads have
// distinct indices below ParallelThreads(), so a per-thread scratch is safe.
TEST(ParallelFor, EachThreadHasItsOwnIndexBelowTheThreadCount) {
  EXPECT_EQ(ParallelThreadIndex(), 0) << "outside a body";
  for (int threads : {1, 2, 3}) {
    SetParallelThreads(threads);
    std::mutex mu;
    std::set<std::pair<std::thread::id, int>> seen;
    ParallelFor(64 * 30, 64, [&](int64_t, int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      seen.emplace(std::this_thread::get_id(), ParallelThreadIndex());
    });
    std::set<int> indices;
    std::set<std::thread::id> ids;
    for (const auto& [id, index] : seen) {
      EXPECT_GE(index, 0);
      EXPECT_LT(index, threads);
      indices.insert(index);
      ids.insert(id);
    }
    EXPECT_EQ(seen.size(), ids.size()) << "one index per thread";
    EXPECT_EQ(indices.size(), ids.size()) << "no two threads share an index";
    EXPECT_EQ(static_cast<int>(ids.size()), ParallelForIsThreaded() ? threads : 1);
  }
  SetParallelThreads(1);
}

TEST(ParallelFor, AnotherThreadThanTheComputeThreadRunsSerially) {
  SetParallelThreads(2);
  Pieces seen;
  std::thread other([&] { seen = Record(64 * 100, 64); });
  other.join();
  EXPECT_EQ(seen, (Pieces{{0, 6400}}));
  SetParallelThreads(1);
}

TEST(ParallelFor, ANestedCallRunsSeriallyInsideItsPiece) {
  SetParallelThreads(2);
  std::mutex mu;
  std::vector<Pieces> inner;
  ParallelFor(256, 64, [&](int64_t begin, int64_t end) {
    Pieces mine = Record(end - begin, 8);
    std::lock_guard<std::mutex> lock(mu);
    inner.push_back(mine);
  });
  ASSERT_FALSE(inner.empty());
  for (const Pieces& pieces : inner) EXPECT_EQ(pieces.size(), 1u);
  SetParallelThreads(1);
}

}  // namespace
}  // namespace base
