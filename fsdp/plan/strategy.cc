// File: fsdp/plan/strategy.cc
#include "fsdp/plan/strategy.h"

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace {

constexpr Strategy kAllStrategies[] = {
    Strategy::kNoShard, Strategy::kShardOptimizer, Strategy::kShardGradOp,
    Strategy::kFullShard, Strategy::kHybridShard};

}  // namespace

const char* StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kNoShard:
      return "no_shard";
    case Strategy::kShardOptimizer:
      return "shard_optimizer";
    case Strategy::kShardGradOp:
      return "shard_grad_op";
    case Strategy::kFullShard:
      return "full_shard";
    case Strategy::kHybridShard:
      return "hybrid_shard";
  }
  return "unknown";
}

absl::StatusOr<Strategy> ParseStrategy(absl::string_view name) {
  for (Strategy strategy : kAllStrategies) {
    if (name == StrategyName(strategy)) return strategy;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown strategy '", name,
      "'; valid: no_shard, shard_optimizer, shard_grad_op, full_shard, hybrid_shard"));
}

absl::Status CheckStrategyAvailable(Strategy strategy) {
  switch (strategy) {
    case Strategy::kNoShard:
    case Strategy::kShardOptimizer:
    case Strategy::kShardGradOp:
    case Strategy::kFullShard:
    case Strategy::kHybridShard:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("strategy value ", static_cast<int>(strategy), " is not a known strategy"));
}

}  // namespace fsdp
