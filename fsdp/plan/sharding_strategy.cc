// File: fsdp/plan/sharding_strategy.cc
#include "fsdp/plan/sharding_strategy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fsdp {
namespace plan {
namespace {

struct NamedStrategy {
  const char* name;
  proto::ShardingStrategy strategy;
  Strategy typed;
};

// In order of increasing sharding; the order error messages list them in.
constexpr NamedStrategy kNamedStrategies[] = {
    {"no_shard", proto::NO_SHARD, Strategy::kNoShard},
    {"shard_optimizer", proto::SHARD_OPTIMIZER, Strategy::kShardOptimizer},
    {"shard_grad_op", proto::SHARD_GRAD_OP, Strategy::kShardGradOp},
    {"full_shard", proto::FULL_SHARD, Strategy::kFullShard},
    {"hybrid_shard", proto::HYBRID_SHARD, Strategy::kHybridShard},
};

}  // namespace

absl::StatusOr<proto::ShardingStrategy> ParseShardingStrategy(absl::string_view name) {
  for (const NamedStrategy& named : kNamedStrategies) {
    if (name == named.name) return named.strategy;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sharding strategy \"", name,
                   "\"; valid names: ", ValidShardingStrategyNames()));
}

std::string ShardingStrategyName(proto::ShardingStrategy strategy) {
  for (const NamedStrategy& named : kNamedStrategies) {
    if (strategy == named.strategy) return named.name;
  }
  return "unspecified";
}

std::string ValidShardingStrategyNames() {
  std::string names;
  for (const NamedStrategy& named : kNamedStrategies) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", named.name);
  }
  return names;
}

proto::ShardingStrategy ToPlanStrategy(Strategy strategy) {
  for (const NamedStrategy& named : kNamedStrategies) {
    if (strategy == named.typed) return named.strategy;
  }
  return proto::SHARDING_STRATEGY_UNSPECIFIED;
}

absl::StatusOr<Strategy> StrategyOfPlan(proto::ShardingStrategy strategy) {
  for (const NamedStrategy& named : kNamedStrategies) {
    if (strategy == named.strategy) return named.typed;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sharding strategy is unspecified (enum value ", static_cast<int>(strategy),
                   "); set one of: ", ValidShardingStrategyNames()));
}

proto::ShardedState ShardedStateOf(proto::ShardingStrategy strategy) {
  proto::ShardedState state;
  switch (strategy) {
    case proto::FULL_SHARD:
    case proto::HYBRID_SHARD:
      state.set_parameters(true);
      state.set_gradients(true);
      state.set_optimizer_state(true);
      break;
    case proto::SHARD_GRAD_OP:
      state.set_gradients(true);
      state.set_optimizer_state(true);
      break;
    case proto::SHARD_OPTIMIZER:
      state.set_optimizer_state(true);
      break;
    default:  // NO_SHARD (and unspecified): nothing sharded.
      break;
  }
  return state;
}

}  // namespace plan
}  // namespace fsdp
