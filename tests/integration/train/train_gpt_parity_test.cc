// File: tests/integration/train/train_gpt_parity_test.cc
//
// The same global batch of 8 sequences, split four ways, over real processes:
//   --nproc=1 --micro_batch=8
//   --nproc=2 --micro_batch=4
//   --nproc=4 --micro_batch=2
//   --nproc=2 --micro_batch=2 --accum=2
// must give the same loss at every one of 20 steps within 1e-5 relative.
// The reference is the single process on the whole batch.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

constexpr int kSteps = 20;

std::vector<std::string> SmallModelFlags() {
  return {"--layers=2",   "--d_model=32",    "--heads=2",         "--vocab=64",
          "--seq_len=16", "--steps=20",      "--warmup_steps=2",  "--lr=0.003",
          "--min_lr=0.0003", "--grad_clip=1", "--threads=1",      "--seed=7"};
}

TrainGptRun RunSmall(const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> flags = SmallModelFlags();
  flags.insert(flags.end(), extra.begin(), extra.end());
  TrainGptRun run = RunTrainGpt(name, flags);
  EXPECT_EQ(run.exit_code, 0) << name << " output:\n" << run.output;
  EXPECT_EQ(run.losses.size(), static_cast<size_t>(kSteps)) << name << "\n" << run.output;
  EXPECT_TRUE(run.has_final_line) << name;
  EXPECT_EQ(run.param_sha256.size(), 64u) << name;
  return run;
}

TEST(TrainGptParityTest, EverySplitOfTheGlobalBatchGivesTheSameLosses) {
  const TrainGptRun reference = RunSmall("nproc1_mb8", {"--nproc=1", "--micro_batch=8"});
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kSteps));
  // Parity of a run that learns nothing would prove little.
  EXPECT_LT(reference.losses.back(), reference.losses.front() - 0.3) << reference.output;

  struct Split {
    const char* name;
    std::vector<std::string> flags;
  };
  const Split splits[] = {
      {"nproc2_mb4", {"--nproc=2", "--micro_batch=4"}},
      {"nproc4_mb2", {"--nproc=4", "--micro_batch=2"}},
      {"nproc2_mb2_accum2", {"--nproc=2", "--micro_batch=2", "--accum=2"}},
  };
  for (const Split& split : splits) {
    const TrainGptRun run = RunSmall(split.name, split.flags);
    ASSERT_EQ(run.losses.size(), reference.losses.size()) << split.name;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(run.losses[s], reference.losses[s], 1e-5 * std::fabs(reference.losses[s]))
          << split.name << " step " << s + 1;
      EXPECT_EQ(run.lrs[s], reference.lrs[s]) << split.name << " step " << s + 1;
    }
  }
}

// The same job twice: bit-identical losses and parameters (the reduction
// order is fixed, so data parallelism adds no run-to-run noise).
TEST(TrainGptParityTest, RepeatedRunIsBitIdentical) {
  const TrainGptRun first = RunSmall("repeat_a", {"--nproc=2", "--micro_batch=4"});
  const TrainGptRun second = RunSmall("repeat_b", {"--nproc=2", "--micro_batch=4"});
  EXPECT_EQ(first.losses, second.losses);
  EXPECT_EQ(first.param_sha256, second.param_sha256);
}

}  // namespace
}  // namespace fsdp_test
