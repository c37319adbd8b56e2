// File: tests/fsdp/report/budget_test.cc
//
// Byte-size parsing, and the budget check's verdicts and messages: the
// boundary is exact, the message names the dominant category (found here
// independently), and every suggested alternative really fits.
#include "fsdp/report/budget.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/report/byte_size.h"
#include "fsdp/report/gpt_family.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

TEST(ByteSizeTest, ParsesUnitsAndNumbers) {
  EXPECT_EQ(*ParseByteSize("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("500MB"), 500000000);
  EXPECT_EQ(*ParseByteSize("500 mb"), 500000000);
  EXPECT_EQ(*ParseByteSize("1.5e9"), 1500000000);
  EXPECT_EQ(*ParseByteSize("64KiB"), 65536);
  EXPECT_EQ(*ParseByteSize("3k"), 3072);
  EXPECT_EQ(*ParseByteSize("1.5G"), int64_t{3} << 29);
  EXPECT_EQ(*ParseByteSize("7"), 7);
  EXPECT_EQ(*ParseByteSize("12B"), 12);
  EXPECT_EQ(*ParseByteSize("1TB"), 1000000000000);
  for (const char* bad : {"", "GiB", "-1GiB", "2 parsecs", "inf", "1e30", "nanMB"}) {
    absl::StatusOr<int64_t> parsed = ParseByteSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("2GiB"), std::string::npos)
        << "the error should show accepted forms: " << parsed.status().message();
  }
  EXPECT_EQ(FormatGigabytes(1917540352), "1.92 GB");
}

MemoryPoint ExamplePoint() {
  MemoryPoint point;
  point.config = GptFamilyConfig(256, 2048, 128);
  point.micro_batch = 2;
  point.strategy = proto::NO_SHARD;
  point.ranks = 2;
  return point;
}

TEST(BudgetTest, TheBoundaryIsExact) {
  const MemoryPoint point = ExamplePoint();
  const int64_t total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckFitsBudget(point, total).ok());
  EXPECT_EQ(CheckFitsBudget(point, total - 1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CheckFitsBudget(point, 0).code(), absl::StatusCode::kInvalidArgument);
}

// "full_shard on 4 ranks (1.23 MiB)" -> strategy and ranks.
void ParseSuggestion(const std::string& text, std::string* strategy, int* ranks) {
  std::vector<std::string> words = absl::StrSplit(text, ' ', absl::SkipEmpty());
  ASSERT_GE(words.size(), 4u) << text;
  *strategy = words[0];
  ASSERT_EQ(words[1], "on") << text;
  ASSERT_TRUE(absl::SimpleAtoi(words[2], ranks)) << text;
}

TEST(BudgetTest, OverBudgetNamesTheDominantCategoryAndAlternativesThatFit) {
  const MemoryPoint point = ExamplePoint();
  const RankMemoryEstimate estimate = *EstimateRankMemory(point);
  const int64_t budget = estimate.total_bytes() / 2;
  const absl::Status status = CheckFitsBudget(point, budget);
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  const std::string message(status.message());
  // The dominant category, found independently: for no_shard fp32 Adam the
  // optimizer state (8 bytes/param) outweighs parameters and gradients
  // (4 each) as long as activations are small, which they are here.
  ASSERT_GT(estimate.optimizer_state_bytes, estimate.activation_bytes);
  EXPECT_NE(message.find("the largest part is optimizer_state"), std::string::npos) << message;
  EXPECT_NE(message.find("no_shard fp32 on 2 ranks"), std::string::npos) << message;
  EXPECT_NE(message.find("over the budget of " + FormatBytes(budget)), std::string::npos)
      << message;
  EXPECT_NE(message.find(FormatBytes(estimate.total_bytes() - budget)), std::string::npos)
      << "should say how much over: " << message;
  // Every suggestion fits when predicted again.
  const size_t at = message.find("Would fit: ");
  ASSERT_NE(at, std::string::npos) << message;
  absl::string_view list = absl::string_view(message).substr(at + 11);
  absl::ConsumeSuffix(&list, ".");
  int checked = 0;
  for (absl::string_view item : absl::StrSplit(list, "), ")) {
    std::string strategy;
    int ranks = 0;
    ParseSuggestion(std::string(item), &strategy, &ranks);
    MemoryPoint alternative = point;
    alternative.strategy = *plan::ParseShardingStrategy(strategy);
    alternative.ranks = ranks;
    EXPECT_LE(EstimateRankMemory(alternative)->total_bytes(), budget) << item;
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

TEST(BudgetTest, NothingFitsWhenActivationsAloneExceedTheBudget) {
  MemoryPoint point = ExamplePoint();
  point.micro_batch = 64;  // activations dominate and do not shard
  const RankMemoryEstimate estimate = *EstimateRankMemory(point);
  const int64_t budget = (estimate.activation_bytes + estimate.workspace_bytes) / 2;
  const absl::Status status = CheckFitsBudget(point, budget);
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  const std::string message(status.message());
  EXPECT_NE(message.find("No strategy fits"), std::string::npos) << message;
  EXPECT_NE(message.find("reduce micro_batch or seq_len"), std::string::npos) << message;
  EXPECT_NE(message.find("the largest part is activations"), std::string::npos) << message;
}

TEST(BudgetTest, TrainOptionsAreCheckedAsTheirMemoryPoint) {
  TrainOptions options;
  options.nproc = 2;
  options.layers = 8;
  options.d_model = 256;
  options.heads = 4;
  options.vocab = 2048;
  options.seq_len = 128;
  options.micro_batch = 2;
  MemoryPoint point = ExamplePoint();
  point.config.heads = 4;
  const int64_t total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckTrainingFitsBudget(options, total).ok());
  const absl::Status over = CheckTrainingFitsBudget(options, total - 1);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  options.strategy = Strategy::kHybridShard;
  options.group_size = 1;
  point.strategy = proto::HYBRID_SHARD;
  point.group_size = 1;
  const int64_t hybrid_total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckTrainingFitsBudget(options, hybrid_total).ok());
  EXPECT_FALSE(CheckTrainingFitsBudget(options, hybrid_total - 1).ok());
  // --mixed_precision is the runtime's bf16-on-the-wire mode.
  options.mixed_precision = true;
  point.precision = Precision::kBf16Wire;
  const int64_t wire_total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckTrainingFitsBudget(options, wire_total).ok());
  const absl::Status over_wire = CheckTrainingFitsBudget(options, wire_total - 1);
  EXPECT_EQ(over_wire.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_wire.message().find("bf16_wire"), std::string::npos) << over_wire.message();
}

TEST(BudgetTest, LargestFittingFamilyModelFitsAndTheNextDoesNot) {
  for (proto::ShardingStrategy strategy : {proto::NO_SHARD, proto::FULL_SHARD}) {
    MemoryPoint point = ExamplePoint();
    point.strategy = strategy;
    point.ranks = 8;
    const int64_t budget = int64_t{256} << 20;
    absl::StatusOr<std::optional<FittingModel>> fit = LargestFittingFamilyModel(point, budget);
    ASSERT_TRUE(fit.ok()) << fit.status();
    ASSERT_TRUE(fit->has_value());
    const FittingModel& largest = **fit;
    EXPECT_LE(largest.estimate.total_bytes(), budget);
    MemoryPoint next = point;
    next.config = GptFamilyConfig(largest.config.d_model + kGptFamilyWidthStep, 2048, 128);
    const RankMemoryEstimate next_estimate = *EstimateRankMemory(next);
    EXPECT_GT(next_estimate.total_bytes(), budget);
    EXPECT_EQ(largest.next_num_params, next_estimate.num_params);
  }
  MemoryPoint point = ExamplePoint();
  absl::StatusOr<std::optional<FittingModel>> none = LargestFittingFamilyModel(point, 1000);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace report
}  // namespace fsdp
