// File: fsdp/train/unit_optimizer.h
//
// The optimizer as the training step sees it: an update of one unit's
// parameters from its averaged gradients, element by element, with state
// (moments) kept per unit and allocated through the MemoryTracker.
// Element-wise is the point: the replicated strategy calls it on a unit's
// full flat buffer, the sharded ones on this rank's shard, and each element
// gets the same arithmetic either way.
//
// MakeUnitOptimizer() (fsdp/train/unit_optimizers.h) builds AdamW or SGD
// over fsdp/optim/.
#ifndef FSDP_TRAIN_UNIT_OPTIMIZER_H_
#define FSDP_TRAIN_UNIT_OPTIMIZER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"

namespace fsdp {

class UnitOptimizer {
 public:
  virtual ~UnitOptimizer() = default;

  // Registers unit `unit` (0, 1, 2, ... in order) with `numel` elements and
  // allocates its state through `tracker` (MemoryCategory::kOptimizerState).
  virtual absl::Status AddUnit(int unit, int64_t numel, MemoryTracker& tracker) = 0;

  // Updates `params` in place from `grads` (both the unit's `numel` elements)
  // with learning rate `lr`; `step` is the 1-based optimizer step (AdamW's
  // bias correction).
  virtual absl::Status StepUnit(int unit, absl::Span<float> params,
                                absl::Span<const float> grads, float lr, int step) = 0;
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_UNIT_OPTIMIZER_H_
