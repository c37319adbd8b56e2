// File: fsdp/nn/model.h
//
// A model as an ordered list of units. The model computes; it never
// communicates and knows nothing of sharding. The training step (fsdp/) owns
// every unit's flat parameter and gradient buffers and hands the model a span
// of one unit's parameters only while that unit computes, which is exactly
// what sharding needs: a unit's parameters may live at a different address on
// every call (gathered into a fresh buffer), so units never keep pointers into
// them between calls.
//
// One step, as the training loop drives it:
//
//   for (int u = 0; u < model.num_units(); ++u)            // forward, in order
//     FSDP_RETURN_IF_ERROR(model.ForwardUnit(u, params[u], batch));
//   float loss = model.loss();
//   for (int u = model.num_units() - 1; u >= 0; --u)        // backward, reversed
//     FSDP_RETURN_IF_ERROR(model.BackwardUnit(u, params[u], grads[u], scale, write));
//
// Activations saved for backward live inside the model (counted by its
// MemoryTracker as activations) from a unit's forward to its backward.
#ifndef FSDP_NN_MODEL_H_
#define FSDP_NN_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "fsdp/nn/bf16_convert.h"
#include "fsdp/nn/grad_write.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

// One micro-batch of token sequences: inputs and next-token targets, both
// (batch_size, seq_len) row-major.
struct Batch {
  int batch_size = 0;
  int seq_len = 0;
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;
};

class Model {
 public:
  virtual ~Model() = default;

  // The units, in forward order; their params give each flat buffer's layout.
  virtual const std::vector<UnitSpec>& units() const = 0;
  int num_units() const { return static_cast<int>(units().size()); }

  // Writes unit `unit`'s initial parameters into `params` (units()[unit].numel()
  // floats). Deterministic in (seed, unit), independent of world size.
  virtual void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const = 0;

  // Runs unit `unit`'s forward. Units run in order 0..n-1 for one batch; the
  // first unit reads batch.inputs, the last computes the loss on batch.targets.
  virtual absl::Status ForwardUnit(int unit, absl::Span<const float> params,
                                   const Batch& batch) = 0;

  // Mean cross-entropy over the batch's tokens, after the last unit's forward.
  virtual float loss() const = 0;

  // Runs unit `unit`'s backward, in order n-1..0 after a complete forward,
  // and frees the unit's saved activations. d(loss_scale * loss)/d(params)
  // goes into `grads` (same layout as params) as `write` says
  // (fsdp/nn/grad_write.h): kAdd adds it, so micro-batches accumulate;
  // kOverwrite means `grads` hold nothing yet (any values), and every element
  // must be written: the first micro-batch, with no zeroing pass before it.
  // A model whose layers only add zeroes `grads` first under kOverwrite.
  virtual absl::Status BackwardUnit(int unit, absl::Span<const float> params,
                                    absl::Span<float> grads, float loss_scale,
                                    GradWrite write) = 0;

  // The bf16 parameter layout (the trainer's --precision=bf16): the same two
  // calls with the unit's parameters as bf16 bits, as the trainer gathers
  // them. Gradients stay fp32. A model that has no bf16 compute path keeps
  // these defaults, and the trainer refuses the layout before the first step.
  virtual bool accepts_bf16_params() const { return false; }
  virtual absl::Status ForwardUnitBf16(int unit, absl::Span<const uint16_t> params,
                                       const Batch& batch) {
    return absl::UnimplementedError("this model takes fp32 parameters only");
  }
  virtual absl::Status BackwardUnitBf16(int unit, absl::Span<const uint16_t> params,
                                        absl::Span<float> grads, float loss_scale,
                                        GradWrite write) {
    return absl::UnimplementedError("this model takes fp32 parameters only");
  }

  // Under 2-byte gradients ([Note: bf16 gradients] in fsdp/train/unit_state.h),
  // the first micro-batch's backward: what BackwardUnitBf16 with kOverwrite
  // gives, rounded to bf16 into `grads16` (the same layout, every element
  // written, the bits ToBf16 gives the fp32 gradients). `grads` is fp32
  // scratch of the same size for what the model computes in fp32. This
  // default computes everything there and rounds it; a model whose products
  // write their weight gradients in bf16 straight from their accumulators
  // saves writing, reading and rounding those fp32 gradients.
  virtual absl::Status BackwardUnitBf16ToBf16Grads(int unit, absl::Span<const uint16_t> params,
                                                   absl::Span<float> grads,
                                                   absl::Span<uint16_t> grads16,
                                                   float loss_scale) {
    if (grads16.size() != grads.size()) {
      return absl::InvalidArgumentError(absl::StrCat("BackwardUnitBf16ToBf16Grads(", unit, "): ",
                                                     grads16.size(), " bf16 gradients for ",
                                                     grads.size(), " fp32 ones"));
    }
    absl::Status status = BackwardUnitBf16(unit, params, grads, loss_scale, GradWrite::kOverwrite);
    if (status.ok()) ToBf16(grads16.data(), grads.data(), static_cast<int64_t>(grads.size()));
    return status;
  }
};

}  // namespace fsdp

#endif  // FSDP_NN_MODEL_H_
