// File: tests/comm/rendezvous/hang_verdict_test.cc
//
// The store's rule for declaring ranks hung (comm/rendezvous/hang_verdict.h),
// case by case: silence, a rank stuck outside the communicator while another
// waits for it, and the long computations that must NOT be declared.
#include "comm/rendezvous/hang_verdict.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

constexpr absl::Duration kBound = absl::Seconds(3);

// A rank that beats on time, is inside the communicator and waits for nothing.
RankHeartbeat Healthy(int rank) {
  RankHeartbeat r;
  r.rank = rank;
  r.silent = absl::Milliseconds(200);
  return r;
}

RankHeartbeat Silent(int rank, absl::Duration silent) {
  RankHeartbeat r = Healthy(rank);
  r.silent = silent;
  return r;
}

RankHeartbeat Idle(int rank, absl::Duration idle) {
  RankHeartbeat r = Healthy(rank);
  r.idle = idle;
  return r;
}

RankHeartbeat Waiting(int rank, absl::Duration pending, int awaited) {
  RankHeartbeat r = Healthy(rank);
  r.pending = pending;
  r.awaited_rank = awaited;
  r.awaited_what = "all_reduce #4 on communicator 0x1: recv of segment 0 at ring step 0";
  return r;
}

TEST(HangVerdict, NobodyIsDeclaredWhileEveryoneBeats) {
  EXPECT_TRUE(FindHungRanks({Healthy(0), Healthy(1), Healthy(2)}, kBound).empty());
}

TEST(HangVerdict, ARankSilentForLongerThanTheBoundIsHung) {
  std::vector<HangVerdict> verdicts =
      FindHungRanks({Healthy(0), Healthy(1), Silent(2, absl::Milliseconds(3200))}, kBound);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].rank, 2);
  EXPECT_TRUE(absl::StrContains(verdicts[0].reason, "rank 2 is hung: no heartbeat"))
      << verdicts[0].reason;
  EXPECT_TRUE(absl::StrContains(verdicts[0].reason, "for 3.2s (hang bound 3s)"))
      << verdicts[0].reason;
  // Exactly at the bound is not yet longer than it.
  EXPECT_TRUE(FindHungRanks({Healthy(0), Silent(1, kBound)}, kBound).empty());
}

TEST(HangVerdict, AStuckRankIsHungOnlyWhileSomeoneWaitsForIt) {
  const absl::Duration long_time = absl::Seconds(4);
  // Rank 2 computes for 4 s, rank 0 has waited 4 s for it: declared.
  std::vector<HangVerdict> verdicts =
      FindHungRanks({Waiting(0, long_time, 2), Waiting(1, long_time, 0), Idle(2, long_time)},
                    kBound);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].rank, 2);
  EXPECT_TRUE(absl::StrContains(verdicts[0].reason,
                                "rank 2 is hung: its caller has not called into the "
                                "communicator for 4s while rank 0 has waited 4s for it in "
                                "all_reduce #4"))
      << verdicts[0].reason;
  EXPECT_TRUE(absl::StrContains(verdicts[0].reason, "KeepAlive")) << verdicts[0].reason;

  // Everyone computes for a minute (an evaluation phase): nobody waits, so
  // nobody is declared.
  const absl::Duration minute = absl::Minutes(1);
  EXPECT_TRUE(FindHungRanks({Idle(0, minute), Idle(1, minute), Idle(2, minute)}, kBound).empty());
  // Somebody waits, but not yet for longer than the bound.
  EXPECT_TRUE(
      FindHungRanks({Waiting(0, absl::Seconds(2), 2), Idle(2, minute)}, kBound).empty());
  // Somebody waits long, but for another rank (a sub-communicator): the idle
  // rank outside it is not declared.
  EXPECT_TRUE(FindHungRanks({Waiting(0, minute, 1), Healthy(1), Idle(2, minute)}, kBound).empty());
}

TEST(HangVerdict, AWaitForAnUnknownRankBlamesIdleRanksOnlyWhenNobodyIsSilent) {
  const absl::Duration long_time = absl::Seconds(5);
  std::vector<HangVerdict> verdicts =
      FindHungRanks({Waiting(0, long_time, -1), Idle(1, long_time)}, kBound);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].rank, 1);
  // With a silent rank about, the unknown wait is more likely on it.
  verdicts = FindHungRanks(
      {Waiting(0, long_time, -1), Idle(1, long_time), Silent(2, long_time)}, kBound);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].rank, 2);
}

TEST(HangVerdict, RanksThatLeftOrWereDeclaredAreNotJudgedAgain) {
  RankHeartbeat gone = Silent(1, absl::Minutes(1));
  gone.judged = false;
  EXPECT_TRUE(FindHungRanks({Healthy(0), gone}, kBound).empty());
}

TEST(HangVerdict, SeveralAtOnceComeInRankOrder) {
  const absl::Duration long_time = absl::Seconds(4);
  std::vector<HangVerdict> verdicts = FindHungRanks(
      {Waiting(0, long_time, 3), Silent(1, long_time), Healthy(2), Idle(3, long_time)}, kBound);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0].rank, 1);
  EXPECT_EQ(verdicts[1].rank, 3);
}

TEST(HangVerdict, HeartbeatsComeFivePerBoundAtMostOnePerSecond) {
  EXPECT_EQ(HeartbeatInterval(absl::Seconds(3)), absl::Milliseconds(600));
  EXPECT_EQ(HeartbeatInterval(absl::Seconds(20)), absl::Seconds(1));
  EXPECT_EQ(HeartbeatInterval(absl::Milliseconds(20)), absl::Milliseconds(10));
}

}  // namespace
}  // namespace comm
