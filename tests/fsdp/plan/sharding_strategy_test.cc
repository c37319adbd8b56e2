// File: tests/fsdp/plan/sharding_strategy_test.cc
#include "fsdp/plan/sharding_strategy.h"

#include <string>

#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

TEST(ShardingStrategyTest, EveryNameParsesAndPrintsBack) {
  const struct {
    const char* name;
    proto::ShardingStrategy strategy;
  } kCases[] = {{"no_shard", proto::NO_SHARD},
                {"shard_optimizer", proto::SHARD_OPTIMIZER},
                {"shard_grad_op", proto::SHARD_GRAD_OP},
                {"full_shard", proto::FULL_SHARD},
                {"hybrid_shard", proto::HYBRID_SHARD}};
  for (const auto& c : kCases) {
    absl::StatusOr<proto::ShardingStrategy> parsed = ParseShardingStrategy(c.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c.strategy);
    EXPECT_EQ(ShardingStrategyName(c.strategy), c.name);
  }
  EXPECT_EQ(ShardingStrategyName(proto::SHARDING_STRATEGY_UNSPECIFIED), "unspecified");
}

TEST(ShardingStrategyTest, UnknownNameListsTheValidOnes) {
  for (const char* bad : {"", "FULL_SHARD", "zero3", "full-shard", "unspecified"}) {
    absl::StatusOr<proto::ShardingStrategy> parsed = ParseShardingStrategy(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(parsed.status().message());
    EXPECT_NE(message.find(std::string("\"") + bad + "\""), std::string::npos) << message;
    EXPECT_NE(message.find("valid names: no_shard, shard_optimizer, shard_grad_op, "
                           "full_shard, hybrid_shard"),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
