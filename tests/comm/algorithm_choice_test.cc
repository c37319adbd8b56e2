// File: tests/comm/algorithm_choice_test.cc
//
// comm/algorithm_choice.h: what kAuto resolves to, and that an explicit
// choice is always taken as given.
#include "comm/algorithm_choice.h"

#include "gtest/gtest.h"

namespace comm {
namespace {

constexpr size_t kSmall = 64 * 1024;

TEST(AlgorithmChoiceTest, AutoTakesTheLatencyAlgorithmUpToTheThreshold) {
  EXPECT_TRUE(UseLatencyAlgorithm(Algorithm::kAuto, 0, kSmall));
  EXPECT_TRUE(UseLatencyAlgorithm(Algorithm::kAuto, kSmall, kSmall));
  EXPECT_FALSE(UseLatencyAlgorithm(Algorithm::kAuto, kSmall + 1, kSmall));
}

TEST(AlgorithmChoiceTest, ExplicitChoicesWinOverSize) {
  EXPECT_TRUE(UseLatencyAlgorithm(Algorithm::kLatency, size_t{1} << 30, kSmall));
  EXPECT_FALSE(UseLatencyAlgorithm(Algorithm::kRing, 8, kSmall));
  EXPECT_FALSE(UseLatencyAlgorithm(Algorithm::kDirect, 8, kSmall));
  // kDirect is direct even across hosts and in large groups; kRing never.
  EXPECT_TRUE(UseDirectAlgorithm(Algorithm::kDirect, 64, 4, /*on_one_host=*/false));
  EXPECT_FALSE(UseDirectAlgorithm(Algorithm::kRing, 2, 4, /*on_one_host=*/true));
  EXPECT_FALSE(UseDirectAlgorithm(Algorithm::kLatency, 2, 4, /*on_one_host=*/true));
}

TEST(AlgorithmChoiceTest, AutoIsDirectOnlyInSmallGroupsOnOneHost) {
  for (int n : {2, 3, 4}) {
    EXPECT_TRUE(UseDirectAlgorithm(Algorithm::kAuto, n, 4, /*on_one_host=*/true)) << n;
    EXPECT_FALSE(UseDirectAlgorithm(Algorithm::kAuto, n, 4, /*on_one_host=*/false)) << n;
  }
  EXPECT_FALSE(UseDirectAlgorithm(Algorithm::kAuto, 5, 4, /*on_one_host=*/true));
  EXPECT_FALSE(UseDirectAlgorithm(Algorithm::kAuto, 2, 0, /*on_one_host=*/true));
}

}  // namespace
}  // namespace comm
