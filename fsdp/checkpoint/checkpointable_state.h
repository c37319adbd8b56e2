// File: fsdp/checkpoint/checkpointable_state.h
//
// What fsdp/checkpoint needs of a trainer to save and restore it, and no
// more: where this rank's state lives ([Note: checkpoint regions] in
// state_region.h), the plan that lays it out, the steps taken and the
// optimizer that owns part of it. The trainer (fsdp/train/train_step.h
// DataParallelTrainer) implements it, so the dependency runs one way:
// fsdp/train includes this header, fsdp/checkpoint includes nothing of
// fsdp/train.
//
//   FSDP_ASSIGN_OR_RETURN(SaveStats saved, SaveCheckpoint(world, trainer, manifest, save));
#ifndef FSDP_CHECKPOINT_CHECKPOINTABLE_STATE_H_
#define FSDP_CHECKPOINT_CHECKPOINTABLE_STATE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fsdp/checkpoint/state_region.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {

// The optimizer a checkpoint records, and a resume must match.
struct CheckpointedOptimizer {
  std::string kind;                      // "adamw", "sgd"
  std::vector<std::string> state_names;  // e.g. {"exp_avg", "exp_avg_sq"}
  float weight_decay = 0.0f;
};

class CheckpointableState {
 public:
  virtual ~CheckpointableState() = default;

  // Optimizer steps taken; a save records it, a load sets it.
  virtual int steps_taken() const = 0;
  // The shard plan the state is laid out by (identical on every rank).
  virtual const proto::ShardPlan& plan() const = 0;
  virtual CheckpointedOptimizer checkpointed_optimizer() const = 0;
  // Whether this rank writes a shard file: the ranks of one replica hold
  // every element once between them.
  virtual bool saves_checkpoint_shard() const = 0;
  // This rank's regions to save, in unit order; empty on ranks that do not
  // save. Called between steps.
  virtual absl::StatusOr<std::vector<StateRegion>> CheckpointSaveRegions() = 0;
  // This rank's shard's regions whether or not it saves them: on a rank
  // outside replica group 0, the same elements as those of the rank of
  // group 0 at shard_rank() (the memory snapshots of fsdp/checkpoint/
  // memory_snapshots.h copy them on every rank). Called between steps.
  virtual absl::StatusOr<std::vector<StateRegion>> CheckpointShardRegions() = 0;
  // This rank's place in its shard group: the rank of group 0 whose shard
  // file holds the same elements.
  virtual int shard_rank() const = 0;
  // This rank's regions to fill on a load; the loader fills every one, then
  // calls FinishCheckpointLoad.
  virtual absl::StatusOr<std::vector<StateRegion>> CheckpointLoadRegions() = 0;
  // The state continues as if `steps_taken` steps had been taken.
  virtual absl::Status FinishCheckpointLoad(int steps_taken) = 0;
};

}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_CHECKPOINTABLE_STATE_H_
