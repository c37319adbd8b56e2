// File: fsdp/plan/sharding_options.h
//
// The sharding settings of a run, typed once: the planner lays the units out
// by them (fsdp/plan/shard_planner.h) and the training step schedules its
// collectives by them (fsdp/train/train_step.h). Both hold this one value
// (PlannerOptions::sharding, TrainStepOptions::sharding), and so does the
// run's TrainOptions, where the flags are parsed into it; a new sharding
// setting is a field here, its flag and its line in TrainOptionsToString.
//
//   ShardingOptions sharding;
//   FSDP_ASSIGN_OR_RETURN(sharding.strategy, ParseStrategy("hybrid_shard"));
//   sharding.group_size = 4;             // two replicas of a 4-way shard on 8 ranks
//   sharding.min_unit_numel = 1 << 20;   // merge units below 1M elements
//   FSDP_ASSIGN_OR_RETURN(sharding.precision, ParsePrecisionPolicy("bf16", ""));
//
// Checked by the planner (BuildShardPlan: InvalidArgument saying what to
// change) and, in the flags' words, by ValidateTrainOptions.
#ifndef FSDP_PLAN_SHARDING_OPTIONS_H_
#define FSDP_PLAN_SHARDING_OPTIONS_H_

#include <cstdint>

#include "fsdp/plan/precision_policy.h"
#include "fsdp/plan/strategy.h"

namespace fsdp {

struct ShardingOptions {
  Strategy strategy = Strategy::kNoShard;
  // hybrid_shard only: G, ranks per shard group (consecutive ranks), dividing
  // the world size. 0 for every other strategy.
  int group_size = 0;
  // Units whose parameter all-gather is started ahead of the unit computing
  // (forward: the next units; backward: the previous ones). 0 = none.
  int prefetch_depth = 1;
  // Most parameter all-gathers outstanding at once (>= 1).
  int max_gathers_in_flight = 2;
  // Merge consecutive model units into plan units of at least this many
  // elements (fewer, larger collectives); 0 = one plan unit per model unit.
  int64_t min_unit_numel = 0;
  // What the parameters, gradients, master and optimizer state are stored
  // and moved in (fsdp/plan/precision_policy.h): the plan's dtypes and the
  // unit's buffers ([Note: bf16 gradients] in fsdp/train/unit_state.h).
  PrecisionPolicy precision;
};

}  // namespace fsdp

#endif  // FSDP_PLAN_SHARDING_OPTIONS_H_
