// File: fsdp/plan/shard_planner.h
//
// The shard planner: from a model's UnitSpecs and the sharding options, a
// ShardPlan (proto/shard_plan.proto) saying how each unit is laid out as one
// padded flat buffer and which slice each rank owns. Pure and deterministic:
// no communication, no allocation of model-sized buffers, the same plan on
// every rank and in every run. Its cost is O(params + units * shard_group_size)
// (O(params + units) with include_rank_ranges = false, which is what memory
// prediction for huge models and worlds uses).
//
//   PlannerOptions options;
//   FSDP_ASSIGN_OR_RETURN(options.sharding.strategy, ParseStrategy("hybrid_shard"));
//   options.world_size = 8;
//   options.sharding.group_size = 4;            // two replicas of a 4-way shard
//   options.sharding.min_unit_numel = 1 << 20;  // merge units below 1M elements
//   FSDP_ASSIGN_OR_RETURN(proto::ShardPlan plan, BuildShardPlan(units, options));
//   std::cout << ShardPlanToText(plan);  // --dump_plan
//
// Units with zero parameters are allowed (a unit that only computes, e.g. an
// activation): with merging on they join their neighbours; without, they
// become plan units with flat_numel = padded_numel = 0, whose collectives the
// runtime skips. Parameters must have positive dimensions and unique names.
#ifndef FSDP_PLAN_SHARD_PLANNER_H_
#define FSDP_PLAN_SHARD_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/nn/param_spec.h"
#include "fsdp/plan/sharding_options.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

// Bumped when the meaning of a ShardPlan field changes (ShardPlan.format_version).
inline constexpr int kShardPlanFormatVersion = 1;

struct PlannerOptions {
  // The run's sharding settings (fsdp/plan/sharding_options.h): the strategy,
  // group size, prefetch, merging and the precision policy, whose parameter
  // and gradient dtypes are the plan's. The training step holds the same
  // value (TrainStepOptions::sharding).
  ShardingOptions sharding;
  int world_size = 1;  // ranks in the job, >= 1
  // false: leave out UnitPlan.shards and the rank group lists (a summary plan,
  // cheap for any world size; the memory model needs nothing more).
  bool include_rank_ranges = true;
};

// Builds the plan. InvalidArgument, with what to change, for: a strategy
// outside the enum, world_size < 1, a group_size that is out of range, does not
// divide world_size (the message lists the sizes that do) or is set for a
// strategy other than hybrid_shard, negative min_unit_numel or
// prefetch_depth, max_gathers_in_flight < 1, no units, and units or params
// with empty or duplicate names, non-positive dimensions or an element count
// beyond 2^58.
absl::StatusOr<proto::ShardPlan> BuildShardPlan(const std::vector<UnitSpec>& units,
                                                const PlannerOptions& options);

// The ranks a unit's padded buffer is split over: world_size, or group_size
// for hybrid_shard. (Options are assumed valid.)
int ShardGroupSizeOf(const PlannerOptions& options);

// The range `shard_rank` owns in `unit`, computed from its numel fields (what
// UnitPlan.shards records; also works on a summary plan without them).
proto::ShardRange ShardRangeOf(const proto::UnitPlan& unit, int shard_rank);

// A global rank's rank within its shard group (global_rank % G).
int ShardRankOf(const proto::ShardPlan& plan, int global_rank);

// The plan as text protobuf (google::protobuf::TextFormat), for --dump_plan.
std::string ShardPlanToText(const proto::ShardPlan& plan);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_SHARD_PLANNER_H_
