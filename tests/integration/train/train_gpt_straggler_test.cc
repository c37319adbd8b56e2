// File: tests/integration/train/train_gpt_straggler_test.cc
//
// Stragglers named (issue 37), over real ranks: train_gpt's test build with
// rank 1 of 3 sleeping after fetching each step's batches (a slow data
// loader: TRAIN_GPT_TEST_SLOW_DATA_RANK / _MS, examples/train_gpt.cc). The
// progress line and the metrics must name rank 1 and the data phase, with
// scores, and only rank 1; the summary and the final metrics line show every
// rank's skew, rank 1's the largest. A run without the delay at the same
// sitting must name nobody with a threshold the delay clears many times over.
// A rank whose forward of one unit is slowed (TRAIN_GPT_TEST_SLOW_UNIT) is
// named with the compute phase and that unit.
#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

const std::vector<std::string> kFlags = {"--nproc=3",   "--strategy=full_shard",
                                         "--steps=16",  "--warmup_steps=1",
                                         "--threads=1", "--straggler_every=4"};

std::vector<nlohmann::json> MetricsLines(const std::string& run_name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string text =
      ReadWholeFile(std::string(tmp != nullptr ? tmp : "/tmp") + "/" + run_name + ".jsonl");
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

TEST(TrainGptStraggler, TheDelayedRankAndItsPhaseAreNamed) {
  // 150 ms per step against a few tens of ms of work: rank 1 is several
  // times busier than the others however loaded the machine.
  setenv("TRAIN_GPT_TEST_SLOW_DATA_RANK", "1", 1);
  setenv("TRAIN_GPT_TEST_SLOW_DATA_MS", "150", 1);
  const TrainGptRun run = RunTrainGptBinary(ExamplePath("train_gpt_test_hooks"), "slow", kFlags);
  unsetenv("TRAIN_GPT_TEST_SLOW_DATA_RANK");
  unsetenv("TRAIN_GPT_TEST_SLOW_DATA_MS");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.has_final_line) << run.output;

  // Windows close at steps 4, 8, 12, 16; the first name comes with the
  // second window over the threshold.
  int named = 0;
  for (const nlohmann::json& line : MetricsLines("slow")) {
    if (line.contains("final")) {
      ASSERT_TRUE(line.contains("rank_skew")) << line.dump();
      ASSERT_EQ(line["rank_skew"].size(), 3u) << line.dump();
      EXPECT_TRUE(
          absl::StrContains(line["rank_skew"][1].get<std::string>(), "named the straggler in "))
          << line.dump();
      continue;
    }
    if (!line.contains("straggler_rank")) continue;
    ++named;
    EXPECT_EQ(line["step"].get<int>() % 4, 0) << line.dump();
    EXPECT_EQ(line["straggler_rank"].get<int>(), 1) << line.dump();
    EXPECT_EQ(line["straggler_phase"].get<std::string>(), "data") << line.dump();
    EXPECT_GT(line["straggler_vs_fastest"].get<double>(), 1.2) << line.dump();
    EXPECT_GE(line["straggler_vs_own_best"].get<double>(), 1.0) << line.dump();
  }
  EXPECT_GE(named, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "| straggler rank 1 (data, ")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "straggler rank 0")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "straggler rank 2")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "per-rank skew over 4 windows of 4 steps"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "rank 1: busy ")) << run.output;
}

// Rank 2's forward of model unit 2 (the second block of the default
// 2-layer GPT) sleeps 60 ms per micro-batch: compute is the phase, and the
// unit is named in the progress line, the metrics and the skew lines.
TEST(TrainGptStraggler, ASlowUnitIsNamedWithTheComputePhase) {
  setenv("TRAIN_GPT_TEST_SLOW_UNIT", "2:2:60", 1);
  const TrainGptRun run =
      RunTrainGptBinary(ExamplePath("train_gpt_test_hooks"), "slow_unit", kFlags);
  unsetenv("TRAIN_GPT_TEST_SLOW_UNIT");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  int named = 0;
  for (const nlohmann::json& line : MetricsLines("slow_unit")) {
    if (line.contains("final")) {
      ASSERT_TRUE(line.contains("rank_skew")) << line.dump();
      EXPECT_TRUE(absl::StrContains(line["rank_skew"][2].get<std::string>(),
                                    "(the most over the fastest rank in unit 2: +"))
          << line.dump();
      continue;
    }
    if (!line.contains("straggler_rank")) continue;
    ++named;
    EXPECT_EQ(line["straggler_rank"].get<int>(), 2) << line.dump();
    EXPECT_EQ(line["straggler_phase"].get<std::string>(), "compute") << line.dump();
    EXPECT_EQ(line["straggler_unit"].get<std::string>(), "block1") << line.dump();
  }
  EXPECT_GE(named, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "| straggler rank 2 (compute in unit 2 (block1), "))
      << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "straggler rank 0")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "straggler rank 1")) << run.output;
}

TEST(TrainGptStraggler, WithoutADelayNobodyIsNamedAtAGenerousThreshold) {
  std::vector<std::string> flags = kFlags;
  flags.push_back("--straggler_threshold=4");
  const TrainGptRun run = RunTrainGptBinary(ExamplePath("train_gpt_test_hooks"), "even", flags);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "| straggler rank")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "per-rank skew over 4 windows")) << run.output;
}

TEST(TrainGptStraggler, BadSettingsAreRefusedNamingTheFlag) {
  const TrainGptRun negative = RunTrainGpt("bad_every", {"--straggler_every=-1", "--steps=8"});
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(negative.output, "--straggler_every=-1")) << negative.output;
  const TrainGptRun zero = RunTrainGpt("bad_threshold", {"--straggler_threshold=0", "--steps=8"});
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(zero.output, "--straggler_threshold=0")) << zero.output;
}

}  // namespace
}  // namespace fsdp_test
