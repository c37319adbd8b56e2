// File: tests/fsdp/text/corpus_split_test.cc
//
// The train/validation split: chunks partition the text, the held-out ones
// are spread evenly at the requested share, the training text is exactly
// the training chunks in the seeded order, and the same input gives the
// same split every time.
#include "fsdp/text/corpus_split.h"

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "fsdp/text/corpus.h"
#include "gtest/gtest.h"

namespace fsdp::text {
namespace {

std::string Lines(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int len = static_cast<int>(rng() % 120);
    for (int j = 0; j < len; ++j) out += static_cast<char>('a' + rng() % 26);
    out += '\n';
  }
  return out;
}

TEST(CorpusSplitTest, DisjointCompleteAndDeterministic) {
  const std::string text = Lines(20000, 3);
  absl::StatusOr<CorpusSplit> split = SplitCorpus(text, 0.1);
  ASSERT_TRUE(split.ok()) << split.status();
  int64_t next = 0;
  int64_t val_chunks = 0;
  std::string val;
  std::set<int64_t> train_chunks;
  for (size_t i = 0; i < split->chunks.size(); ++i) {
    const auto& chunk = split->chunks[i];
    EXPECT_EQ(chunk.begin, next);  // contiguous, no gaps, no overlap
    EXPECT_GT(chunk.end, chunk.begin);
    if (chunk.end < static_cast<int64_t>(text.size())) {
      EXPECT_EQ(text[chunk.end - 1], '\n');
    }
    next = chunk.end;
    if (chunk.val) {
      ++val_chunks;
      val += text.substr(chunk.begin, chunk.end - chunk.begin);
    } else {
      train_chunks.insert(static_cast<int64_t>(i));
    }
  }
  EXPECT_EQ(next, static_cast<int64_t>(text.size()));
  EXPECT_EQ(split->val, val);
  // Every training chunk exactly once, in train_order, and the train text is them.
  std::set<int64_t> ordered(split->train_order.begin(), split->train_order.end());
  EXPECT_EQ(ordered, train_chunks);
  EXPECT_EQ(split->train_order.size(), train_chunks.size());
  std::string train;
  for (int64_t i : split->train_order) {
    train += text.substr(split->chunks[i].begin, split->chunks[i].end - split->chunks[i].begin);
  }
  EXPECT_EQ(split->train, train);
  EXPECT_EQ(split->train.size() + split->val.size(), text.size());
  EXPECT_FALSE(std::is_sorted(split->train_order.begin(), split->train_order.end()));
  // floor((i + 1) f) > floor(i f): exactly floor(n f) held out, one in ten.
  EXPECT_EQ(val_chunks, static_cast<int64_t>(split->chunks.size() / 10));
  for (size_t i = 0; i + 10 <= split->chunks.size(); i += 10) {
    int in_window = 0;
    for (size_t j = i; j < i + 10; ++j) in_window += split->chunks[j].val;
    EXPECT_EQ(in_window, 1) << "chunks " << i << ".." << i + 9;
  }
  absl::StatusOr<CorpusSplit> again = SplitCorpus(text, 0.1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->train, split->train);
  EXPECT_EQ(again->val, split->val);
  EXPECT_EQ(again->train_order, split->train_order);
  absl::StatusOr<CorpusSplit> unshuffled = SplitCorpus(text, 0.1, 2048, /*shuffle_seed=*/0);
  ASSERT_TRUE(unshuffled.ok());
  EXPECT_TRUE(std::is_sorted(unshuffled->train_order.begin(), unshuffled->train_order.end()));
  EXPECT_EQ(unshuffled->val, split->val);
}

TEST(CorpusSplitTest, FortunesSplitHoldsOutAboutTenPercent) {
  absl::StatusOr<Corpus> corpus = ReadCorpus("/usr/share/games/fortunes");
  ASSERT_TRUE(corpus.ok()) << corpus.status() << " (run tools/setup.sh)";
  absl::StatusOr<CorpusSplit> split = SplitCorpus(corpus->text, 0.1);
  ASSERT_TRUE(split.ok());
  const double share = static_cast<double>(split->val.size()) / corpus->text.size();
  EXPECT_GT(share, 0.08);
  EXPECT_LT(share, 0.12);
}

TEST(CorpusSplitTest, RefusesWhatCannotSplit) {
  EXPECT_FALSE(SplitCorpus("some text\n", 0.0).ok());
  EXPECT_FALSE(SplitCorpus("some text\n", 1.0).ok());
  absl::StatusOr<CorpusSplit> tiny = SplitCorpus("one short line\n", 0.1);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("give more text"), std::string::npos) << tiny.status();
}

}  // namespace
}  // namespace fsdp::text
