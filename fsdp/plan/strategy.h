// File: fsdp/plan/strategy.h
//
// Which data-parallel strategy the training step runs (all five are
// implemented by fsdp/train/train_step.cc; docs/sharding.md compares them).
//
//   kNoShard         replicated (DDP / ZeRO-0)
//   kShardOptimizer  optimizer state sharded (ZeRO-1)
//   kShardGradOp     gradients + optimizer state sharded (ZeRO-2)
//   kFullShard       parameters too (ZeRO-3 / FSDP)
//   kHybridShard     full_shard within a node, replicated across nodes
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(Strategy s, ParseStrategy("no_shard"));
//   FSDP_RETURN_IF_ERROR(CheckStrategyAvailable(s));
#ifndef FSDP_PLAN_STRATEGY_H_
#define FSDP_PLAN_STRATEGY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {

enum class Strategy {
  kNoShard,
  kShardOptimizer,
  kShardGradOp,
  kFullShard,
  kHybridShard,
};

// The flag spelling: "no_shard", "shard_optimizer", "shard_grad_op",
// "full_shard", "hybrid_shard".
const char* StrategyName(Strategy strategy);

// Parses a flag spelling. kInvalidArgument listing the valid names otherwise.
absl::StatusOr<Strategy> ParseStrategy(absl::string_view name);

// OK for strategies this build's training step runs (every one of them);
// kept so callers that validate a strategy need not change.
absl::Status CheckStrategyAvailable(Strategy strategy);

}  // namespace fsdp

#endif  // FSDP_PLAN_STRATEGY_H_
