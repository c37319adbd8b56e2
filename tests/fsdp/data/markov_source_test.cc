// File: tests/fsdp/data/markov_source_test.cc
#include "fsdp/data/markov_source.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

TEST(MarkovTokenSourceTest, SequencesAreDeterministicRandomAccessAndSeeded) {
  auto a = MarkovTokenSource::Create(256, 1);
  auto b = MarkovTokenSource::Create(256, 1);
  auto c = MarkovTokenSource::Create(256, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<int32_t> x(65), y(65), z(65);
  ASSERT_TRUE((*a)->ReadSequence(12345, absl::MakeSpan(x)).ok());
  ASSERT_TRUE((*b)->ReadSequence(12345, absl::MakeSpan(y)).ok());
  ASSERT_TRUE((*c)->ReadSequence(12345, absl::MakeSpan(z)).ok());
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  ASSERT_TRUE((*a)->ReadSequence(12346, absl::MakeSpan(y)).ok());
  EXPECT_NE(x, y);
  // A shorter read is a prefix of a longer one.
  std::vector<int32_t> prefix(10);
  ASSERT_TRUE((*a)->ReadSequence(12345, absl::MakeSpan(prefix)).ok());
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), x.begin()));
  EXPECT_EQ((*a)->ReadSequence(-1, absl::MakeSpan(x)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MarkovTokenSourceTest, TransitionsFollowTheChainWithTheStatedProbabilities) {
  const int vocab = 16;
  auto source = MarkovTokenSource::Create(vocab, 7, 4);
  ASSERT_TRUE(source.ok());
  std::map<std::pair<int, int>, int> pair_counts;
  std::vector<int> from_counts(vocab, 0);
  std::vector<int32_t> seq(101);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE((*source)->ReadSequence(i, absl::MakeSpan(seq)).ok());
    for (size_t t = 0; t + 1 < seq.size(); ++t) {
      ASSERT_GE(seq[t], 0);
      ASSERT_LT(seq[t], vocab);
      ASSERT_GT((*source)->TransitionProbability(seq[t], seq[t + 1]), 0.0)
          << seq[t] << " -> " << seq[t + 1] << " is not an edge of the chain";
      ++pair_counts[{seq[t], seq[t + 1]}];
      ++from_counts[seq[t]];
    }
  }
  for (const auto& [pair, count] : pair_counts) {
    const double expected = (*source)->TransitionProbability(pair.first, pair.second);
    const double n = from_counts[pair.first];
    ASSERT_GT(n, 1000);
    EXPECT_NEAR(count / n, expected, 5 * std::sqrt(expected * (1 - expected) / n) + 1e-3);
  }
  // Entropy of (1/2, 1/4, 1/8, 1/8), by hand.
  EXPECT_NEAR((*source)->EntropyNats(), 1.75 * std::log(2.0), 1e-12);
  EXPECT_LT((*source)->EntropyNats(), std::log(double(vocab)));
}

TEST(MarkovTokenSourceTest, RejectsBadParameters) {
  EXPECT_EQ(MarkovTokenSource::Create(0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MarkovTokenSource::Create(3, 1, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MarkovTokenSource::Create(3, 1, 3).ok());
}

}  // namespace
}  // namespace fsdp
