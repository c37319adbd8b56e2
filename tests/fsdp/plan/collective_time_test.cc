// File: tests/fsdp/plan/collective_time_test.cc
// Each collective's time by the formula of its algorithm, worked by hand.
#include "fsdp/plan/collective_time.h"

#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

CollectiveGroup Group(int size, bool on_one_host) {
  CollectiveGroup g;
  g.size = size;
  g.on_one_host = on_one_host;
  g.latency_s = 1e-6;
  g.bandwidth_bytes_per_s = 1e9;
  g.memory_bandwidth_bytes_per_s = 1e10;
  return g;
}

TEST(CollectiveTimeTest, OneRankOrNothingCostsNothing) {
  EXPECT_EQ(AllGatherSeconds(1 << 20, Group(1, true)), 0);
  EXPECT_EQ(ReduceScatterSeconds(0, Group(4, true)), 0);
  EXPECT_EQ(AllReduceSeconds(1 << 20, Group(1, false)), 0);
}

TEST(CollectiveTimeTest, AllGather) {
  // Ring, 4 ranks, 4e6 bytes: 3 steps of 1 us + 1e6 / 1e9 s.
  EXPECT_DOUBLE_EQ(AllGatherSeconds(4000000, Group(4, true)), 3 * (1e-6 + 1e-3));
  // Direct, 4 ranks, 4000 bytes: one latency, 3 chunks of 1000 bytes.
  EXPECT_DOUBLE_EQ(AllGatherSeconds(4000, Group(4, true)), 1e-6 + 3 * 1000 / 1e9);
}

TEST(CollectiveTimeTest, ReduceScatterByAlgorithm) {
  // Recursive doubling, 3 ranks (p = 2, fix-up in and out: 3 rounds), 6000 bytes.
  EXPECT_DOUBLE_EQ(ReduceScatterSeconds(6000, Group(3, true)),
                   3 * (1e-6 + 6000 / 1e9 + 3 * 6000 / 1e10));
  // Direct on one host, 2 ranks, 2e6 bytes: one latency, 1e6 sent, the
  // 2-way sum reads 2e6 and writes 1e6.
  EXPECT_DOUBLE_EQ(ReduceScatterSeconds(2000000, Group(2, true)),
                   1e-6 + 1e6 / 1e9 + 3e6 / 1e10);
  // 5 ranks on one host: above direct_max_ranks, so the ring: 4 steps of
  // 1 us + 1e6 / 1e9 + a 3e6-byte sum.
  EXPECT_DOUBLE_EQ(ReduceScatterSeconds(5000000, Group(5, true)),
                   4 * (1e-6 + 1e-3 + 3e6 / 1e10));
  // Across hosts always the ring.
  EXPECT_DOUBLE_EQ(ReduceScatterSeconds(2000000, Group(2, false)),
                   1 * (1e-6 + 1e-3 + 3e6 / 1e10));
}

TEST(CollectiveTimeTest, AllReduceIsReduceScatterThenRingAllGather) {
  const CollectiveGroup g = Group(8, false);
  EXPECT_DOUBLE_EQ(AllReduceSeconds(8000000, g),
                   ReduceScatterSeconds(8000000, g) + AllGatherSeconds(8000000, g));
  // Small: recursive doubling, 8 ranks = 3 rounds of the whole vector.
  EXPECT_DOUBLE_EQ(AllReduceSeconds(4, g), 3 * (1e-6 + 4 / 1e9 + 12 / 1e10));
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
