// File: tests/fsdp/run/train_options_test.cc
#include "fsdp/run/train_options.h"

#include <string>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

TEST(TrainOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateTrainOptions(TrainOptions{}).ok());
  TrainOptions o;
  EXPECT_EQ(o.global_batch(), int64_t{o.micro_batch} * o.accum * o.nproc);
}

TEST(TrainOptionsTest, NonPositiveSizesNameTheFlag) {
  struct Case {
    const char* flag;
    void (*set)(TrainOptions&);
  };
  const Case cases[] = {
      {"--nproc", [](TrainOptions& o) { o.nproc = 0; }},
      {"--layers", [](TrainOptions& o) { o.layers = -1; }},
      {"--d_model", [](TrainOptions& o) { o.d_model = 0; }},
      {"--heads", [](TrainOptions& o) { o.heads = 0; }},
      {"--vocab", [](TrainOptions& o) { o.vocab = 0; }},
      {"--seq_len", [](TrainOptions& o) { o.seq_len = -3; }},
      {"--micro_batch", [](TrainOptions& o) { o.micro_batch = 0; }},
      {"--accum", [](TrainOptions& o) { o.accum = 0; }},
      {"--steps", [](TrainOptions& o) { o.steps = 0; }},
      {"--threads", [](TrainOptions& o) { o.threads = -1; }},
      {"--lr", [](TrainOptions& o) { o.lr = 0.0f; }},
      {"--min_lr", [](TrainOptions& o) { o.min_lr = 1.0f; }},
      {"--warmup_steps", [](TrainOptions& o) { o.warmup_steps = -1; }},
      {"--weight_decay", [](TrainOptions& o) { o.weight_decay = -0.1f; }},
      {"--grad_clip", [](TrainOptions& o) { o.grad_clip = -1.0f; }},
      {"--data", [](TrainOptions& o) { o.data = "/nonexistent/tokens.bin"; }},
  };
  for (const Case& c : cases) {
    TrainOptions o;
    c.set(o);
    absl::Status s = ValidateTrainOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(s.message().find(c.flag), std::string::npos) << c.flag << ": " << s;
  }
}

TEST(TrainOptionsTest, HeadsMustDivideWidth) {
  TrainOptions o;
  o.d_model = 64;
  o.heads = 5;
  absl::Status s = ValidateTrainOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not divide --d_model=64"), std::string::npos) << s;
}

TEST(TrainOptionsTest, EveryStrategyIsAvailable) {
  for (Strategy strategy : {Strategy::kNoShard, Strategy::kShardOptimizer,
                            Strategy::kShardGradOp, Strategy::kFullShard}) {
    TrainOptions o;
    o.sharding.strategy = strategy;
    EXPECT_TRUE(ValidateTrainOptions(o).ok()) << StrategyName(strategy);
  }
  TrainOptions o;
  o.nproc = 4;
  o.sharding.strategy = Strategy::kHybridShard;
  o.sharding.group_size = 2;
  EXPECT_TRUE(ValidateTrainOptions(o).ok());
}

TEST(TrainOptionsTest, GroupSizeMustDivideTheWorldAndOnlyForHybrid) {
  TrainOptions o;
  o.nproc = 6;
  o.sharding.strategy = Strategy::kHybridShard;
  for (int bad : {0, 4, 7, -1}) {
    o.sharding.group_size = bad;
    absl::Status s = ValidateTrainOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("valid: 1, 2, 3, 6"), std::string::npos) << s;
  }
  o.sharding.strategy = Strategy::kFullShard;
  o.sharding.group_size = 2;
  absl::Status s = ValidateTrainOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("only applies to --strategy=hybrid_shard"), std::string::npos) << s;
}

TEST(TrainOptionsTest, PrefetchAndMergingBounds) {
  TrainOptions o;
  o.sharding.prefetch_depth = -1;
  EXPECT_EQ(ValidateTrainOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.sharding.prefetch_depth = 0;
  EXPECT_TRUE(ValidateTrainOptions(o).ok());
  o.sharding.max_gathers_in_flight = 0;
  EXPECT_EQ(ValidateTrainOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.sharding.max_gathers_in_flight = 1;
  o.sharding.min_unit_numel = -5;
  EXPECT_EQ(ValidateTrainOptions(o).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainOptionsTest, GlobalBatchMustSplitAcrossRanksAndMicroBatches) {
  TrainOptions o;
  o.nproc = 4;
  o.accum = 2;
  ASSERT_TRUE(SetMicroBatchFromGlobalBatch(24, o).ok());
  EXPECT_EQ(o.micro_batch, 3);
  EXPECT_EQ(o.global_batch(), 24);
  absl::Status s = SetMicroBatchFromGlobalBatch(20, o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("multiple of 8"), std::string::npos) << s;
  EXPECT_EQ(SetMicroBatchFromGlobalBatch(0, o).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StrategyTest, ParsesEveryNameAndRejectsOthers) {
  for (const char* name :
       {"no_shard", "shard_optimizer", "shard_grad_op", "full_shard", "hybrid_shard"}) {
    auto s = ParseStrategy(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_STREQ(StrategyName(*s), name);
  }
  auto bad = ParseStrategy("zero3");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("full_shard"), std::string::npos);
}

}  // namespace
}  // namespace fsdp
