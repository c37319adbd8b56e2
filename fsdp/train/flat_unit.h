// File: fsdp/train/flat_unit.h
//
// One model unit's flat buffers and the state of its gradients within a step.
// [Note: flat buffers] Every unit owns ONE parameter allocation and ONE
// gradient allocation (llm.c malloc_and_point_parameters); the model receives
// spans into them, parameter by parameter in UnitSpec order. Both are padded
// with zeros to a multiple of the world size, so the unit splits into
// world_size equal shards: rank r owns [r * shard_numel, (r+1) * shard_numel).
// The replicated strategy uses the same padded layout as the sharded ones so
// that its gradient reduction (reduce-scatter, then all-gather) and the
// per-shard arithmetic in between are the very ones the sharded strategies
// run, and the two can agree bit for bit.
//
// [Note: gradient state machine] Within one optimizer step a unit's gradients
// move through
//
//   kIdle --Backward--> kAccumulated --StartReduction--> kReduceScattering
//     ^                   |   ^ (more micro-batches)          |
//     |                   +---+            FinishReduceScatter (scale shard,
//     |                                     post all-gather)  v
//     +----ZeroGrads---- kReduced <--FinishAllGather-- kAllGathering
//
// Each method checks the state it is called in and returns
// FailedPreconditionError naming the unit, the call, the current state and
// the state(s) it needed. The sharded strategies add parameter states
// (sharded / unsharded) beside these and stop after the reduce-scatter.
//
// Not thread-safe: one training thread drives every unit.
#ifndef FSDP_TRAIN_FLAT_UNIT_H_
#define FSDP_TRAIN_FLAT_UNIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/param_spec.h"
#include "fsdp/train/comm_wait_clock.h"

namespace fsdp {

// Where one unit's elements lie in its padded flat buffers.
struct FlatUnitLayout {
  int unit_index = 0;
  std::string name;
  int64_t numel = 0;         // real parameters, as UnitSpec::numel()
  int64_t padded_numel = 0;  // numel rounded up to a multiple of world_size
  int64_t shard_numel = 0;   // padded_numel / world_size
  int world_size = 1;

  int64_t padding() const { return padded_numel - numel; }
  int64_t shard_offset(int rank) const { return int64_t{rank} * shard_numel; }
};

// Pads unit `unit_index` for `world_size` ranks (same rule as fsdp/plan/:
// ceil(numel / world_size) * world_size). InvalidArgument for world_size < 1
// or an empty unit.
absl::StatusOr<FlatUnitLayout> MakeFlatUnitLayout(const UnitSpec& spec, int unit_index,
                                                  int world_size);

enum class GradState {
  kIdle,               // zero; nothing accumulated since the last step
  kAccumulated,        // this rank's (scaled) gradients summed over micro-batches
  kReduceScattering,   // reduce-scatter (sum) into the shard buffer in flight
  kAllGathering,       // shard averaged; all-gather back into grads in flight
  kReduced,            // grads hold the average over ranks on every rank
};
const char* GradStateName(GradState state);

class FlatUnit {
 public:
  // Allocates the padded parameter and gradient buffers and the gradient
  // shard staging buffer through `tracker`, all zeroed. The tracker must
  // outlive the unit.
  static absl::StatusOr<std::unique_ptr<FlatUnit>> Create(const FlatUnitLayout& layout,
                                                          MemoryTracker& tracker);

  // If a collective on this unit's buffers is still in flight (a step failed
  // midway), waits for it up to kDrainTimeout before freeing the buffers it
  // reads and writes.
  ~FlatUnit();
  static constexpr absl::Duration kDrainTimeout = absl::Seconds(5);

  const FlatUnitLayout& layout() const { return layout_; }
  GradState grad_state() const { return grad_state_; }

  // The model's views: the first layout().numel elements (no padding).
  absl::Span<const float> params() const;
  absl::Span<float> mutable_params();
  absl::Span<const float> grads() const;
  absl::Span<float> mutable_grads();
  // The whole padded buffers, for collectives and digests of the layout.
  absl::Span<const float> padded_params() const { return params_.span(); }
  absl::Span<const float> padded_grads() const { return grads_.span(); }
  // This rank's shard of the gradients (after FinishReduceScatter: averaged).
  absl::Span<const float> grad_shard() const { return grad_shard_.span(); }

  // Marks one micro-batch's backward done (kIdle|kAccumulated -> kAccumulated).
  // The model already added its gradients into mutable_grads().
  absl::Status MarkBackwardDone();

  // kAccumulated -> kReduceScattering: posts the sum reduce-scatter of the
  // padded gradients into this rank's shard and returns at once.
  absl::Status StartReduction(comm::Communicator& comm);

  // kReduceScattering -> kAllGathering: waits (up to `timeout`, the time
  // blocked is charged to `clock`) for the reduce-scatter, multiplies the
  // shard by `shard_scale` (1 / world_size: sum -> average), and posts the
  // all-gather of the shards back into the padded gradients.
  absl::Status FinishReduceScatter(comm::Communicator& comm, float shard_scale,
                                   absl::Duration timeout, CommWaitClock& clock);

  // kAllGathering -> kReduced: waits for the all-gather.
  absl::Status FinishAllGather(absl::Duration timeout, CommWaitClock& clock);

  // kReduced -> kIdle after the optimizer consumed the gradients. Also
  // allowed from kIdle (nothing to clear). Zeroes the gradients.
  absl::Status ZeroGrads();

 private:
  FlatUnit(FlatUnitLayout layout, FloatBuffer params, FloatBuffer grads, FloatBuffer grad_shard);
  absl::Status CheckState(const char* call, GradState expected) const;

  FlatUnitLayout layout_;
  FloatBuffer params_;      // padded_numel, MemoryCategory::kParameters
  FloatBuffer grads_;       // padded_numel, MemoryCategory::kGradients
  FloatBuffer grad_shard_;  // shard_numel, MemoryCategory::kCommBuffers
  GradState grad_state_ = GradState::kIdle;
  comm::WorkHandle pending_;  // the collective in flight, if any
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_FLAT_UNIT_H_
