// File: tests/fsdp/run/sampler_test.cc
//
// The next-token choice: greedy takes the largest logit (lowest id on
// ties); top-k never leaves the k largest; the draws follow the softmax at
// the temperature (a frequency check against the computed probabilities).
#include "fsdp/run/sampler.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

TEST(ChooseTokenTest, GreedyTakesTheLargestLowestIdOnTies) {
  SampleOptions greedy;
  greedy.temperature = 0.0;
  EXPECT_EQ(ChooseToken(std::vector<float>{0.1f, 2.0f, -1.0f, 2.0f}, greedy, 0.99), 1);
  EXPECT_EQ(ChooseToken(std::vector<float>{-3.0f, -4.0f}, greedy, 0.0), 0);
}

TEST(ChooseTokenTest, TopKStaysAmongTheKLargest) {
  SampleOptions options;
  options.temperature = 5.0;  // flat: every allowed token is likely
  options.top_k = 3;
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.5f, 2.9f, -1.0f};
  std::mt19937_64 rng(1);
  std::vector<int> seen(6, 0);
  for (int i = 0; i < 3000; ++i) {
    ++seen[ChooseToken(logits, options, std::uniform_real_distribution<double>(0, 1)(rng))];
  }
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[3], 0);
  EXPECT_GT(seen[4], 0);
  EXPECT_EQ(seen[0] + seen[2] + seen[5], 0);
}

TEST(ChooseTokenTest, DrawsFollowTheSoftmax) {
  SampleOptions options;
  options.temperature = 0.5;
  const std::vector<float> logits = {0.0f, 0.5f, 1.0f};
  std::vector<double> p(3);
  double sum = 0;
  for (int v = 0; v < 3; ++v) sum += p[v] = std::exp(logits[v] / 0.5);
  // Draws on an even grid of [0, 1): the shares equal the probabilities to 1/n.
  const int n = 10000;
  std::vector<int> seen(3, 0);
  for (int i = 0; i < n; ++i) ++seen[ChooseToken(logits, options, (i + 0.5) / n)];
  for (int v = 0; v < 3; ++v) EXPECT_NEAR(seen[v] / static_cast<double>(n), p[v] / sum, 2.0 / n);
}

TEST(SampleOptionsTest, RefusesNegatives) {
  SampleOptions options;
  options.temperature = -1;
  EXPECT_FALSE(ValidateSampleOptions(options).ok());
  options = SampleOptions();
  options.top_k = -2;
  EXPECT_FALSE(ValidateSampleOptions(options).ok());
  EXPECT_TRUE(ValidateSampleOptions(SampleOptions()).ok());
}

}  // namespace
}  // namespace fsdp
