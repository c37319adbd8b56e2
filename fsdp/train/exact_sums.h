// File: fsdp/train/exact_sums.h
//
// The bookkeeping of --exact around one training step ([Note: exact
// gradients] in fsdp/train/unit_state.h, docs/exact.md): every parameter
// tensor's exponent E and largest contribution, the ranks' agreement on
// those maxima, each plan unit's tensors as segments for the conversion, and
// the exact loss. The step reads, top to bottom:
//
//   exact.BeginPass();
//   ... forward and backward over every micro-batch; each model unit's
//       backward gets exact.GradSumsFor(m), each forward's per-sequence
//       losses go to exact.AddSequenceLosses ...
//   ... the int64 reductions finish (kSummedExactly) ...
//   FSDP_RETURN_IF_ERROR(exact.AgreeOnMaxima(world, timeout, clock));
//   if (exact.RaiseOverflowedExponents()) { ... clear and compute the step again ... }
//   for (u ...) unit.ConvertExactSums(exact.SegmentsOf(u), global_tokens);
//   FSDP_ASSIGN_OR_RETURN(float loss, exact.AgreedLoss(world, sequences, timeout, clock));
//   exact.ChooseNextExponents();
//
// Every rank holds the same exponents at every step: they start equal and
// change only through the agreed (gathered, order-free) maxima. The
// exponents are the exact mode's only state beyond the usual one, so a
// checkpoint must carry them for a resumed run to keep its bits.
#ifndef FSDP_TRAIN_EXACT_SUMS_H_
#define FSDP_TRAIN_EXACT_SUMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/fixed_point_sum.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/param_spec.h"
#include "fsdp/train/comm_wait_clock.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {

class ExactStepState {
 public:
  // The tensors of `units` as `plan` lays them out; the exchange buffers
  // (plan::ExactExchangeBytes for `world_size` ranks) from `tracker`
  // (kCommBuffers). InvalidArgument if the plan's tensors are not the
  // units'. Every exponent starts at kExactMinExponent: the first step is
  // computed twice (it has no maxima to go by).
  static absl::StatusOr<ExactStepState> Create(const proto::ShardPlan& plan,
                                               const std::vector<UnitSpec>& units,
                                               int world_size, MemoryTracker& tracker);

  int num_tensors() const { return static_cast<int>(exponents_.size()); }

  // Before the step's micro-batches are computed (again): no contributions,
  // no losses.
  void BeginPass();
  // Model unit m's exponents (read) and maxima (grown) for its backward.
  ExactGradSums GradSumsFor(int model_unit);
  // One micro-batch's per-sequence mean losses (Model::sequence_losses).
  void AddSequenceLosses(absl::Span<const float> losses);

  // Every rank's maxima gathered and combined (LargerMagnitude, order-free):
  // collective over `world`.
  absl::Status AgreeOnMaxima(comm::Communicator& world, absl::Duration timeout,
                             CommWaitClock& clock);
  // After AgreeOnMaxima: raises the exponent of every tensor whose agreed
  // maximum exceeds its bound to the one that holds it, and says whether
  // any did (the step's sums are then meaningless: compute them again, with
  // the same contributions, which now fit).
  bool RaiseOverflowedExponents();
  // Plan unit u's tensors with their exponents and agreed maxima, in
  // flat-buffer coordinates (ShardedUnit::ConvertExactSums).
  std::vector<ExactSegment> SegmentsOf(int plan_unit) const;
  // The mean over every rank's sequences of their mean losses, summed
  // exactly (an int64 all-reduce over `world` at the exponent of the
  // agreed largest loss): the same bits for any split. NaN if any is.
  absl::StatusOr<float> AgreedLoss(comm::Communicator& world, int64_t global_sequences,
                                   absl::Duration timeout, CommWaitClock& clock);
  // The squared L2 norm of plan unit u's unreduced exact sums `sums` (this
  // rank's, the unit's flat layout) divided by `divisor`, each tensor at its
  // exponent, in double in a fixed order: a statistic (the gradient noise
  // scale's small batch), meaningless for a tensor that overflowed.
  double SquaredNormOfLocalSums(int plan_unit, ConstDtypeSpan sums, int64_t divisor) const;
  // After the conversion: each tensor's next exponent from its agreed
  // maximum with kExactHeadroomBits (unchanged after a non-finite one).
  void ChooseNextExponents();

  // Every tensor's exponent, in model order (model units, then their
  // parameters): the state a checkpoint must keep.
  absl::Span<const int> exponents() const { return exponents_; }
  // Replaces them (a checkpoint's); InvalidArgument for another count or an
  // exponent outside [kExactMinExponent, kExactMaxExponent].
  absl::Status SetExponents(absl::Span<const int> exponents);

 private:
  struct PlanTensor {
    int64_t begin = 0, end = 0;  // in the plan unit's flat buffer
    int tensor = 0;              // model-order index
  };
  ExactStepState() = default;

  std::vector<int> first_tensor_;  // per model unit: its first tensor's index
  std::vector<std::vector<PlanTensor>> plan_tensors_;  // per plan unit, ascending
  std::vector<int> exponents_;
  std::vector<float> max_abs_;  // this rank's, then (AgreeOnMaxima) the agreed ones
  std::vector<float> losses_;   // this rank's sequence losses this pass
  // World x (tensors + 1) floats: every rank's maxima and largest loss.
  FloatBuffer gathered_;
  TrackedBuffer<int64_t> loss_sum_;  // the loss's int64 all-reduce
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_EXACT_SUMS_H_
