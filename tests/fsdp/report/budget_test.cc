// File: tests/fsdp/report/budget_test.cc
//
// Byte-size parsing, and the budget check's verdicts and messages: the
// boundary is exact, the message names the dominant category (found here
// independently), and every suggested alternative really fits.
#include "fsdp/report/budget.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/report/activation_mode.h"
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

// The suggestions after "Would fit: ", split as the message joins them.
std::vector<std::string> Suggestions(const std::string& message) {
  const size_t at = message.find("Would fit: ");
  if (at == std::string::npos) return {};
  absl::string_view list = absl::string_view(message).substr(at + 11);
  list = list.substr(0, list.find(")."));
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(list, "), ")) items.emplace_back(item);
  return items;
}

TEST(BudgetTest, SuggestionsSayWhenTheirGlobalBatchIsBeyondTheNoiseScale) {
  const MemoryPoint point = ExamplePoint();  // micro_batch 2 on 2 ranks
  const int64_t budget = EstimateRankMemory(point)->total_bytes() / 2;
  BatchScale batch;
  batch.accum = 3;
  batch.noise_scale = 13;  // between 2 x 3 x 2 = 12 and 2 x 3 x 4 = 24
  const std::string message(CheckFitsBudget(point, budget, batch).message());
  const std::vector<std::string> items = Suggestions(message);
  ASSERT_GE(items.size(), 2u) << message;
  int beyond = 0;
  for (const std::string& item : items) {
    std::string strategy;
    int ranks = 0;
    ParseSuggestion(item, &strategy, &ranks);
    const int64_t global_batch = int64_t{point.micro_batch} * batch.accum * ranks;
    const bool says_beyond = item.find("the noise scale of 13") != std::string::npos;
    EXPECT_EQ(says_beyond, global_batch > 13) << item;
    if (global_batch > 13) {
      EXPECT_NE(item.find(absl::StrCat("global batch ", global_batch)), std::string::npos) << item;
      ++beyond;
    }
  }
  ASSERT_GE(beyond, 1) << "the example should suggest more ranks: " << message;
  EXPECT_NE(message.find("Beyond the measured noise scale (13 sequences)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("lower micro_batch"), std::string::npos) << message;

  // Unknown, or larger than every suggested batch: nothing said.
  for (double noise_scale : {0.0, 1e9}) {
    batch.noise_scale = noise_scale;
    const std::string quiet(CheckFitsBudget(point, budget, batch).message());
    EXPECT_EQ(quiet.find("noise scale"), std::string::npos) << quiet;
    EXPECT_EQ(Suggestions(quiet).size(), items.size()) << quiet;
  }
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
  options.threads = 1;  // 0 would be this machine's CPUs per rank
  MemoryPoint point = ExamplePoint();
  point.config.heads = 4;
  const int64_t total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckTrainingFitsBudget(options, total).ok());
  const absl::Status over = CheckTrainingFitsBudget(options, total - 1);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  // Each compute thread holds a scratch for attention's heads (T x T floats
  // in fp32), and the check counts them.
  options.threads = 3;
  point.config.compute_threads = 3;
  const int64_t threaded_total = EstimateRankMemory(point)->total_bytes();
  EXPECT_EQ(threaded_total - total, 2 * 4 * int64_t{128} * 128);
  EXPECT_TRUE(CheckTrainingFitsBudget(options, threaded_total).ok());
  EXPECT_FALSE(CheckTrainingFitsBudget(options, threaded_total - 1).ok());
  options.threads = 1;
  point.config.compute_threads = 1;
  options.sharding.strategy = Strategy::kHybridShard;
  options.sharding.group_size = 1;
  point.strategy = proto::HYBRID_SHARD;
  point.group_size = 1;
  const int64_t hybrid_total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckTrainingFitsBudget(options, hybrid_total).ok());
  EXPECT_FALSE(CheckTrainingFitsBudget(options, hybrid_total - 1).ok());
  // --precision=bf16 is the report's mixed (2-byte gradients), and with
  // --reduce_dtype=fp32 its bf16.
  options.sharding.precision = *ParsePrecisionPolicy("bf16", "");
  point.precision = Precision::kMixed;
  const int64_t mixed_total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckTrainingFitsBudget(options, mixed_total).ok());
  const absl::Status over_mixed = CheckTrainingFitsBudget(options, mixed_total - 1);
  EXPECT_EQ(over_mixed.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_mixed.message().find("mixed"), std::string::npos) << over_mixed.message();
  options.sharding.precision = *ParsePrecisionPolicy("bf16", "fp32");
  point.precision = Precision::kBf16;
  const int64_t bf16_total = EstimateRankMemory(point)->total_bytes();
  EXPECT_GT(bf16_total, mixed_total);  // 4-byte gradients
  EXPECT_TRUE(CheckTrainingFitsBudget(options, bf16_total).ok());
  EXPECT_FALSE(CheckTrainingFitsBudget(options, bf16_total - 1).ok());
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

// "... --activation_checkpointing=every:2 --attention=flash (..." -> the mode.
ActivationMode ModeFromFlags(absl::string_view text) {
  ActivationMode mode;
  const size_t checkpointing = text.find("--activation_checkpointing=");
  if (checkpointing != absl::string_view::npos) {
    absl::string_view value = text.substr(checkpointing + 27);
    value = value.substr(0, value.find_first_of(" (,"));
    const absl::StatusOr<ActivationCheckpointing> parsed =
        ParseActivationCheckpointing(value, 1 << 20);
    EXPECT_TRUE(parsed.ok()) << text;
    mode.checkpoint_every = parsed.value_or(ActivationCheckpointing{}).checkpoint_every();
  }
  mode.flash_attention = text.find("--attention=flash") != absl::string_view::npos;
  return mode;
}

// no_shard on 2 ranks at seq_len 256, micro-batch 4: activations are about
// half. With a budget between the leanest mode's peak and the default's,
// the refusal lists strategies that fit and then the cheapest activation
// mode that fits on the same strategy and ranks; that mode fits when
// predicted again and every cheaper one in the ladder does not.
TEST(BudgetTest, OverBudgetNamesTheCheapestActivationModeThatFits) {
  MemoryPoint point = ExamplePoint();
  point.config.seq_len = 256;
  point.micro_batch = 4;
  const RankMemoryEstimate none = *EstimateRankMemory(point);
  MemoryPoint lean = point;
  ASSERT_TRUE(ApplyActivationMode({1, true}, lean.config).ok());
  const RankMemoryEstimate all_flash = *EstimateRankMemory(lean);
  ASSERT_LT(all_flash.total_bytes(), none.total_bytes() * 3 / 4);
  for (const int64_t budget : {(none.total_bytes() + all_flash.total_bytes()) / 2,
                               all_flash.total_bytes()}) {
    const absl::Status status = CheckFitsBudget(point, budget);
    ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    const std::string message(status.message());
    EXPECT_NE(message.find("activations none"), std::string::npos) << message;
    // At the midpoint some strategy fits as is; at the leanest mode's peak
    // the activations alone are over the budget, so none does.
    size_t at = message.find(" Or, with --");
    if (budget == all_flash.total_bytes()) {
      EXPECT_NE(message.find("No strategy fits"), std::string::npos) << message;
      at = message.find(" With --");
    } else {
      EXPECT_NE(message.find("Would fit: "), std::string::npos) << message;
    }
    ASSERT_NE(at, std::string::npos) << message;
    EXPECT_NE(message.find(", no_shard on 2 ranks would fit (", at), std::string::npos) << message;
    const ActivationMode named = ModeFromFlags(absl::string_view(message).substr(at));
    MemoryPoint suggested = point;
    ASSERT_TRUE(ApplyActivationMode(named, suggested.config).ok());
    EXPECT_LE(EstimateRankMemory(suggested)->total_bytes(), budget) << message;
    for (const ActivationMode& cheaper : ActivationModesByCost(point.config)) {
      if (cheaper == named) break;
      MemoryPoint other = point;
      ASSERT_TRUE(ApplyActivationMode(cheaper, other.config).ok());
      EXPECT_GT(EstimateRankMemory(other)->total_bytes(), budget)
          << ActivationModeName(cheaper) << " is cheaper and fits too: " << message;
    }
    if (budget == all_flash.total_bytes()) {
      EXPECT_EQ(ActivationModeName(named), "all+flash") << message;
    }
  }
}

// When other strategies fit but no activation mode makes this one fit, the
// message says what the leanest mode still needs: no_shard on 2 ranks at
// micro-batch 1 (model state dominates), with a budget just below what it
// needs under all+flash, at which full_shard (at least) fits.
TEST(BudgetTest, OverBudgetSaysWhatTheLeanestModeStillNeeds) {
  MemoryPoint point = ExamplePoint();
  point.micro_batch = 1;
  MemoryPoint lean = point;
  ASSERT_TRUE(ApplyActivationMode({1, true}, lean.config).ok());
  const int64_t lean_total = EstimateRankMemory(lean)->total_bytes();
  MemoryPoint full_shard = point;
  full_shard.strategy = proto::FULL_SHARD;
  ASSERT_LT(EstimateRankMemory(full_shard)->total_bytes(), lean_total - 1);
  const absl::Status status = CheckFitsBudget(point, lean_total - 1);
  const std::string message(status.message());
  EXPECT_NE(message.find("Would fit: "), std::string::npos) << message;
  EXPECT_NE(message.find("No activation mode makes no_shard on 2 ranks fit "
                         "(--activation_checkpointing=all --attention=flash still needs " +
                         FormatBytes(lean_total) + ")"),
            std::string::npos)
      << message;
}

// When no strategy fits with the default activations even on 65536 ranks,
// the activation mode that makes this strategy fit is named instead.
TEST(BudgetTest, NothingFitsWithoutCheckpointingButItWouldWithIt) {
  MemoryPoint point = ExamplePoint();
  point.micro_batch = 64;
  point.strategy = proto::FULL_SHARD;
  const RankMemoryEstimate none = *EstimateRankMemory(point);
  MemoryPoint lean = point;
  ASSERT_TRUE(ApplyActivationMode({1, true}, lean.config).ok());
  const int64_t budget = EstimateRankMemory(lean)->total_bytes();
  ASSERT_LT(budget, none.activation_bytes + none.workspace_bytes);
  const absl::Status status = CheckFitsBudget(point, budget);
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  const std::string message(status.message());
  EXPECT_NE(message.find("No strategy fits"), std::string::npos) << message;
  const size_t at = message.find(" With --");
  ASSERT_NE(at, std::string::npos) << message;
  EXPECT_NE(message.find(", full_shard on 2 ranks would fit (", at), std::string::npos)
      << message;
  MemoryPoint suggested = point;
  ASSERT_TRUE(
      ApplyActivationMode(ModeFromFlags(absl::string_view(message).substr(at)), suggested.config)
          .ok());
  EXPECT_LE(EstimateRankMemory(suggested)->total_bytes(), budget) << message;
}

TEST(BudgetTest, TrainOptionsCarryTheActivationMode) {
  TrainOptions options;
  options.nproc = 2;
  options.layers = 4;
  options.d_model = 128;
  options.heads = 2;
  options.vocab = 512;
  options.seq_len = 256;
  options.micro_batch = 4;
  options.activation_checkpointing = *ParseActivationCheckpointing("every:2", options.layers);
  options.attention = Attention::kFlash;
  const MemoryPoint point = *MemoryPointFromTrainOptions(options);
  EXPECT_EQ(point.config.activation_checkpoint_every, 2);
  EXPECT_TRUE(point.config.flash_attention);
  const int64_t total = EstimateRankMemory(point)->total_bytes();
  EXPECT_TRUE(CheckTrainingFitsBudget(options, total).ok());
  const absl::Status over = CheckTrainingFitsBudget(options, total - 1);
  EXPECT_NE(over.message().find("activations every:2+flash"), std::string::npos) << over;
}

// The longest sequence: it fits and one token more does not; checkpointing
// and flash attention make it longer, the ranks do not change the
// activations (so full_shard's grows only by the model state it shards).
TEST(BudgetTest, LargestFittingSeqLenFitsAndTheNextDoesNot) {
  MemoryPoint point = ExamplePoint();
  point.strategy = proto::FULL_SHARD;
  const int64_t budget = int64_t{512} << 20;
  int previous = 0;
  for (const ActivationMode& mode :
       {ActivationMode{0, false}, ActivationMode{0, true}, ActivationMode{1, true}}) {
    MemoryPoint with_mode = point;
    ASSERT_TRUE(ApplyActivationMode(mode, with_mode.config).ok());
    absl::StatusOr<std::optional<FittingSeqLen>> fit = LargestFittingSeqLen(with_mode, budget);
    ASSERT_TRUE(fit.ok()) << fit.status();
    ASSERT_TRUE(fit->has_value()) << ActivationModeName(mode);
    const FittingSeqLen& longest = **fit;
    EXPECT_FALSE(longest.at_search_limit);
    EXPECT_LE(longest.estimate.total_bytes(), budget);
    MemoryPoint next = with_mode;
    next.config.seq_len = longest.seq_len + 1;
    EXPECT_GT(EstimateRankMemory(next)->total_bytes(), budget) << ActivationModeName(mode);
    MemoryPoint same = with_mode;
    same.config.seq_len = longest.seq_len;
    EXPECT_EQ(EstimateRankMemory(same)->total_bytes(), longest.estimate.total_bytes());
    EXPECT_GT(longest.seq_len, previous) << ActivationModeName(mode);
    previous = longest.seq_len;
  }
  absl::StatusOr<std::optional<FittingSeqLen>> none = LargestFittingSeqLen(point, 1000);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// The family scan keeps the activation mode; under every:K members with
// fewer than K blocks cannot take it and are skipped.
TEST(BudgetTest, LargestFittingFamilyModelKeepsTheActivationMode) {
  MemoryPoint point = ExamplePoint();
  point.config.seq_len = 512;
  point.micro_batch = 8;
  point.strategy = proto::FULL_SHARD;
  point.ranks = 8;
  const int64_t budget = int64_t{1} << 30;
  const std::optional<FittingModel> none = *LargestFittingFamilyModel(point, budget);
  ASSERT_TRUE(none.has_value());
  MemoryPoint all = point;
  ASSERT_TRUE(ApplyActivationMode({1, true}, all.config).ok());
  const std::optional<FittingModel> lean = *LargestFittingFamilyModel(all, budget);
  ASSERT_TRUE(lean.has_value());
  EXPECT_GT(lean->estimate.num_params, none->estimate.num_params);
  EXPECT_EQ(lean->config.activation_checkpoint_every, 1);
  EXPECT_TRUE(lean->config.flash_attention);
  MemoryPoint sparse = point;
  sparse.config.activation_checkpoint_every = 8;
  const std::optional<FittingModel> every8 = *LargestFittingFamilyModel(sparse, budget);
  ASSERT_TRUE(every8.has_value());
  EXPECT_GE(every8->config.layers, 8);
  EXPECT_EQ(every8->config.activation_checkpoint_every, 8);
}

}  // namespace
}  // namespace report
}  // namespace fsdp
