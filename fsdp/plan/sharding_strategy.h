// File: fsdp/plan/sharding_strategy.h
//
// The five sharding strategies as the plan spells them (proto::ShardingStrategy,
// beside the trainer's Strategy of fsdp/plan/strategy.h), by name, and what
// each keeps sharded:
//
//   name              ZeRO    sharded between steps
//   no_shard          -       nothing (replicated data parallel)
//   shard_optimizer   1       optimizer state (+ fp32 master params)
//   shard_grad_op     2       optimizer state, gradients
//   full_shard        3       optimizer state, gradients, parameters
//   hybrid_shard      3 in G  as full_shard within groups of G ranks,
//                             replicated across groups
//
//   FSDP_ASSIGN_OR_RETURN(proto::ShardingStrategy s,
//                         ParseShardingStrategy("full_shard"));
#ifndef FSDP_PLAN_SHARDING_STRATEGY_H_
#define FSDP_PLAN_SHARDING_STRATEGY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fsdp/plan/strategy.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

// "no_shard|shard_optimizer|shard_grad_op|full_shard|hybrid_shard" (exact,
// lower case). An unknown name is InvalidArgument listing the valid names.
absl::StatusOr<proto::ShardingStrategy> ParseShardingStrategy(absl::string_view name);

// The inverse of ParseShardingStrategy; "unspecified" for anything else.
std::string ShardingStrategyName(proto::ShardingStrategy strategy);

// "no_shard, shard_optimizer, shard_grad_op, full_shard, hybrid_shard".
std::string ValidShardingStrategyNames();

// The plan's spelling of the trainer's strategy (ShardPlan.strategy);
// SHARDING_STRATEGY_UNSPECIFIED for a value outside the enum.
proto::ShardingStrategy ToPlanStrategy(Strategy strategy);

// The inverse. InvalidArgument for SHARDING_STRATEGY_UNSPECIFIED (or any
// other value), listing the valid names.
absl::StatusOr<Strategy> StrategyOfPlan(proto::ShardingStrategy strategy);

// Which state `strategy` keeps sharded (the table above).
proto::ShardedState ShardedStateOf(proto::ShardingStrategy strategy);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_SHARDING_STRATEGY_H_
