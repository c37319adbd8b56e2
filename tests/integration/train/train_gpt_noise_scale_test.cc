// File: tests/integration/train/train_gpt_noise_scale_test.cc
//
// The gradient noise scale as train_gpt measures it from its ranks' own
// gradients (fsdp/optim/gradient_noise_scale.h, [Note: noise scale] in
// fsdp/train/train_step.cc), with real ranks as processes:
//   - the same global batch of 8 sequences split over 2 ranks, over 4 ranks,
//     and accumulated on one rank gives three estimates that agree within
//     the estimator's spread (3 standard errors of the difference);
//   - the progress line shows it every 10 steps and the metrics file has it;
//   - one rank without accumulation says why there is none.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

std::vector<std::string> Flags(const std::vector<std::string>& split) {
  std::vector<std::string> flags = {"--layers=2", "--d_model=64", "--heads=4",
                                    "--vocab=256", "--seq_len=32", "--steps=100",
                                    "--threads=1"};
  flags.insert(flags.end(), split.begin(), split.end());
  return flags;
}

TEST(TrainGptNoiseScaleTest, TwoRanksFourRanksAndAccumulationAgree) {
  const TrainGptRun two = RunTrainGpt("two", Flags({"--nproc=2", "--micro_batch=4"}));
  const TrainGptRun four = RunTrainGpt("four", Flags({"--nproc=4", "--micro_batch=2"}));
  const TrainGptRun accum =
      RunTrainGpt("accum", Flags({"--nproc=1", "--micro_batch=2", "--accum=4"}));
  const std::vector<const TrainGptRun*> runs = {&two, &four, &accum};
  for (const TrainGptRun* run : runs) {
    ASSERT_EQ(run->exit_code, 0) << run->output;
    ASSERT_TRUE(run->has_noise_scale) << run->output;
    EXPECT_GT(run->noise_scale, 0);
    EXPECT_GT(run->noise_scale_stderr, 0);
    // A spread small enough for the comparison below to mean something.
    EXPECT_LT(run->noise_scale_stderr, 0.3 * run->noise_scale);
    EXPECT_NE(run->output.find("| noise scale "), std::string::npos) << run->output;
    EXPECT_NE(run->output.find("at global batch 8)"), std::string::npos) << run->output;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = i + 1; j < runs.size(); ++j) {
      const double spread = std::hypot(runs[i]->noise_scale_stderr, runs[j]->noise_scale_stderr);
      EXPECT_LT(std::abs(runs[i]->noise_scale - runs[j]->noise_scale), 3 * spread)
          << "run " << i << ": " << runs[i]->noise_scale << " +- " << runs[i]->noise_scale_stderr
          << ", run " << j << ": " << runs[j]->noise_scale << " +- "
          << runs[j]->noise_scale_stderr;
    }
  }
}

TEST(TrainGptNoiseScaleTest, OneRankWithoutAccumulationSaysWhy) {
  const TrainGptRun run =
      RunTrainGpt("single", Flags({"--nproc=1", "--micro_batch=4", "--steps=5"}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(run.has_final_line);
  EXPECT_FALSE(run.has_noise_scale);
  EXPECT_NE(run.output.find("no gradient noise scale: one rank without accumulation"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace fsdp_test
