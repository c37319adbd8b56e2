// File: tests/integration/train/train_gpt_cli_test.cc
//
// train_gpt end to end: the default configuration learns the synthetic
// stream, and bad flags are rejected by the launching parent with a clear
// message before any rank starts (no "[rank k]" lines in the output).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/train/train_gpt_runner.h"

namespace fsdp_test {
namespace {

TEST(TrainGptCliTest, DefaultConfigurationLearns) {
  const TrainGptRun run = RunTrainGpt("defaults", {});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_FALSE(run.losses.empty()) << run.output;
  ASSERT_TRUE(run.has_final_line);
  // The default vocabulary is 64: a model that learned nothing stays near
  // ln(64) = 4.16 nats; the synthetic chain's floor is about 1.2.
  const double uniform = std::log(64.0);
  EXPECT_NEAR(run.losses.front(), uniform, 0.5) << "the first step should be near chance";
  EXPECT_LT(run.losses.back(), 0.6 * uniform) << run.output;
  // One progress line per step, printed by rank 0 only, and a summary.
  EXPECT_NE(run.output.find("[rank 0] step    1/"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("[rank 1] step"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("train_gpt: done"), std::string::npos) << run.output;
}

// An llm.c .bin token file, written here byte by byte from the format
// (256 little-endian int32 header: magic 20240520, version 1, token count;
// then uint16 tokens), trains end to end.
TEST(TrainGptCliTest, TrainsOnAnLlmcTokenFile) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/tokens.bin";
  constexpr int kTokens = 4096;
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = kTokens;
  std::vector<uint16_t> tokens(kTokens);
  for (int i = 0; i < kTokens; ++i) tokens[i] = static_cast<uint16_t>((i * 7 + i / 13) % 64);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fwrite(header.data(), sizeof(int32_t), header.size(), file);  // x86: little-endian
  std::fwrite(tokens.data(), sizeof(uint16_t), tokens.size(), file);
  std::fclose(file);
  const TrainGptRun run =
      RunTrainGpt("token_file", {"--data=" + path, "--vocab=64", "--steps=30", "--seq_len=32"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.losses.size(), 30u) << run.output;
  EXPECT_LT(run.losses.back(), run.losses.front()) << run.output;
  EXPECT_NE(run.output.find("data=" + path), std::string::npos) << run.output;
}

TEST(TrainGptCliTest, TokenOutsideTheVocabularyIsRejectedBeforeRanksStart) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/big_tokens.bin";
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = 1000;
  std::vector<uint16_t> tokens(1000, 500);  // >= --vocab=64
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fwrite(header.data(), sizeof(int32_t), header.size(), file);
  std::fwrite(tokens.data(), sizeof(uint16_t), tokens.size(), file);
  std::fclose(file);
  const TrainGptRun run = RunTrainGpt("bad_tokens", {"--data=" + path, "--vocab=64"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(path), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("outside the vocabulary"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("[rank"), std::string::npos) << "a rank started:\n" << run.output;
  EXPECT_TRUE(run.losses.empty());
}

// The linear scaling rule: with a global batch of 2 ranks x 4 sequences = 8
// and a reference batch of 4, the warmup reaches twice --lr; linear decay
// then falls to --min_lr at the last step.
TEST(TrainGptCliTest, LinearScalingRuleAndLinearDecay) {
  const double lr = 1e-3;
  const TrainGptRun run = RunTrainGpt(
      "linear_scaling", {"--nproc=2", "--micro_batch=4", "--steps=10", "--warmup_steps=2",
                         "--lr=0.001", "--min_lr=0", "--lr_decay=linear",
                         "--lr_reference_batch=4"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.lrs.size(), 10u) << run.output;
  double peak = 0.0;
  for (double value : run.lrs) peak = std::max(peak, value);
  EXPECT_NEAR(peak, lr * 8 / 4, 1e-6 * lr) << run.output;
  for (size_t i = 3; i < run.lrs.size(); ++i) {
    EXPECT_LT(run.lrs[i], run.lrs[i - 1]) << "linear decay must fall every step, step " << i;
  }
}

struct BadFlag {
  std::vector<std::string> flags;
  std::string message;  // must appear in the output
};

class TrainGptBadFlagTest : public ::testing::TestWithParam<BadFlag> {};

TEST_P(TrainGptBadFlagTest, ParentRejectsBeforeAnyRankStarts) {
  const TrainGptRun run = RunTrainGpt("bad_flag", GetParam().flags);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(GetParam().message), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("[rank"), std::string::npos) << "a rank started:\n" << run.output;
  EXPECT_TRUE(run.losses.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Flags, TrainGptBadFlagTest,
    ::testing::Values(
        BadFlag{{"--layers=0"}, "--layers=0 must be a positive integer"},
        BadFlag{{"--micro_batch=-2"}, "--micro_batch=-2 must be a positive integer"},
        BadFlag{{"--d_model=30", "--heads=4"}, "--heads=4 does not divide --d_model=30"},
        BadFlag{{"--nproc=2", "--global_batch=7"},
                "--global_batch=7 sequences do not split across --nproc=2 ranks"},
        BadFlag{{"--nproc=4", "--strategy=hybrid_shard", "--group_size=3"},
                "needs --group_size (ranks per shard group) dividing --nproc=4 into equal "
                "groups; got --group_size=3; valid: 1, 2, 4"},
        BadFlag{{"--nproc=3", "--strategy=hybrid_shard"}, "got --group_size=0; valid: 1, 3"},
        BadFlag{{"--strategy=full_shard", "--group_size=2"},
                "--group_size=2 only applies to --strategy=hybrid_shard"},
        BadFlag{{"--strategy=full_shard", "--prefetch_depth=-1"},
                "--prefetch_depth=-1 must not be negative"},
        BadFlag{{"--strategy=zero9"}, "unknown strategy 'zero9'"},
        BadFlag{{"--optimizer=lion"}, "--optimizer='lion' is not one of: adamw, sgd"},
        BadFlag{{"--lr_decay=step"}, "--lr_decay='step' is not one of: cosine, linear, constant"},
        BadFlag{{"--lr_reference_batch=-8"}, "--lr_reference_batch=-8 must not be negative"},
        BadFlag{{"--data=/nonexistent/x.bin"}, "--data='/nonexistent/x.bin' cannot be opened"}));

}  // namespace
}  // namespace fsdp_test
