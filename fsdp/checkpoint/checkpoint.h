// File: fsdp/checkpoint/checkpoint.h
//
// Saving and loading a DataParallelTrainer's state as a sharded checkpoint,
// collectively over the job's ranks. The layout on disk is
// fsdp/checkpoint/checkpoint_dir.h; the manifest is proto/checkpoint.proto;
// docs/checkpoints.md draws both.
//
// Save, in order (every rank calls SaveCheckpoint at the same step):
//   1. rank 0 creates DIR/step-N.partial/ (removing a stale one); all agree
//   2. the ranks of replica group 0 each write and fsync rank-<r>.bin: their
//      owned shard of the fp32 parameters and of every optimizer state, so
//      no two ranks write the same bytes; all exchange the file entries
//   3. rank 0 writes and fsyncs manifest.pb (plus manifest.txt), fsyncs the
//      directory, renames step-N.partial to step-N (the commit point) and
//      fsyncs DIR; then prunes to the newest `keep`; all agree
// If any rank fails at any stage, every rank returns the same error, the
// partial directory is removed, and the previous checkpoints and the
// trainer's state are untouched: saving only reads the trainer.
//
// Load: every rank opens the checkpoint, checks it holds the same model and
// optimizer, reads exactly the regions its own plan needs (any world size,
// any strategy: the model vector does not depend on the plan; see
// [Note: the model vector] in proto/checkpoint.proto) and all agree.
//
//   FSDP_ASSIGN_OR_RETURN(SaveStats saved, SaveCheckpoint(world, trainer, base, options));
//   FSDP_ASSIGN_OR_RETURN(LoadStats loaded, LoadCheckpoint(world, trainer, path, timeout, &tracker));
#ifndef FSDP_CHECKPOINT_CHECKPOINT_H_
#define FSDP_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "fsdp/checkpoint/checkpointable_state.h"
#include "fsdp/checkpoint/shard_file.h"
#include "fsdp/memory/memory_tracker.h"
#include "proto/checkpoint.pb.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace checkpoint {

struct SaveOptions {
  std::string dir;  // the --checkpoint_dir
  // Keep the newest `keep` complete checkpoints, removing older ones after a
  // successful save; 0 keeps all.
  int keep = 0;
  absl::Duration timeout = absl::Seconds(120);  // each agreement step
  int64_t chunk_bytes = kDefaultChunkBytes;
  // Called while a rank writes (Communicator::KeepAlive): under hang
  // detection, ranks waiting for a slow writer must not take it for hung.
  std::function<void()> keep_alive;
};

struct SaveStats {
  std::string path;            // DIR/step-N
  int64_t step = 0;
  int64_t rank_bytes = 0;      // bytes this rank wrote (0 if it writes no shard)
  int64_t total_bytes = 0;     // all shard files
  absl::Duration write_time;   // this rank's shard file, fsync included
  absl::Duration total_time;   // from the call to the agreement on the commit
  std::vector<std::string> pruned;    // checkpoints removed after the commit
  std::vector<std::string> warnings;  // e.g. a prune that failed
};

// The model's tensors as a checkpoint records them: every parameter of the
// plan's units in model order with its model-vector offset.
std::vector<proto::TensorEntry> ModelTensors(const proto::ShardPlan& plan);

// Saves `trainer`'s state after trainer.steps_taken() steps. `manifest`
// holds everything but the step, the plan, the tensors, the optimizer, the
// files and the time, which are filled in here. Collective over `world`,
// which must be the trainer's world.
absl::StatusOr<SaveStats> SaveCheckpoint(comm::Communicator& world,
                                         CheckpointableState& trainer,
                                         proto::CheckpointManifest manifest,
                                         const SaveOptions& options);

// The parts of a checkpoint's manifest that come from the trainer after
// `step` steps: the format, the step, the tensors, the plan and the
// optimizer. What stays for the caller: the run's own fields before, the
// files and the time after.
void CompleteManifest(CheckpointableState& trainer, int64_t step,
                      proto::CheckpointManifest& manifest);

// The commit of a save, as rank 0 makes it: writes `manifest` (complete,
// files included) into `partial`, syncs it, renames it to `final_path` (a
// checkpoint of that step already there is replaced) inside options.dir and
// prunes to options.keep. Also what assembles a checkpoint from memory
// copies (fsdp/checkpoint/handover.h).
absl::Status CommitPartialCheckpoint(const std::string& partial, const std::string& final_path,
                                     const SaveOptions& options,
                                     const proto::CheckpointManifest& manifest, SaveStats& stats);

struct LoadStats {
  int64_t step = 0;          // the trainer continues after this many steps
  bool same_plan = false;    // the checkpoint's plan fingerprint is ours
  int64_t rank_bytes_read = 0;
  absl::Duration time;
};

// Loads `path` (a complete checkpoint directory) into `trainer`, which
// must be freshly created. InvalidArgument naming what differs when the
// checkpoint holds another model or optimizer; the reader's errors
// (NotFound, DataLoss naming the file) otherwise. Every rank returns the
// same status. `tracker` counts the read buffer.
// The reader calls world.KeepAlive() after every chunk.
absl::StatusOr<LoadStats> LoadCheckpoint(comm::Communicator& world, CheckpointableState& trainer,
                                         const std::string& path, absl::Duration timeout,
                                         MemoryTracker* tracker);

// OK if `manifest` holds the same tensors (names and shapes, in order) as
// `tensors`; otherwise InvalidArgument naming the first difference.
absl::Status CheckSameModel(const proto::CheckpointManifest& manifest,
                            const std::vector<proto::TensorEntry>& tensors);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_CHECKPOINT_H_
