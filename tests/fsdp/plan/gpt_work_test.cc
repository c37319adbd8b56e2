// File: tests/fsdp/plan/gpt_work_test.cc
#include "fsdp/plan/gpt_work.h"

#include "fsdp/plan/framework_kernels.h"
#include "fsdp/plan/shard_planner.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

// Forward + backward = 3 x forward: per block the four Linear layers
// 2 M (3C^2 + C^2 + 4C^2 + 4C^2) = 24 M C^2 and causal attention
// 2 products x 2 T T h x B H / 2 = 2 B T^2 C; the head 2 M V C.
TEST(GptWorkTest, FlopsAreSixPerParameterPerTokenPlusAttention) {
  GptConfig c;
  c.layers = 3;
  c.d_model = 64;
  c.heads = 4;
  c.vocab = 100;
  c.seq_len = 32;
  const int b = 5;
  const double m = b * c.seq_len, d = c.d_model;
  const double forward =
      c.layers * (24 * m * d * d + 2.0 * b * c.seq_len * c.seq_len * d) + 2 * m * c.vocab * d;
  EXPECT_DOUBLE_EQ(GptFlopsPerMicroBatch(c, b), 3 * forward);
}

// A checkpointed block runs its forward again in the backward; the model
// FLOPs (for MFU) do not count it.
TEST(GptWorkTest, CheckpointedBlocksRecomputeTheirForward) {
  GptConfig c;
  c.layers = 2;
  PlannerOptions options;
  options.sharding.strategy = Strategy::kFullShard;
  options.include_rank_ranges = false;
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(GptUnitSpecs(c), options);
  ASSERT_TRUE(plan.ok());
  const std::vector<UnitWork> plain = GptUnitWork(c, 2, *plan);
  const double flops = GptFlopsPerMicroBatch(c, 2);
  c.activation_checkpoint_every = 2;  // block 0 only
  const std::vector<UnitWork> checkpointed = GptUnitWork(c, 2, *plan);
  EXPECT_EQ(checkpointed[1].backward_products.size(),
            plain[1].backward_products.size() + plain[1].forward_products.size());
  EXPECT_DOUBLE_EQ(checkpointed[1].backward_elementwise_bytes,
                   plain[1].backward_elementwise_bytes + plain[1].forward_elementwise_bytes);
  EXPECT_EQ(checkpointed[2].backward_products.size(), plain[2].backward_products.size());
  EXPECT_DOUBLE_EQ(GptFlopsPerMicroBatch(c, 2), flops);
}

// This runtime's software is the three-argument count, exactly; another
// framework's work replaces the element-wise bytes per token and adds its
// kernels, a checkpointed block's backward taking its forward's again.
TEST(GptWorkTest, AFrameworksKernelsReplaceThisRuntimesCount) {
  GptConfig c;
  c.layers = 2;
  c.activation_checkpoint_every = 2;  // block 0 only
  PlannerOptions options;
  options.include_rank_ranges = false;
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(GptUnitSpecs(c), options);
  ASSERT_TRUE(plan.ok());
  const std::vector<UnitWork> own = GptUnitWork(c, 2, *plan);
  FrameworkWork framework;
  framework.block = GptBlockDimensions(c.d_model, c.heads);
  const std::vector<UnitWork> same = GptUnitWork(c, 2, *plan, framework);
  ASSERT_EQ(same.size(), own.size());
  for (size_t u = 0; u < own.size(); ++u) {
    EXPECT_EQ(same[u].forward_elementwise_bytes, own[u].forward_elementwise_bytes);
    EXPECT_EQ(same[u].backward_elementwise_bytes, own[u].backward_elementwise_bytes);
    EXPECT_EQ(same[u].forward_kernels + same[u].backward_kernels, 0);
  }
  framework.options.software = KernelSoftware::kPyTorchEager;
  const std::vector<UnitWork> eager = GptUnitWork(c, 2, *plan, framework);
  const double tokens = 2.0 * c.seq_len;
  const ElementwiseWork block =
      BlockElementwisePerToken(framework.block, c.seq_len, framework.options);
  const ElementwiseWork head = HeadElementwisePerToken(framework.block, c.vocab, framework.options);
  EXPECT_DOUBLE_EQ(eager[1].forward_elementwise_bytes, tokens * block.forward_bytes);
  EXPECT_DOUBLE_EQ(eager[1].backward_elementwise_bytes,
                   tokens * (block.backward_bytes + block.forward_bytes));  // checkpointed
  EXPECT_DOUBLE_EQ(eager[1].backward_kernels, block.backward_kernels + block.forward_kernels);
  EXPECT_DOUBLE_EQ(eager[2].backward_elementwise_bytes, tokens * block.backward_bytes);
  EXPECT_DOUBLE_EQ(eager[2].forward_kernels, block.forward_kernels);
  EXPECT_DOUBLE_EQ(eager[3].forward_elementwise_bytes, tokens * head.forward_bytes);
  // The products are this GPT's either way.
  EXPECT_EQ(eager[1].backward_products.size(), own[1].backward_products.size());
}

TEST(GptWorkTest, MergedPlanUnitsSumTheirModelUnits) {
  GptConfig c;
  PlannerOptions options;
  options.sharding.strategy = Strategy::kFullShard;
  options.world_size = 2;
  options.include_rank_ranges = false;
  absl::StatusOr<proto::ShardPlan> separate = BuildShardPlan(GptUnitSpecs(c), options);
  options.sharding.min_unit_numel = int64_t{1} << 40;  // everything in one plan unit
  absl::StatusOr<proto::ShardPlan> merged = BuildShardPlan(GptUnitSpecs(c), options);
  ASSERT_TRUE(separate.ok() && merged.ok());
  const std::vector<UnitWork> a = GptUnitWork(c, 4, *separate);
  const std::vector<UnitWork> b = GptUnitWork(c, 4, *merged);
  ASSERT_EQ(a.size(), static_cast<size_t>(c.layers + 2));
  ASSERT_EQ(b.size(), 1u);
  size_t products = 0;
  double bytes = 0;
  for (const UnitWork& w : a) {
    products += w.forward_products.size() + w.backward_products.size();
    bytes += w.forward_elementwise_bytes + w.backward_elementwise_bytes;
  }
  EXPECT_EQ(b[0].forward_products.size() + b[0].backward_products.size(), products);
  EXPECT_DOUBLE_EQ(b[0].forward_elementwise_bytes + b[0].backward_elementwise_bytes, bytes);
  EXPECT_EQ(b[0].padded_numel, merged->units(0).padded_numel());
  EXPECT_EQ(a[1].shard_numel, separate->units(1).shard_numel());
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
