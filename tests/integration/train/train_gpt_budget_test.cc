// File: tests/integration/train/train_gpt_budget_test.cc
//
// --mem_budget end to end, 4 ranks as real processes: with a per-rank budget
// between full_shard's and no_shard's predicted peaks, no_shard is refused by
// the launching parent with the budget message (which category, how much
// over, what would fit) and no rank starts, while full_shard trains. The
// budget is computed here from the memory model, halfway between the two
// predictions, so the test follows the model's size. And where activations
// dominate (seq_len 512), a configuration refused without checkpointing is
// told which activation flags would make it fit, and trains with them under
// the same budget (enforced by every rank's MemoryTracker too).
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fsdp/report/budget.h"
#include "fsdp/report/memory_estimate.h"
#include "fsdp/run/train_options.h"
#include "fsdp/plan/strategy.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

const std::vector<std::string> kModelFlags = {
    "--nproc=4",       "--layers=4",       "--d_model=256", "--heads=4",
    "--vocab=256",     "--seq_len=64",     "--micro_batch=2", "--steps=3",
    "--warmup_steps=1"};

fsdp::TrainOptions ModelOptions(fsdp::Strategy strategy) {
  fsdp::TrainOptions o;
  o.nproc = 4;
  o.layers = 4;
  o.d_model = 256;
  o.heads = 4;
  o.vocab = 256;
  o.seq_len = 64;
  o.micro_batch = 2;
  o.steps = 3;
  o.warmup_steps = 1;
  o.sharding.strategy = strategy;
  return o;
}

int64_t PredictedPeak(fsdp::Strategy strategy) {
  absl::StatusOr<fsdp::report::MemoryPoint> point =
      fsdp::report::MemoryPointFromTrainOptions(ModelOptions(strategy));
  EXPECT_TRUE(point.ok()) << point.status();
  absl::StatusOr<fsdp::report::RankMemoryEstimate> estimate =
      fsdp::report::EstimateRankMemory(*point);
  EXPECT_TRUE(estimate.ok()) << estimate.status();
  return estimate->total_bytes();
}

TEST(TrainGptBudgetTest, FullShardTrainsWhereNoShardIsRefused) {
  const int64_t no_shard = PredictedPeak(fsdp::Strategy::kNoShard);
  const int64_t full_shard = PredictedPeak(fsdp::Strategy::kFullShard);
  ASSERT_LT(full_shard, no_shard);
  const int64_t budget = (full_shard + no_shard) / 2;
  const std::string budget_flag = absl::StrCat("--mem_budget=", budget);

  std::vector<std::string> flags = kModelFlags;
  flags.push_back("--strategy=no_shard");
  flags.push_back(budget_flag);
  const TrainGptRun refused = RunTrainGpt("budget_no_shard", flags);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("no_shard fp32 on 4 ranks"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("over the budget"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("the largest part is"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("Would fit:"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("[rank"), std::string::npos) << "a rank started:\n"
                                                             << refused.output;

  flags = kModelFlags;
  flags.push_back("--strategy=full_shard");
  flags.push_back(budget_flag);
  const TrainGptRun trained = RunTrainGpt("budget_full_shard", flags);
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_EQ(trained.losses.size(), 3u) << trained.output;
  EXPECT_TRUE(trained.has_final_line) << trained.output;
}

// With accumulation a gradient-sharding strategy holds every unit's
// unsharded gradients until the step's reductions: the prediction follows,
// to the byte (rank 0's tracked peak), and a budget of exactly the
// prediction trains.
TEST(TrainGptBudgetTest, AccumulationIsPredictedToTheByteAndItsBudgetTrains) {
  for (const auto& [micro_batch, accum] : {std::pair{1, 3}, std::pair{3, 1}}) {
    fsdp::TrainOptions o = ModelOptions(fsdp::Strategy::kFullShard);
    o.nproc = 2;
    o.micro_batch = micro_batch;
    o.accum = accum;
    absl::StatusOr<fsdp::report::MemoryPoint> point =
        fsdp::report::MemoryPointFromTrainOptions(o);
    ASSERT_TRUE(point.ok()) << point.status();
    absl::StatusOr<fsdp::report::RankMemoryEstimate> estimate =
        fsdp::report::EstimateRankMemory(*point);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    std::vector<std::string> flags;
    for (const std::string& flag : kModelFlags) {
      if (flag != "--nproc=4" && flag != "--micro_batch=2") flags.push_back(flag);
    }
    flags.push_back("--nproc=2");
    flags.push_back("--strategy=full_shard");
    flags.push_back(absl::StrCat("--micro_batch=", micro_batch));
    flags.push_back(absl::StrCat("--accum=", accum));
    flags.push_back(absl::StrCat("--mem_budget=", estimate->total_bytes()));
    const std::string name = absl::StrCat("budget_accum", accum);
    const TrainGptRun run = RunTrainGpt(name, flags);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::string metrics =
        ReadWholeFile(absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name, ".jsonl"));
    EXPECT_NE(metrics.find(absl::StrCat("\"peak_bytes\":", estimate->total_bytes(), ",")),
              std::string::npos)
        << "predicted " << estimate->total_bytes() << "\n" << metrics;
  }
}

// The model of the activation test: 2 ranks, full_shard, seq_len 512.
const std::vector<std::string> kLongSequenceFlags = {
    "--nproc=2",         "--strategy=full_shard", "--layers=4",      "--d_model=128",
    "--heads=2",         "--vocab=256",           "--seq_len=512",   "--micro_batch=4",
    "--steps=2",         "--warmup_steps=1"};

int64_t PredictedLongSequencePeak(const std::string& checkpointing, const std::string& attention) {
  fsdp::TrainOptions o;
  o.nproc = 2;
  o.sharding.strategy = fsdp::Strategy::kFullShard;
  o.layers = 4;
  o.d_model = 128;
  o.heads = 2;
  o.vocab = 256;
  o.seq_len = 512;
  o.micro_batch = 4;
  o.activation_checkpointing = *fsdp::ParseActivationCheckpointing(checkpointing, o.layers);
  o.attention = *fsdp::ParseAttention(attention);
  absl::StatusOr<fsdp::report::MemoryPoint> point =
      fsdp::report::MemoryPointFromTrainOptions(o);
  EXPECT_TRUE(point.ok()) << point.status();
  absl::StatusOr<fsdp::report::RankMemoryEstimate> estimate =
      fsdp::report::EstimateRankMemory(*point);
  EXPECT_TRUE(estimate.ok()) << estimate.status();
  return estimate->total_bytes();
}

// The flags a refusal names in "[Or, w|W]ith FLAGS, full_shard on 2 ranks
// would fit (...)".
std::vector<std::string> SuggestedFlags(const std::string& output) {
  const size_t end = output.find(", full_shard on 2 ranks would fit (");
  if (end == std::string::npos) return {};
  const size_t start = output.rfind("ith --", end);
  if (start == std::string::npos) return {};
  return absl::StrSplit(output.substr(start + 4, end - start - 4), ' ');
}

TEST(TrainGptBudgetTest, RefusalNamesTheActivationFlagsThatMakeItFitAndTheyDo) {
  const int64_t none = PredictedLongSequencePeak("none", "standard");
  const int64_t all = PredictedLongSequencePeak("all", "standard");
  ASSERT_LT(all, none);
  const std::string budget_flag = absl::StrCat("--mem_budget=", (none + all) / 2);

  std::vector<std::string> flags = kLongSequenceFlags;
  flags.push_back(budget_flag);
  const TrainGptRun refused = RunTrainGpt("budget_activations_refused", flags);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("full_shard fp32 on 2 ranks"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("activations none"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("[rank"), std::string::npos) << "a rank started:\n"
                                                             << refused.output;
  const std::vector<std::string> suggested = SuggestedFlags(refused.output);
  ASSERT_FALSE(suggested.empty()) << refused.output;
  for (const std::string& flag : suggested) {
    EXPECT_TRUE(flag.rfind("--activation_checkpointing=", 0) == 0 ||
                flag == "--attention=flash")
        << flag << " in " << refused.output;
  }

  flags.insert(flags.end(), suggested.begin(), suggested.end());
  const TrainGptRun trained = RunTrainGpt("budget_activations_trained", flags);
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_EQ(trained.losses.size(), 2u) << trained.output;
  EXPECT_TRUE(trained.has_final_line) << trained.output;
}

}  // namespace
}  // namespace fsdp_test
