// File: tests/comm/ring_schedule_test.cc
// The ring arithmetic, checked against its defining properties.
#include "comm/ring_schedule.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace comm {
namespace {

TEST(CeilSplitTest, ChunksTileTheCountInOrder) {
  for (size_t count : {0, 1, 2, 7, 8, 9, 4096, 1000003}) {
    for (int n : {1, 2, 3, 4, 5, 8}) {
      size_t next = 0;
      size_t per_chunk = (count + n - 1) / n;
      bool seen_short = false;
      for (int c = 0; c < n; ++c) {
        ElementRange chunk = CeilSplitChunk(count, n, c);
        EXPECT_EQ(chunk.offset, next) << count << " " << n << " " << c;
        EXPECT_LE(chunk.count, per_chunk);
        // Once a chunk is short, every later one is empty.
        if (seen_short) {
          EXPECT_EQ(chunk.count, 0u);
        }
        if (chunk.count < per_chunk) seen_short = true;
        next = chunk.offset + chunk.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(CeilSplitTest, DocumentedExamples) {
  EXPECT_EQ(CeilSplitChunk(7, 3, 0).count, 3u);
  EXPECT_EQ(CeilSplitChunk(7, 3, 1).count, 3u);
  EXPECT_EQ(CeilSplitChunk(7, 3, 2).count, 1u);
  EXPECT_EQ(CeilSplitChunk(2, 4, 2).count, 0u);
  EXPECT_EQ(CeilSplitChunk(2, 4, 3).count, 0u);
  EXPECT_EQ(CeilSplitChunk(2, 4, 3).offset, 2u);
}

// Simulates the ring all-gather with sets of owned chunks.
TEST(RingScheduleTest, AllGatherEveryRankEndsWithEveryChunk) {
  for (int n : {2, 3, 4, 7, 8}) {
    std::vector<std::set<int>> owned(n);
    for (int r = 0; r < n; ++r) owned[r].insert(r);
    for (int step = 0; step + 1 < n; ++step) {
      std::vector<std::set<int>> next = owned;
      for (int r = 0; r < n; ++r) {
        int sent = RingAllGatherSendChunk(r, n, step);
        ASSERT_TRUE(owned[r].count(sent)) << "rank " << r << " sends a chunk it lacks";
        int right = RingRightNeighbor(r, n);
        EXPECT_EQ(RingAllGatherRecvChunk(right, n, step), sent);
        next[right].insert(sent);
      }
      owned = next;
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(owned[r].size(), static_cast<size_t>(n));
  }
}

// Simulates the ring reduce-scatter with sets of contributors per chunk.
TEST(RingScheduleTest, ReduceScatterRankREndsWithChunkRFromEveryone) {
  for (int n : {2, 3, 4, 7, 8}) {
    // partial[r][c]: contributors of the partial sum of chunk c held by r.
    std::vector<std::vector<std::set<int>>> partial(n, std::vector<std::set<int>>(n));
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) partial[r][c] = {r};
    }
    for (int step = 0; step + 1 < n; ++step) {
      auto next = partial;
      for (int r = 0; r < n; ++r) {
        int sent = RingReduceScatterSendChunk(r, n, step);
        int right = RingRightNeighbor(r, n);
        EXPECT_EQ(RingReduceScatterRecvChunk(right, n, step), sent);
        std::set<int> sum = partial[r][sent];
        sum.insert(right);
        next[right][sent] = sum;
      }
      partial = next;
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(partial[r][r].size(), static_cast<size_t>(n));
  }
}

TEST(RingScheduleTest, SendAtStepKIsWhatArrivedAtStepKMinus1) {
  for (int n : {2, 3, 8}) {
    for (int r = 0; r < n; ++r) {
      for (int step = 1; step + 1 < n; ++step) {
        EXPECT_EQ(RingAllGatherSendChunk(r, n, step), RingAllGatherRecvChunk(r, n, step - 1));
        EXPECT_EQ(RingReduceScatterSendChunk(r, n, step),
                  RingReduceScatterRecvChunk(r, n, step - 1));
      }
    }
  }
}

TEST(SegmentTest, SegmentsTileAMessage) {
  EXPECT_EQ(SegmentElements(1 << 20, 4), 262144u);
  EXPECT_EQ(SegmentElements(3, 4), 1u);  // never zero
  EXPECT_EQ(SegmentCount(0, 10), 0u);
  EXPECT_EQ(SegmentCount(10, 10), 1u);
  EXPECT_EQ(SegmentCount(11, 10), 2u);
  ElementRange last = SegmentOf(25, 10, 2);
  EXPECT_EQ(last.offset, 20u);
  EXPECT_EQ(last.count, 5u);
}

TEST(PowerOfTwoTest, LargestPowerOfTwoAtMost) {
  EXPECT_EQ(LargestPowerOfTwoAtMost(1), 1);
  EXPECT_EQ(LargestPowerOfTwoAtMost(3), 2);
  EXPECT_EQ(LargestPowerOfTwoAtMost(8), 8);
  EXPECT_EQ(LargestPowerOfTwoAtMost(12), 8);
}

}  // namespace
}  // namespace comm
