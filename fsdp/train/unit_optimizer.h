// File: fsdp/train/unit_optimizer.h
//
// The optimizer as the training step sees it: an update of one unit's
// parameters from its averaged gradients, element by element, with state
// (moments) kept per unit and allocated through the MemoryTracker.
// Element-wise is the point: the replicated strategy calls it on a unit's
// full flat buffer, the sharded ones on this rank's shard, and each element
// gets the same arithmetic either way.
//
// MakeUnitOptimizer() (fsdp/run/unit_optimizers.h) builds AdamW or SGD
// over fsdp/optim/.
#ifndef FSDP_TRAIN_UNIT_OPTIMIZER_H_
#define FSDP_TRAIN_UNIT_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/dtype_buffer.h"

namespace fsdp {

class UnitOptimizer {
 public:
  virtual ~UnitOptimizer() = default;

  // One optimizer step of unit `unit`, the trainer's one entry: `master`
  // (fp32, PrecisionPolicy::master_dtype) updated in place from `grads` (in
  // the reduce dtype, fp32 or bf16) times `grad_scale`, then `params` (what
  // the model reads, in the parameter dtype) refreshed from it: nothing when
  // they are the master's own memory, the master's bf16 rounding otherwise.
  // All three of the unit's numel (or shard's) elements. Dispatches once on
  // the dtypes to StepUnit or StepUnitBf16 below; InvalidArgument for bf16
  // gradients with parameters that are not bf16 (no policy makes them).
  absl::Status Step(int unit, absl::Span<float> master, ConstDtypeSpan grads, float grad_scale,
                    DtypeSpan params, float lr, int step);

  // Registers unit `unit` (0, 1, 2, ... in order) with `numel` elements and
  // allocates its state through `tracker` (MemoryCategory::kOptimizerState).
  virtual absl::Status AddUnit(int unit, int64_t numel, MemoryTracker& tracker) = 0;

  // The kernels Step dispatches to, one per gradient dtype.
  // Updates `params` in place from `grads` (both the unit's `numel` elements)
  // times `grad_scale` (the clip scale, 1 for none), with learning rate `lr`;
  // `step` is the 1-based optimizer step (AdamW's bias correction). The
  // scale multiplies each gradient as it is read, bit for bit what scaling
  // the gradients in place first gives, without that pass over them.
  virtual absl::Status StepUnit(int unit, absl::Span<float> params,
                                absl::Span<const float> grads, float grad_scale, float lr,
                                int step) = 0;

  // The same step for the bf16 parameter layout with 2-byte gradients:
  // `grads` are bf16 (widened exactly), and the updated params' bf16
  // roundings go to `params_bf16` (all three of the unit's numel elements).
  // The result must equal, bit for bit, StepUnit on the widened gradients
  // followed by ToBf16(params_bf16, params). This default does exactly that
  // through a temporary copy; AdamW and SGD override it to do it in one
  // pass, block by block in L1 (fsdp/optim/adamw.h).
  virtual absl::Status StepUnitBf16(int unit, absl::Span<float> params,
                                    absl::Span<const uint16_t> grads, float grad_scale,
                                    absl::Span<uint16_t> params_bf16, float lr, int step);

  // --- Checkpoints (fsdp/checkpoint/) -------------------------------------
  // "adamw" or "sgd".
  virtual std::string kind() const = 0;
  // The names of the per-element state tensors, e.g. {"exp_avg",
  // "exp_avg_sq"}; empty for SGD without momentum.
  virtual std::vector<std::string> StateNames() const = 0;
  // Unit `unit`'s state tensors in StateNames() order, each of the unit's
  // numel elements (element i belongs to the same parameter element as
  // params[i] in StepUnit). A loader writes into them.
  virtual absl::StatusOr<std::vector<absl::Span<float>>> MutableUnitState(int unit) = 0;
  // Sets the number of updates unit `unit` has taken (after loading its
  // state), so that the next StepUnit must be step + 1.
  virtual absl::Status SetUnitStep(int unit, int64_t step) = 0;
  virtual float weight_decay() const = 0;
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_UNIT_OPTIMIZER_H_
