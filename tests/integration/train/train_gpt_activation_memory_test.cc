// File: tests/integration/train/train_gpt_activation_memory_test.cc
//
// --activation_checkpointing and --attention on real ranks over loopback:
//   * checkpointing changes no bit: with none, every:2 and all, no_shard and
//     full_shard at 2 ranks with 2 accumulated micro-batches end with the
//     same parameter digest and the same loss at every step (and
//     shard_optimizer and shard_grad_op with all);
//   * flash attention trains like the standard one (its losses within fp32
//     rounding's drift) and stays bit-identical across strategies and with
//     checkpointing;
//   * bad modes are refused before any rank starts.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

std::vector<std::string> Flags(std::vector<std::string> extra) {
  std::vector<std::string> flags = {"--layers=4",  "--d_model=64", "--heads=4",
                                    "--vocab=64",  "--seq_len=32", "--micro_batch=4",
                                    "--accum=2",   "--nproc=2",    "--steps=6",
                                    "--warmup_steps=2", "--threads=1"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

TrainGptRun RunJob(const std::string& name, std::vector<std::string> extra) {
  TrainGptRun run = RunTrainGpt(name, Flags(std::move(extra)));
  EXPECT_EQ(run.exit_code, 0) << name << " output:\n" << run.output;
  EXPECT_EQ(run.param_sha256.size(), 64u) << name;
  EXPECT_EQ(run.losses.size(), 6u) << name;
  return run;
}

TEST(TrainGptActivationMemoryTest, CheckpointingIsBitIdenticalUnderNoShardAndFullShard) {
  const TrainGptRun reference = RunJob("no_shard_none", {"--strategy=no_shard"});
  for (const std::string strategy : {"no_shard", "full_shard"}) {
    for (const std::string mode : {"none", "every:2", "all"}) {
      if (strategy == "no_shard" && mode == "none") continue;
      const std::string name = strategy + "_" + (mode == "every:2" ? "every2" : mode);
      const TrainGptRun run = RunJob(
          name, {"--strategy=" + strategy, "--activation_checkpointing=" + mode});
      EXPECT_EQ(run.param_sha256, reference.param_sha256) << name;
      EXPECT_EQ(run.losses, reference.losses) << name;
    }
  }
  // The other strategies, checkpointing every block.
  for (const std::string strategy : {"shard_optimizer", "shard_grad_op"}) {
    const TrainGptRun run =
        RunJob(strategy + "_all", {"--strategy=" + strategy, "--activation_checkpointing=all"});
    EXPECT_EQ(run.param_sha256, reference.param_sha256) << strategy;
  }
}

TEST(TrainGptActivationMemoryTest, FlashAttentionTrainsLikeStandardAndStaysBitIdentical) {
  const TrainGptRun standard = RunJob("standard", {"--strategy=no_shard"});
  const TrainGptRun flash = RunJob("flash", {"--strategy=no_shard", "--attention=flash"});
  ASSERT_EQ(flash.losses.size(), standard.losses.size());
  EXPECT_NE(flash.param_sha256, standard.param_sha256);  // the blocked softmax really ran
  for (size_t s = 0; s < flash.losses.size(); ++s) {
    EXPECT_NEAR(flash.losses[s], standard.losses[s], 1e-4 * standard.losses[s]) << "step " << s;
  }
  const TrainGptRun flash_full_all = RunJob(
      "flash_full_shard_all",
      {"--strategy=full_shard", "--attention=flash", "--activation_checkpointing=all"});
  EXPECT_EQ(flash_full_all.param_sha256, flash.param_sha256);
  EXPECT_EQ(flash_full_all.losses, flash.losses);
}

TEST(TrainGptActivationMemoryTest, BadModesAreRefusedBeforeAnyRankStarts) {
  const struct {
    std::vector<std::string> flags;
    const char* says;
  } cases[] = {
      {{"--activation_checkpointing=every:0"}, "K must be between 1 and the number of blocks (4)"},
      {{"--activation_checkpointing=every:5"}, "got 5"},
      {{"--activation_checkpointing=some"}, "is not a mode; use none, all, or every:K"},
      {{"--attention=fast"}, "--attention=fast is not one of standard"},
  };
  for (const auto& c : cases) {
    const TrainGptRun run = RunTrainGpt("bad", Flags(c.flags));
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find(c.says), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("[rank"), std::string::npos) << "a rank started:\n" << run.output;
  }
}

}  // namespace
}  // namespace fsdp_test
