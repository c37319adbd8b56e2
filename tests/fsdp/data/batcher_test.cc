// File: tests/fsdp/data/batcher_test.cc
#include "fsdp/data/batcher.h"

#include <set>
#include <vector>

#include "fsdp/data/markov_source.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

// The global batch read directly: sequences g*GB .. (g+1)*GB - 1, as
// (inputs, targets) rows.
std::vector<std::vector<int32_t>> DirectGlobalBatch(const TokenSource& source, int64_t g,
                                                    int global_batch, int seq_len) {
  std::vector<std::vector<int32_t>> rows;
  std::vector<int32_t> seq(seq_len + 1);
  for (int s = 0; s < global_batch; ++s) {
    EXPECT_TRUE(source.ReadSequence(g * global_batch + s, absl::MakeSpan(seq)).ok());
    rows.push_back(seq);
  }
  return rows;
}

TEST(BatcherTest, SlicesOverMicroStepsAndRanksConcatenateToTheGlobalBatchForAnyWorldSize) {
  auto source = MarkovTokenSource::Create(50, 3);
  ASSERT_TRUE(source.ok());
  const int global_batch = 8, seq_len = 6;
  struct Shape { int world_size, micro_batch, accumulation; };
  const Shape shapes[] = {{1, 8, 1}, {1, 2, 4}, {2, 2, 2}, {2, 4, 1}, {4, 1, 2}, {4, 2, 1}};
  for (int64_t g : {0, 1, 5}) {
    const auto expected = DirectGlobalBatch(**source, g, global_batch, seq_len);
    for (const Shape& shape : shapes) {
      std::vector<std::vector<int32_t>> concatenated;
      for (int k = 0; k < shape.accumulation; ++k) {
        for (int r = 0; r < shape.world_size; ++r) {
          const BatchLayout layout{global_batch, seq_len, shape.world_size, r,
                                   shape.micro_batch, shape.accumulation};
          absl::StatusOr<Batch> batch = MakeMicroBatch(**source, layout, g, k);
          ASSERT_TRUE(batch.ok()) << batch.status();
          ASSERT_EQ(batch->batch_size, shape.micro_batch);
          for (int b = 0; b < batch->batch_size; ++b) {
            std::vector<int32_t> row(batch->inputs.begin() + b * seq_len,
                                     batch->inputs.begin() + (b + 1) * seq_len);
            row.push_back(batch->targets[(b + 1) * seq_len - 1]);
            // Targets are the inputs shifted by one.
            for (int t = 0; t + 1 < seq_len; ++t)
              EXPECT_EQ(batch->targets[b * seq_len + t], batch->inputs[b * seq_len + t + 1]);
            concatenated.push_back(row);
          }
        }
      }
      EXPECT_EQ(concatenated, expected)
          << "world_size " << shape.world_size << " micro_batch " << shape.micro_batch;
    }
  }
}

TEST(BatcherTest, RanksReadDisjointSequences) {
  const BatchLayout base{12, 4, 3, 0, 2, 2};
  std::set<int64_t> seen;
  for (int64_t g = 0; g < 3; ++g)
    for (int k = 0; k < 2; ++k)
      for (int r = 0; r < 3; ++r) {
        BatchLayout layout = base;
        layout.rank = r;
        const int64_t first = FirstSequenceIndex(layout, g, k);
        for (int b = 0; b < 2; ++b) EXPECT_TRUE(seen.insert(first + b).second);
      }
  EXPECT_EQ(seen.size(), 36u);
  EXPECT_EQ(*seen.rbegin(), 35);
}

TEST(BatcherTest, InvalidLayoutsExplainTheFix) {
  auto source = MarkovTokenSource::Create(50, 3);
  ASSERT_TRUE(source.ok());
  absl::Status s = ValidateBatchLayout(BatchLayout{16, 4, 2, 0, 2, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("use accumulation_steps=4"), std::string::npos) << s;
  s = ValidateBatchLayout(BatchLayout{10, 4, 4, 0, 1, 2});
  EXPECT_NE(s.message().find("multiple of world_size * micro_batch = 4"), std::string::npos) << s;
  EXPECT_EQ(ValidateBatchLayout(BatchLayout{8, 4, 2, 2, 2, 2}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeMicroBatch(**source, BatchLayout{8, 4, 2, 0, 2, 2}, 0, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fsdp
