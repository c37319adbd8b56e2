// File: fsdp/train/strategy.h
//
// Which data-parallel strategy the training step runs. Only kNoShard (every
// rank holds full parameters, gradients and optimizer state; gradients are
// averaged across ranks after backward) is implemented; the sharded ones
// follow the same per-unit flat-buffer runtime (fsdp/train/flat_unit.h) and are
// named here so that flags, configs and the step's switch already know them.
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
#ifndef FSDP_TRAIN_STRATEGY_H_
#define FSDP_TRAIN_STRATEGY_H_

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

// OK for strategies this build's training step runs; kUnimplemented, saying
// which strategy is not available yet and which one to use, for the rest.
absl::Status CheckStrategyAvailable(Strategy strategy);

}  // namespace fsdp

#endif  // FSDP_TRAIN_STRATEGY_H_
