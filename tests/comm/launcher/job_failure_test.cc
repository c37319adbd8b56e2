// File: tests/comm/launcher/job_failure_test.cc
//
// The launcher's wording of a failed job, rule by rule
// (comm/launcher/job_failure.h), without processes; launcher_test checks the
// same messages end to end.
#include "comm/launcher/job_failure.h"

#include <signal.h>

#include <vector>

#include "gtest/gtest.h"

namespace comm {
namespace {

JobFailure RankExited(int rank, int code) {
  JobFailure failure;
  failure.first_failed = rank;
  failure.first_failure = "rank " + std::to_string(rank) + " exited with code " +
                          std::to_string(code);
  failure.exit_code = code;
  return failure;
}

FailureReport Report(int culprit, int reporter, const std::string& message) {
  return FailureReport{culprit, "hung", reporter, message};
}

TEST(JobFailureTest, TheFirstReportedCulpritWithEveryRankThatReportedIt) {
  int culprit = -1;
  EXPECT_EQ(RootCause({}, &culprit), "");
  EXPECT_EQ(culprit, -1);
  const std::vector<FailureReport> reports = {
      Report(3, 0, "rank 3 is hung: x"), Report(3, 2, "rank 3 is hung: y"),
      Report(1, 1, "rank 1 died"), Report(3, 0, "rank 3 is hung: again"),
      Report(3, 1, "rank 3 is hung: z")};
  EXPECT_EQ(RootCause(reports, &culprit), "rank 3 is hung: x (reported by ranks 0, 2, 1)");
  EXPECT_EQ(culprit, 3);
  EXPECT_EQ(RootCause({Report(2, 0, "rank 2 died")}, &culprit),
            "rank 2 died (reported by rank 0)");
  EXPECT_EQ(culprit, 2);
}

TEST(JobFailureTest, AReportedCulpritOtherThanTheFirstToExitIsTheRootCause) {
  EXPECT_EQ(DescribeJobFailure(RankExited(2, 3), {Report(3, 0, "rank 3 is hung: x")}),
            "rank 3 is hung: x (reported by rank 0): the root cause; rank 2 exited with code 3 "
            "(the first rank to exit); the other ranks were stopped");
}

TEST(JobFailureTest, AReportedCulpritThatFailedFirstIsNamedOnce) {
  EXPECT_EQ(DescribeJobFailure(RankExited(3, 1), {Report(3, 0, "rank 3 died")}),
            "rank 3 exited with code 1 (the first rank to fail; rank 3 died (reported by rank "
            "0)); the other ranks were stopped");
}

TEST(JobFailureTest, WithoutReportsAStoppedRankIsTheLikelyCause) {
  JobFailure failure = RankExited(0, 6);
  failure.stopped_at_failure = {{2, 19}, {1, 19}};
  const std::string message = DescribeJobFailure(failure, {});
  EXPECT_EQ(message.find("rank 2 was stopped (signal 19, "), 0u) << message;
  EXPECT_NE(message.find(") when rank 0 exited with code 6: the stopped rank is the likely root "
                         "cause; the other ranks were stopped"),
            std::string::npos)
      << message;
  // Reports outrank a stopped rank.
  EXPECT_EQ(DescribeJobFailure(failure, {Report(1, 2, "rank 1 died")}).find("rank 1 died"), 0u);
}

TEST(JobFailureTest, OtherwiseTheFirstRankToFail) {
  EXPECT_EQ(DescribeJobFailure(RankExited(1, 4), {}),
            "rank 1 exited with code 4 (the first rank to fail); the other ranks were stopped");
}

TEST(JobFailureTest, TheBlamedRankFollowsTheSameRule) {
  EXPECT_EQ(BlamedRank(RankExited(2, 1), {Report(3, 0, "rank 3 is hung: x")}), 3);
  JobFailure stopped = RankExited(0, 6);
  stopped.stopped_at_failure.push_back({1, SIGSTOP});
  EXPECT_EQ(BlamedRank(stopped, {}), 1);
  EXPECT_EQ(BlamedRank(stopped, {Report(2, 0, "rank 2 died")}), 2);
  EXPECT_EQ(BlamedRank(RankExited(1, 4), {}), 1);
}

}  // namespace
}  // namespace comm
