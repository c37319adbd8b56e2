// File: tests/integration/train/train_gpt_exact_test.cc
//
// --exact over real processes on loopback (docs/exact.md): the GPT on the
// fortunes tokens ends with the same parameter SHA-256, the same losses and
// the same validation losses, bit for bit, at 1, 2, 3, 4, 6 and 8 ranks, with the global batch of 24
// sequences split into micro-batch x accumulation x ranks in several ways,
// under all five strategies (hybrid at two group sizes) and with merged
// units; in fp32, in bf16, and with flash attention and activation
// checkpointing; a run stopped and
// resumed from checkpoints at 4, then 3, then 1 rank ends with the
// uninterrupted run's digest. And what --exact cannot keep is refused
// before a rank starts.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

constexpr int kSteps = 4;

std::vector<std::string> ModelFlags() {
  const std::string prefix = TokenizedFortunes(300);
  return {"--exact",          "--data=" + prefix + "_train.bin", "--vocab=300",
          "--layers=2",       "--d_model=24",                    "--heads=2",
          "--seq_len=12",     "--global_batch=24",               "--steps=4",
          "--warmup_steps=1", "--lr=0.01",                       "--grad_clip=0.5",
          "--seed=11",        "--val_data=" + prefix + "_val.bin", "--val_every=2",
          "--val_batches=1"};
}

struct Split {
  int nproc;
  int accum;
  std::string strategy;
  int group_size = 0;
};

std::string Name(const std::string& prefix, const Split& s) {
  return absl::StrCat(prefix, "_", s.nproc, "x", s.accum, "_", s.strategy,
                      s.group_size > 0 ? absl::StrCat("_g", s.group_size) : "");
}

TrainGptRun RunSplit(const std::string& prefix, const Split& s,
                     const std::vector<std::string>& extra) {
  std::vector<std::string> flags = {absl::StrCat("--nproc=", s.nproc),
                                    absl::StrCat("--accum=", s.accum),
                                    "--strategy=" + s.strategy};
  if (s.group_size > 0) flags.push_back(absl::StrCat("--group_size=", s.group_size));
  flags.insert(flags.end(), extra.begin(), extra.end());
  return RunTrainGptJob(Name(prefix, s), ModelFlags(), flags, kSteps);
}

// Every split's run against the first one's: the same digest, losses and
// val_losses; the first run learns, validates 3 times and says its first
// step was computed twice (no exponents yet). A failure lists every miss.
::testing::AssertionResult OneDigest(const std::string& prefix, const std::vector<Split>& splits,
                                     const std::vector<std::string>& extra) {
  std::string misses;
  const TrainGptRun first = RunSplit(prefix, splits[0], extra);
  if (!(first.losses.back() < first.losses.front())) misses += "\nthe first run did not learn";
  if (first.val_losses.size() != 3u) misses += "\nthe first run did not validate 3 times";
  if (first.output.find("step    1/4 | ") == std::string::npos ||
      first.output.find("computed twice (exact sums overflowed)") == std::string::npos) {
    misses += "\nthe first run's step 1 does not say it was computed twice";
  }
  for (size_t i = 1; i < splits.size(); ++i) {
    const TrainGptRun run = RunSplit(prefix, splits[i], extra);
    const std::string name = Name(prefix, splits[i]);
    if (run.param_sha256 != first.param_sha256) {
      misses += "\n" + name + ": digest " + run.param_sha256 + " against " + first.param_sha256;
    }
    if (run.losses != first.losses) misses += "\n" + name + ": other losses";
    if (run.val_losses != first.val_losses) misses += "\n" + name + ": other val_losses";
  }
  if (misses.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << Name(prefix, splits[0]) << " against the rest:"
                                       << misses << "\n" << first.output;
}

TEST(TrainGptExactTest, Fp32OneDigestAtEveryWorldSizeSplitAndStrategy) {
  EXPECT_TRUE(OneDigest("fp32",
                        {{1, 1, "no_shard"},
                         {1, 4, "full_shard"},
                         {2, 3, "shard_grad_op"},
                         {3, 1, "shard_optimizer"},
                         {4, 2, "hybrid_shard", 2},
                         {6, 2, "full_shard"},
                         {8, 1, "no_shard"},
                         {8, 3, "hybrid_shard", 4}},
                        {}));
}

TEST(TrainGptExactTest, Bf16OneDigestAtEveryWorldSizeSplitAndStrategy) {
  EXPECT_TRUE(OneDigest("bf16",
                        {{1, 2, "full_shard"},
                         {2, 1, "no_shard"},
                         {3, 2, "hybrid_shard", 3},
                         {4, 3, "shard_grad_op"},
                         {8, 1, "shard_optimizer"}},
                        {"--precision=bf16"}));
}

TEST(TrainGptExactTest, MergedUnitsKeepTheUnmergedDigest) {
  const TrainGptRun unmerged = RunSplit("unmerged", {1, 1, "no_shard"}, {});
  const TrainGptRun merged2 = RunSplit("merged", {2, 2, "full_shard"}, {"--min_unit_numel=20000"});
  const TrainGptRun merged4 =
      RunSplit("merged", {4, 3, "shard_grad_op"}, {"--min_unit_numel=8000"});
  EXPECT_EQ(merged2.param_sha256, unmerged.param_sha256);
  EXPECT_EQ(merged4.param_sha256, unmerged.param_sha256);
  EXPECT_EQ(merged4.losses, unmerged.losses);
}

TEST(TrainGptExactTest, FlashAttentionAndCheckpointingKeepOneDigest) {
  EXPECT_TRUE(OneDigest("flash",
                        {{1, 1, "no_shard"}, {3, 2, "full_shard"}, {6, 1, "shard_grad_op"}},
                        {"--attention=flash", "--activation_checkpointing=all"}));
}

// 4 ranks full_shard stop at step 2; 3 ranks shard_grad_op resume there and
// stop at step 4; 1 rank resumes there and ends: the uninterrupted 4-rank
// run's digest and losses. The checkpoints carry the exact exponents.
TEST(TrainGptExactTest, ResumedAndReshardedFourThreeOneKeepsTheDigest) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::string first_dir = tmp + "/exact_ckpt4", second_dir = tmp + "/exact_ckpt3";
  const TrainGptRun whole = RunTrainGptJob("exact_whole", ModelFlags(),
                                           {"--nproc=4", "--strategy=full_shard", "--steps=6"}, 6);
  const TrainGptRun first = RunTrainGptJob(
      "exact_first", ModelFlags(),
      {"--nproc=4", "--strategy=full_shard", "--steps=6", "--checkpoint_dir=" + first_dir,
       "--exit_after_steps=2"},
      2);
  const TrainGptRun second = RunTrainGptJob(
      "exact_second", ModelFlags(),
      {"--nproc=3", "--strategy=shard_grad_op", "--steps=6",
       "--resume_from=" + first_dir + "/step-00000002", "--checkpoint_dir=" + second_dir,
       "--exit_after_steps=4"},
      2);
  const TrainGptRun third = RunTrainGptJob(
      "exact_third", ModelFlags(),
      {"--nproc=1", "--accum=3", "--steps=6", "--resume_from=" + second_dir + "/step-00000004"},
      2);
  ASSERT_EQ(whole.losses.size(), 6u);
  const std::vector<double> joined = {first.losses[0],  first.losses[1],  second.losses[0],
                                      second.losses[1], third.losses[0], third.losses[1]};
  EXPECT_EQ(joined, whole.losses);
  EXPECT_EQ(third.param_sha256, whole.param_sha256) << third.output;
}

TEST(TrainGptExactTest, WhatExactCannotKeepIsRefused) {
  auto refused = [](const std::vector<std::string>& extra, const std::string& says) {
    std::vector<std::string> flags;
    for (const std::string& f : ModelFlags()) {
      if (f.rfind("--val", 0) != 0) flags.push_back(f);
    }
    flags.push_back("--nproc=1");
    flags.insert(flags.end(), extra.begin(), extra.end());
    const TrainGptRun run = RunTrainGpt("refused", flags);
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find(says), std::string::npos) << run.output;
  };
  refused({"--threads=2"}, "--threads=2 with --exact");
  // The budget check counts the exact mode's buffers and says so.
  refused({"--mem_budget=100KiB"}, "fp32 --exact on 1 rank");
  refused({"--matmul_backend=auto"}, "--matmul_backend=auto with --exact");
  refused({"--reduce_dtype=fp32"}, "--reduce_dtype=fp32 with --exact");
  // The Llama computes per sequence too (train_llama_test), but not with a
  // tied head.
  refused({"--model=llama", "--tie_embeddings"}, "with tied embeddings are not supported");
}

}  // namespace
}  // namespace fsdp_test
