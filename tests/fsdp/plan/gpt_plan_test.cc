// File: tests/fsdp/plan/gpt_plan_test.cc
//
// The planner on the real GPT spec (fsdp/nn/gpt_spec.h): the plan holds every
// parameter GptNumParams counts, the GPT-like units these tests build by hand
// have the same size by an independent formula, and every strategy plans it.
#include <string>

#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"
#include "gtest/gtest.h"
#include "tests/fsdp/plan/test_units.h"

namespace fsdp {
namespace plan {
namespace {

TEST(GptPlanTest, PlanHoldsEveryParameterOfTheSpec) {
  for (int layers : {1, 2, 5}) {
    GptConfig config;
    config.layers = layers;
    config.d_model = 12;
    config.heads = 3;
    config.vocab = 37;
    config.seq_len = 9;
    ASSERT_TRUE(ValidateGptConfig(config).ok());
    const int64_t formula = testing::GptLikeNumParams(
        testing::GptLikeShape{layers, config.d_model, config.vocab, config.seq_len});
    EXPECT_EQ(GptNumParams(config), formula);
    for (proto::ShardingStrategy strategy :
         {proto::NO_SHARD, proto::SHARD_OPTIMIZER, proto::SHARD_GRAD_OP, proto::FULL_SHARD,
          proto::HYBRID_SHARD}) {
      PlannerOptions options;
      options.sharding.strategy = *StrategyOfPlan(strategy);
      options.world_size = 6;
      options.sharding.group_size = strategy == proto::HYBRID_SHARD ? 3 : 0;
      absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(GptUnitSpecs(config), options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->total_flat_numel(), formula);
      EXPECT_EQ(plan->units_size(), layers + 2);
    }
  }
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
