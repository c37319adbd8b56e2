// File: tests/integration/comm/train_gpt_hang_test.cc
//
// The case that motivated the hang detector, end to end: train_gpt at 4
// ranks through its built-in launcher, rank 3 stopped with SIGSTOP in the
// middle of training. Before, the others waited out --comm_timeout_s and the
// launcher then named "rank 2 exited with code 1 (the first rank to fail)".
// Now the job must end within the hang bound (plus the launcher's teardown)
// and name rank 3, hung, as the root cause.
//
// Quiet failures (issue 37): the output holds that root-cause line and none
// of UCX's warnings about the wreck (unmatched messages, requests not
// returned at teardown: comm/ucx/ucx_log_filter.h); that a healthy warning
// still shows is tested in tests/comm/ucx/ucx_log_filter_test.cc.
//
// Usage (Bazel passes it): train_gpt_hang_test <path of train_gpt>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace comm_test {
namespace {

std::string g_train_gpt;

constexpr int kHangBoundS = 3;

TEST(TrainGptHang, StoppedRankIsNamedAsTheRootCauseWithinTheBound) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string metrics = dir + "/hang.jsonl";
  const std::string log = dir + "/hang.log";
  // A previous run's metrics would make the wait below stop rank 3 at once.
  unlink(metrics.c_str());
  const pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    (void)out;
    dup2(fileno(stdout), fileno(stderr));
    unsetenv("FSDP_UCX_LOG_AFTER_FAILURE");
    execl(g_train_gpt.c_str(), g_train_gpt.c_str(), "--nproc=4", "--steps=100000",
          "--threads=1", "--strategy=full_shard", ("--metrics_out=" + metrics).c_str(),
          "--comm_timeout_s=60", absl::StrCat("--hang_timeout_s=", kHangBoundS).c_str(),
          nullptr);
    _exit(127);
  }
  // Training under way, then stop rank 3.
  const absl::Time give_up = absl::Now() + absl::Seconds(90);
  pid_t rank3 = -1;
  while (absl::Now() < give_up && (rank3 < 0 || fsdp_test::CountLines(metrics) < 3)) {
    if (rank3 < 0) rank3 = fsdp_test::RankPid(fsdp_test::ChildPids(job), 3);
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (rank3 < 0 || fsdp_test::CountLines(metrics) < 3) {
    kill(job, SIGKILL);  // the ranks die with it (PR_SET_PDEATHSIG)
    waitpid(job, nullptr, 0);
    FAIL() << "training never got under way:\n" << fsdp_test::ReadWholeFile(log);
  }
  const absl::Time stopped_at = absl::Now();
  ASSERT_EQ(kill(rank3, SIGSTOP), 0);

  // The job must end by itself: the bound, the survivors' exit, the
  // launcher's SIGKILL to the stopped rank, slack for load.
  const absl::Duration limit = absl::Seconds(kHangBoundS + 15);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(job, &status, WNOHANG)) == 0 && absl::Now() - stopped_at < limit) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const absl::Duration took = absl::Now() - stopped_at;
  if (done == 0) {
    kill(job, SIGKILL);
    waitpid(job, &status, 0);
  }
  // Whatever happened, rank 3 must not outlive the test.
  kill(rank3, SIGKILL);
  const std::string output = fsdp_test::ReadWholeFile(log);
  ASSERT_NE(done, 0) << "train_gpt still running " << limit << " after rank 3 was stopped:\n"
                     << output;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << "status " << status;
  EXPECT_LT(took, limit);
  EXPECT_TRUE(absl::StrContains(output, "train_gpt: rank 3 is hung: no heartbeat")) << output;
  EXPECT_TRUE(absl::StrContains(output, "the root cause; rank ")) << output;
  EXPECT_TRUE(absl::StrContains(output, "[launcher] rank 3 was stopped by signal 19")) << output;
  // Not the collective timeout.
  EXPECT_FALSE(absl::StrContains(output, "waited 60")) << output;
  // Nothing UCX said after the transports stopped shows.
  EXPECT_EQ(fsdp_test::UcxWarningLines(output), std::vector<std::string>()) << output;
  std::printf("train_gpt ended %s after rank 3 was stopped\n",
              absl::FormatDuration(took).c_str());
}

}  // namespace
}  // namespace comm_test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <path of train_gpt>\n", argv[0]);
    return 2;
  }
  comm_test::g_train_gpt = argv[1];
  return RUN_ALL_TESTS();
}
