// File: tests/fsdp/train/flat_unit_plan_test.cc
//
// The replicated runtime's per-unit padding (MakeFlatUnitLayout) must be the
// layout the shard planner (fsdp/plan/) gives the sharded strategies, unit by
// unit: that is what lets the sharded strategies reproduce this mode's
// gradient reduction bit for bit.
#include <vector>

#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/train/flat_unit.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

TEST(FlatUnitPlanTest, LayoutMatchesTheShardPlanForEveryWorldSize) {
  GptConfig config;
  config.layers = 3;
  config.d_model = 24;
  config.heads = 3;
  config.vocab = 101;  // odd, so the embedding and head need padding
  config.seq_len = 17;
  const std::vector<UnitSpec> units = GptUnitSpecs(config);
  for (int world = 1; world <= 8; ++world) {
    plan::PlannerOptions options;
    options.strategy = proto::FULL_SHARD;
    options.world_size = world;
    auto shard_plan = plan::BuildShardPlan(units, options);
    ASSERT_TRUE(shard_plan.ok()) << shard_plan.status();
    ASSERT_EQ(shard_plan->units_size(), static_cast<int>(units.size()));
    for (int u = 0; u < static_cast<int>(units.size()); ++u) {
      auto layout = MakeFlatUnitLayout(units[u], u, world);
      ASSERT_TRUE(layout.ok()) << layout.status();
      const proto::UnitPlan& planned = shard_plan->units(u);
      EXPECT_EQ(layout->numel, planned.flat_numel()) << "unit " << u << " world " << world;
      EXPECT_EQ(layout->padded_numel, planned.padded_numel()) << "unit " << u << " world " << world;
      EXPECT_EQ(layout->shard_numel, planned.shard_numel()) << "unit " << u << " world " << world;
      EXPECT_EQ(layout->padding(), planned.padding_numel()) << "unit " << u << " world " << world;
    }
  }
}

}  // namespace
}  // namespace fsdp
