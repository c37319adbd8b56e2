// File: tests/integration/comm/grid_test.cc
//
// Runs collective_worker (the whole grid, collectives in flight together, and
// sub-communicators) as `world_size` real processes through the launcher
// library (comm/launcher/launcher.h), the way a user would start a job. The
// launcher returns an error naming the first rank that exited non-zero; each
// rank's "[rank k] FAIL ..." / "STATUS ..." lines in the test log say why.
//
// Usage (Bazel passes it):
//   grid_test <path of collective_worker> <world size> [extra worker flags...]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/launcher/launcher.h"
#include "gtest/gtest.h"

namespace comm_test {
namespace {

std::string g_worker_path;
int g_world_size = 0;
std::vector<std::string> g_worker_flags;

TEST(CollectiveGridTest, EveryCollectiveMatchesTheReference) {
  comm::LaunchOptions options;
  options.nproc = g_world_size;
  options.argv = {g_worker_path, "--scenario=all", "--timeout_ms=60000"};
  options.argv.insert(options.argv.end(), g_worker_flags.begin(), g_worker_flags.end());
  absl::Time start = absl::Now();
  absl::StatusOr<int> result = comm::LaunchLocalRanks(options);
  std::printf("world size %d: grid finished in %s\n", g_world_size,
              absl::FormatDuration(absl::Now() - start).c_str());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, 0);
}

}  // namespace
}  // namespace comm_test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 3 || std::atoi(argv[2]) < 1) {
    std::fprintf(stderr,
                 "usage: %s <path of collective_worker> <world size> [worker flags...]\n",
                 argv[0]);
    return 2;
  }
  comm_test::g_worker_path = argv[1];
  comm_test::g_world_size = std::atoi(argv[2]);
  comm_test::g_worker_flags.assign(argv + 3, argv + argc);
  return RUN_ALL_TESTS();
}
