// File: fsdp/checkpoint/memory_snapshots.h
//
// Copies of the training state in memory, so that after a rank's failure the
// survivors hand the state to the job's next attempt without a checkpoint on
// disk (train_gpt --buddy_every, docs/failures.md "Recovery from memory").
//
// Every K steps, at a step boundary, each rank copies its shard of the
// parameters and optimizer state (CheckpointShardRegions) into memory. When
// every shard has one holder (shard_optimizer, shard_grad_op, full_shard) it
// also sends the copy to the next rank on the ring (Communicator::Shift),
// which keeps it as its buddy copy: shard r then lives on ranks r and r+1
// (mod n), and any set of failed ranks that does not hold both copies of a
// shard leaves every shard on a survivor. With replicas (no_shard,
// hybrid_shard) another replica's own copy is the second copy, and nothing
// is sent.
//
// [Note: two generations] A Take writes the generation that is not
// committed; the caller commits it once every rank has finished its Take
// (proved by the next all-gather every rank makes, which a rank joins only
// after its Take). A failure during a Take leaves every survivor holding the
// committed generation; a rank that already committed the new one still
// holds the old one until its next Take, which cannot finish before every
// rank has finished this one. So some generation is held by every shard,
// and the survivors hand over every generation they hold complete.
//
//   FSDP_ASSIGN_OR_RETURN(auto snapshots, MemorySnapshots::Create(world, trainer, &tracker, t));
//   ... after step s:
//   FSDP_RETURN_IF_ERROR(snapshots->Take(s, manifest, timeout));
//   ... the step's all-gather ...
//   snapshots->Commit();
#ifndef FSDP_CHECKPOINT_MEMORY_SNAPSHOTS_H_
#define FSDP_CHECKPOINT_MEMORY_SNAPSHOTS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "fsdp/checkpoint/checkpointable_state.h"
#include "fsdp/checkpoint/state_region.h"
#include "fsdp/memory/memory_tracker.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {
namespace checkpoint {

// One shard's state at one step, as a survivor holds it: what its shard
// file would hold (regions over the copy) and the manifest of that step
// (complete but for the files).
struct SnapshotPiece {
  int64_t step = 0;
  int shard_rank = 0;  // the shard file it becomes: rank-<shard_rank>.bin
  std::vector<StateRegion> regions;
  const proto::CheckpointManifest* manifest = nullptr;
};

class MemorySnapshots {
 public:
  // Collective over `world`, the trainer's world: every rank learns the
  // layout of the previous rank's shard (for the buddy copy) and the
  // largest shard (what the shift sends). Allocates the copies through
  // `tracker` (MemoryCategory::kSnapshots), so a budget refuses them.
  static absl::StatusOr<std::unique_ptr<MemorySnapshots>> Create(comm::Communicator& world,
                                                                 CheckpointableState& state,
                                                                 MemoryTracker* tracker,
                                                                 absl::Duration timeout);

  // Collective: copies the state after `step` steps into the generation
  // that is not committed, and with buddy copies shifts it to the next rank.
  // `manifest` is the run's manifest of that step (RunManifest and the
  // run's records); the trainer's parts are filled in here.
  absl::Status Take(int64_t step, proto::CheckpointManifest manifest, absl::Duration timeout);

  // Every rank finished its last Take: its generation is the committed one.
  void Commit();

  // The copies of every generation this rank holds complete, newest first:
  // what it hands over after a failure (handover.h).
  std::vector<SnapshotPiece> CompletePieces();

  bool buddy_copies() const { return buddy_copies_; }
  // The step of the committed generation (-1: none yet).
  int64_t committed_step() const;
  // Bytes of all copies (both generations).
  int64_t bytes() const;
  // The last Take: the copy, and the shift to the next rank.
  absl::Duration last_copy_time() const { return last_copy_time_; }
  absl::Duration last_shift_time() const { return last_shift_time_; }

 private:
  struct Generation {
    int64_t step = -1;
    bool own_complete = false;
    bool buddy_complete = false;
    FloatBuffer own;    // this rank's shard, padded to max_numel_
    FloatBuffer buddy;  // the previous rank's (buddy copies only)
    proto::CheckpointManifest manifest;
  };

  MemorySnapshots(CheckpointableState& state, comm::Communicator& world)
      : state_(state), world_(world) {}

  // Regions over `data` laid out as `layout`.
  static std::vector<StateRegion> RegionsOver(const std::vector<proto::Extent>& layout,
                                              FloatBuffer& data);

  CheckpointableState& state_;
  comm::Communicator& world_;
  bool buddy_copies_ = false;
  int previous_rank_ = 0;
  int previous_shard_rank_ = 0;
  std::vector<proto::Extent> own_layout_;
  std::vector<proto::Extent> previous_layout_;
  std::array<Generation, 2> generations_;
  int committed_ = -1;  // index into generations_, -1: none
  int pending_ = -1;    // taken, not yet committed
  absl::Duration last_copy_time_;
  absl::Duration last_shift_time_;
};

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_MEMORY_SNAPSHOTS_H_
