// File: tests/integration/comm/work_floor_test.cc
//
// examples/work_floor.h with real processes: every pattern at 2, 3 and 4
// ranks, both variants and both kinds of memory, completes its checked
// iteration (each floor process verifies the bytes its pattern moved and
// fails the measurement otherwise); bad cases are refused; a measurement
// that outlives its deadline is killed and named, and leaves no process
// behind. No timing is asserted beyond "positive".
#include "examples/work_floor.h"

#include <sys/wait.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace collective_bench {
namespace {

constexpr size_t kBytes = size_t{96} << 10;  // 2, 3 and 4 ranks x fp32 divide it

// No child of this test process is left over (reaped or still running).
void ExpectNoChildren() {
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(WorkFloorTest, EveryPatternCompletesItsCheckedIteration) {
  for (Collective collective : {Collective::kAllGather, Collective::kReduceScatter,
                                Collective::kAllReduce, Collective::kBroadcast}) {
    for (int ranks : {2, 3, 4}) {
      for (bool in_place : {false, true}) {
        for (bool huge_pages : {true, false}) {
          const FloorCase c{collective, ranks, in_place};
          SCOPED_TRACE(FloorCaseName(c) + (huge_pages ? ", huge pages" : ", 4 KiB pages"));
          absl::StatusOr<Floor> floor = MeasureWorkFloor(c, kBytes, huge_pages, /*iters=*/3);
          ASSERT_TRUE(floor.ok()) << floor.status();
          EXPECT_GT(floor->time_us, 0);
          EXPECT_GT(floor->busbw_gbps, 0);
        }
      }
    }
  }
  absl::StatusOr<Floor> point = PointToPointFloor(kBytes, /*huge_pages=*/true, /*iters=*/3);
  ASSERT_TRUE(point.ok()) << point.status();
  EXPECT_GT(point->busbw_gbps, 0);
  ExpectNoChildren();
}

TEST(WorkFloorTest, RefusesBadCases) {
  const FloorCase one_rank{Collective::kAllGather, 1, false};
  EXPECT_EQ(MeasureWorkFloor(one_rank, kBytes, true, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  const FloorCase three{Collective::kReduceScatter, 3, false};
  absl::Status uneven = MeasureWorkFloor(three, 64 << 10, true, 3).status();
  EXPECT_EQ(uneven.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(uneven.message(), "multiple of 3 ranks")) << uneven;
  const FloorCase two{Collective::kBroadcast, 2, false};
  EXPECT_EQ(MeasureWorkFloor(two, kBytes, true, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureWorkFloor(two, 0, true, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  ExpectNoChildren();
}

TEST(WorkFloorTest, DeadlineKillsAndNamesTheRanks) {
  // 64 MiB, far more iterations than 300 ms allow.
  const FloorCase c{Collective::kAllGather, 2, false};
  absl::Status late =
      MeasureWorkFloor(c, size_t{64} << 20, true, 1 << 20, absl::Milliseconds(300)).status();
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_TRUE(absl::StrContains(late.message(), "rank(s) 0, 1 of 2 still running")) << late;
  EXPECT_TRUE(absl::StrContains(late.message(), "killed")) << late;
  ExpectNoChildren();
}

TEST(WorkFloorTest, SweepSkipsRankCountsThatDoNotDivide) {
  // 64 KiB splits into 2 ranks of fp32 but not 3.
  std::vector<Row> rows = MeasureFloorSweep({Collective::kAllGather, Collective::kBroadcast},
                                            {2, 3}, 64 << 10, true, false, 2);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].collective, kPointToPointFloorName);
  EXPECT_EQ(rows[1].collective, "floor_all_gather");
  EXPECT_EQ(rows[2].collective, "floor_broadcast");
  for (const Row& row : rows) {
    EXPECT_EQ(row.ranks, 2);
    EXPECT_EQ(row.bytes, size_t{64} << 10);
    EXPECT_GT(row.busbw_gbps, 0);
  }
  ExpectNoChildren();
}

}  // namespace
}  // namespace collective_bench
