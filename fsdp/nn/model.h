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
//     FSDP_RETURN_IF_ERROR(model.BackwardUnit(u, params[u], {grads[u]}, scale, write));
//
// Parameters and gradients are dtype-tagged views (fsdp/nn/dtype_buffer.h):
// the precision is data the model reads, not an entry per variant.
//
// Activations saved for backward live inside the model (counted by its
// MemoryTracker as activations) from a unit's forward to its backward.
#ifndef FSDP_NN_MODEL_H_
#define FSDP_NN_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/dtype.h"
#include "fsdp/nn/dtype_buffer.h"
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

// Where a unit's backward puts d(loss_scale * loss)/d(params): `values`, the
// unit's gradients in their dtype (fp32 or bf16, the same layout as the
// parameters). A 2-byte `values` ([Note: bf16 gradients] in
// fsdp/train/unit_state.h) is written whole, never added into (GradWrite
// kOverwrite), and comes with `fp32_scratch` of its size for what the model
// computes in fp32 before rounding; a model whose products can write their
// weight gradients in bf16 straight from their accumulators does so there and
// never writes, reads and rounds those fp32 values.
//
// Exact gradients (int64 `values`, docs/exact.md): each parameter's
// gradient is a fixed-point sum (fsdp/nn/fixed_point_sum.h) of
// contributions that do not depend on how the batch is split: one per
// sequence (per token for the embedding tables), each the gradient of
// loss_scale times the SUM of the sequence's token losses (the trainer
// divides by the global token count once, when it converts the sums). Only a
// per_sequence_products() model writes them; `fp32_scratch` (the unit's
// size) holds one sequence's gradients before they are added, kOverwrite
// zeroes the sums first, kAdd adds to them.
struct ExactGradSums {
  // Per parameter of the unit (spec order): the exponent E of its sum, which
  // every rank agreed on before the step.
  absl::Span<const int> exponents;
  // Per parameter: LargerMagnitude of the value there and of every
  // contribution added (with the agreed maxima, whether the sum fits E).
  absl::Span<float> max_abs;
};

struct UnitGrads {
  DtypeSpan values;
  absl::Span<float> fp32_scratch;
  ExactGradSums exact;  // int64 values only
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

  // The dtype the model reads its parameters in (ForwardUnit and
  // BackwardUnit refuse any other): the trainer stores and gathers them in it
  // (fsdp/plan/precision_policy.h) and refuses a policy that differs before
  // the first step.
  virtual comm::Dtype param_dtype() const { return comm::Dtype::kFloat32; }

  // Whether every matrix product runs over one sequence at a time (rows or
  // inner dimension = seq_len), so that a sequence's contributions have the
  // same bits however many sequences a micro-batch holds (docs/exact.md,
  // "Products"). Exact (int64) gradients need it; a model that says so
  // refuses any other gradients.
  virtual bool per_sequence_products() const { return false; }

  // The mean loss of each sequence of the last forward, in batch order
  // (per_sequence_products models; empty otherwise): what the exact loss
  // sums across micro-batches and ranks.
  virtual absl::Span<const float> sequence_losses() const { return {}; }

  // Runs unit `unit`'s forward on its parameters `params` (param_dtype()).
  // Units run in order 0..n-1 for one batch; the first unit reads
  // batch.inputs, the last computes the loss on batch.targets.
  virtual absl::Status ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) = 0;

  // Mean cross-entropy over the batch's tokens, after the last unit's forward.
  virtual float loss() const = 0;

  // Runs unit `unit`'s backward, in order n-1..0 after a complete forward,
  // and frees the unit's saved activations. d(loss_scale * loss)/d(params)
  // goes into `grads` (UnitGrads above) as `write` says
  // (fsdp/nn/grad_write.h): kAdd adds it, so micro-batches accumulate;
  // kOverwrite means the gradients hold nothing yet (any values), and every
  // element must be written: the first micro-batch, with no zeroing pass
  // before it. A model whose layers only add zeroes them first under
  // kOverwrite.
  virtual absl::Status BackwardUnit(int unit, ConstDtypeSpan params, UnitGrads grads,
                                    float loss_scale, GradWrite write) = 0;
};

// For a model's entries, `what` naming the call ("BackwardUnit(3)"):
// FailedPrecondition unless `params` are `dtype` (the model's configuration
// decides it); InvalidArgument unless `grads` are fp32, or bf16 under
// kOverwrite with an fp32 scratch of their size, or int64 with an fp32
// scratch of their size and `num_params` exponents and maxima.
absl::Status CheckParamDtype(ConstDtypeSpan params, comm::Dtype dtype, absl::string_view what);
absl::Status CheckUnitGrads(const UnitGrads& grads, GradWrite write, absl::string_view what,
                            int num_params = 0);

}  // namespace fsdp

#endif  // FSDP_NN_MODEL_H_
