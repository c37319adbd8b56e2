// File: fsdp/train/unit_state.h
//
// One plan unit (a ShardPlan UnitPlan: one model unit, or several merged) at
// run time: its flat buffers, and the state of its parameters and of its
// gradients within a step. The transitions sit side by side in
// unit_state.cc; what each collective sends is in unit_collectives.cc.
//
// [Note: flat buffers] A unit's parameters lie back to back in one padded
// flat buffer, laid out by its UnitPlan (offsets, padded_numel,
// shard_numel); shard rank r owns [r * shard_numel, (r+1) * shard_numel).
// The model receives spans into the unsharded buffer, one model unit at a
// time (UnitPlan.source_units).
//
// [Note: parameter state machine]
//
//   kSharded --Unshard (post all-gather)--> kGathering
//      ^                                        | WaitForUnshard
//      +-------------Reshard----------------- kUnsharded
//
//   kSharded    only this rank's shard is current. full_shard / hybrid: the
//               unsharded buffer is freed. shard_optimizer / shard_grad_op:
//               the persistent unsharded buffer is stale outside this rank's
//               shard (from the optimizer step to the next forward's
//               all-gather, which writes into it in place).
//   kGathering  the all-gather of every rank's shard is in flight.
//   kUnsharded  the whole unit is current; the model may compute with it.
//               no_shard stays here for ever.
//
// Unshard() is a no-op in kGathering or kUnsharded (a prefetch may have
// started it); WaitForUnshard() is a no-op in kUnsharded; Reshard() needs
// kUnsharded.
//
// [Note: gradient state machine]
//
//   kIdle --MarkBackwardDone--> kAccumulated --StartReduction--> kReduceScattering
//     ^                          |   ^ (more micro-batches)            |
//     |                          +---+                    FinishReduceScatter
//     |                                                            |
//     |          no_shard: kAllGathering (averaged shards -> full)  |
//     |          hybrid:   kAllReducingAcrossGroups (shard sums)   |
//     |          others:   straight to kReduced  <------------------+
//     |                          | FinishReduction
//     +---------ClearGrads---- kReduced
//     |                          ^ ConvertExactSums
//     +---------ClearGrads---- kSummedExactly   (--exact: instead of kReduced)
//
// kReduced means: no_shard, the full gradients are the average over ranks;
// every other strategy, this rank's gradient shard is (OwnedReducedGrads()).
// [Note: exact gradients] With ReductionKind::kExact the gradients are int64
// fixed-point sums (fsdp/nn/fixed_point_sum.h): the reductions add them as
// integers and scale nothing, and land in kSummedExactly: the sums over every
// rank, meaningless until the ranks agree on each tensor's largest
// contribution. Then ConvertExactSums turns them into fp32 gradients in
// place (divided by the global token count), or, when a tensor overflowed,
// ClearGrads drops them and the step is computed again.
// Each call checks its state and returns FailedPreconditionError naming the
// unit, the call, the current state and the state(s) it needed.
//
// Not thread-safe: one training thread drives every unit.
#ifndef FSDP_TRAIN_UNIT_STATE_H_
#define FSDP_TRAIN_UNIT_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
#include "fsdp/checkpoint/state_region.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/grad_write.h"
#include "fsdp/train/comm_wait_clock.h"
#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/fixed_point_sum.h"
#include "fsdp/plan/precision_policy.h"
#include "fsdp/plan/strategy.h"
#include "fsdp/train/unit_collectives.h"
#include "fsdp/train/unit_optimizer.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {

enum class ParamState { kSharded, kGathering, kUnsharded };
const char* ParamStateName(ParamState state);

enum class GradState {
  kIdle,                     // zero; nothing accumulated since the last step
  kAccumulated,              // this rank's (scaled) gradients summed over micro-batches
  kReduceScattering,         // sum reduce-scatter into the shard in flight
  kAllGathering,             // no_shard: averaged shard -> full gradients in flight
  kAllReducingAcrossGroups,  // hybrid_shard: shard sum across shard groups in flight
  kReduced,                  // averaged: full (no_shard) or this rank's shard
  kSummedExactly,            // --exact: int64 sums over every rank, not yet fp32
};
const char* GradStateName(GradState state);

// What a strategy keeps and sends, in the dtypes of the precision policy;
// the same for every unit of a trainer.
struct UnitRuntime {
  Strategy strategy = Strategy::kNoShard;
  // full_shard, hybrid_shard: only the parameter shard persists.
  bool shard_params = false;
  // shard_grad_op, full_shard, hybrid_shard: a persistent gradient shard;
  // the unsharded gradients exist from a unit's first backward to its
  // reduce-scatter.
  bool shard_grads = false;
  // every strategy but no_shard: the optimizer steps this rank's shard.
  bool shard_optimizer = false;
  // What the buffers hold (fsdp/plan/precision_policy.h):
  //
  // [Note: bf16 parameter layout] Parameters stored in a dtype other than
  // the master's (--precision=bf16): the parameters the model computes with
  // are bf16 (2 bytes: the whole unit for no_shard, shard_optimizer and
  // shard_grad_op; a kept bf16 shard plus the gathered window for
  // full_shard and hybrid_shard), all-gathered as bf16, and refreshed from
  // the fp32 master once per optimizer step. The optimizer state and the
  // master stay fp32.
  //
  // [Note: bf16 gradients] Gradients kept in a dtype other than the
  // backward's fp32 (--precision=bf16 with --reduce_dtype=bf16, its
  // default): on a step's first micro-batch the model writes the unit's bf16
  // gradients itself (Model::BackwardUnit with bf16 gradients: the products round
  // their weight gradients from their fp32 accumulators, the rest goes
  // through the trainer's one fp32 gradient workspace, the largest unit's
  // padded size). Each later micro-batch writes fp32 gradients into that
  // workspace, added into the bf16 ones (one fp32 addition, one rounding per
  // element). The reduce-scatter runs in bf16, its sum lands in the
  // gradient shard (sharded gradients) or in place in this rank's slot
  // (nothing staged), and the average is rounded to bf16 again: the reduced
  // gradient shard is bf16 in every strategy (no_shard's whole gradients are
  // the shards all-gathered in bf16). The clipping norm and the optimizer
  // read the bf16 gradients themselves, widening them block by block in L1
  // (MaxAbsBf16, SumOfSquareUnitsBf16, UnitOptimizer::StepUnitBf16), and the
  // clip scale multiplies the widened values there, so every strategy
  // multiplies the same values by the same scale. Per parameter with Adam:
  // 2 + 2 + 4 (master) + 8 = 16 bytes, the ZeRO paper's K = 12 layout.
  PrecisionPolicy precision;
  int world_size = 1;
  // Ranks a unit is sharded over (world, or G for hybrid) and this rank's
  // place among them.
  int shard_group_size = 1;
  int shard_rank = 0;
  int replica_group_count = 1;

  // The layout the strategy and the policy imply.
  // The values the optimizer updates have a buffer of their own (the
  // master): the kept shard when parameters are sharded, or a master when
  // the parameters are stored in another dtype (no_shard: of the whole unit,
  // the others: a shard). Otherwise they are the fp32 parameters themselves.
  // Read when the buffers are laid out, never by a transition.
  bool own_master() const { return shard_params || precision.separate_master(); }
  // Gradients kept in another dtype than the backward's fp32 reach it
  // through the shared fp32 workspace, and where gradients are not sharded
  // they are reduce-scattered in place (nothing staged: [Note: bf16
  // gradients]). Read when the buffers are laid out, never by a transition.
  bool grads_through_workspace() const {
    return precision.reduce_dtype != comm::Dtype::kFloat32;
  }

  static UnitRuntime For(Strategy strategy, int world_size, int world_rank,
                         int shard_group_size, const PrecisionPolicy& precision = {});
};

// Where a backward writes a unit's gradients, and how (fsdp/nn/grad_write.h).
struct BackwardGrads {
  // The unit's gradients as kept (the reduce dtype), and how this backward
  // writes them: kOverwrite on the step's first micro-batch, kAdd after.
  DtypeSpan grads;
  GradWrite write = GradWrite::kAdd;
  // Gradients kept in another dtype than fp32 ([Note: bf16 gradients]): the
  // trainer's fp32 workspace, the unit's padded size, where the model writes
  // what it computes in fp32 before it is rounded (first micro-batch) or
  // added (later ones) into `grads`. Empty for fp32 gradients.
  absl::Span<float> fp32_scratch;
};

// The communicators a unit's collectives run on.
struct UnitComms {
  comm::Communicator* shard_group = nullptr;    // all-gather, reduce-scatter
  comm::Communicator* replica_group = nullptr;  // hybrid: cross-group all-reduce
};

class ShardedUnit {
 public:
  // Allocates the unit's persistent buffers through `tracker` and fills the
  // parameters from `init` (called once with the unsharded padded buffer,
  // zeroed, for the caller to write the real elements; only this rank's
  // shard of it is kept when parameters are sharded). Registers the
  // optimizer state for the unit's numel (no_shard) or shard. With a
  // separate master and a sharded optimizer the fp32 values are staged in
  // gradient memory (MemoryCategory::kGradients, free until the first
  // backward, and at least one unit's padded fp32 in every such strategy's
  // predicted peak).
  //
  // With runtime.grads_through_workspace(), `grad_workspace` is the trainer's fp32 gradient
  // workspace ([Note: bf16 gradients]), at least plan.padded_numel() floats,
  // shared by every unit and used by one call at a time; it also stages the
  // bf16 layout's initialization. Empty otherwise.
  static absl::StatusOr<std::unique_ptr<ShardedUnit>> Create(
      const proto::UnitPlan& plan, const UnitRuntime& runtime, MemoryTracker& tracker,
      UnitOptimizer& optimizer, const std::function<void(absl::Span<float>)>& init,
      absl::Span<float> grad_workspace = {});
  ~ShardedUnit() = default;

  const proto::UnitPlan& plan() const { return plan_; }
  const std::string& name() const { return plan_.name(); }
  ParamState param_state() const { return param_state_; }
  GradState grad_state() const { return grad_state_; }

  // --- Parameter transitions --------------------------------------------
  absl::Status Unshard(const UnitComms& comms);
  absl::Status WaitForUnshard(absl::Duration timeout, CommWaitClock& clock);
  absl::Status Reshard();

  // --- Gradient transitions ---------------------------------------------
  // The unsharded gradient buffer the next backward writes (allocated on the
  // first backward of a step for gradient-sharding strategies), and how:
  // kOverwrite on the first micro-batch (kIdle), when it holds nothing of
  // this step, so no zeroing pass precedes the backward; kAdd after that.
  // Elements no model unit writes (gaps between merged units, padding) are
  // zero. Needs kIdle or kAccumulated. Gradients through the workspace come
  // with it as their fp32 scratch (BackwardGrads).
  absl::StatusOr<BackwardGrads> GradsForBackward();
  absl::Status MarkBackwardDone();
  absl::Status StartReduction(const UnitComms& comms);
  // Waits for the reduce-scatter; then the second phase (see the note) or
  // the scale by 1 / world_size.
  absl::Status FinishReduceScatter(const UnitComms& comms, absl::Duration timeout,
                                   CommWaitClock& clock);
  // Finishes the second phase if any; a no-op in kReduced and
  // kSummedExactly.
  absl::Status FinishReduction(absl::Duration timeout, CommWaitClock& clock);
  // [Note: exact gradients] kSummedExactly -> kReduced: the int64 sums this
  // rank holds (no_shard: the whole unit; otherwise its shard) become fp32
  // in place, each tensor with its segment's exponent and agreed maximum
  // (`segments`: the unit's tensors in flat-buffer coordinates, ascending),
  // divided by `divisor` (the global token count). FailedPrecondition if a
  // segment overflowed (redo the step instead).
  absl::Status ConvertExactSums(absl::Span<const ExactSegment> segments, int64_t divisor);
  // Back to kIdle after the optimizer step, or (kSummedExactly) to redo the
  // step. The gradients' values are dead: the next step's first backward
  // overwrites them.
  absl::Status ClearGrads();

  // --- Optimizer ----------------------------------------------------------
  // The averaged gradients this rank owns for clipping (its shard; no_shard:
  // its slice of the full gradients, so every element is counted once
  // across ranks), as stored (the reduce dtype). Needs kReduced.
  absl::StatusOr<ConstDtypeSpan> OwnedReducedGrads();
  // This rank's own unsharded gradients, before any reduction (the
  // gradient noise scale's small batch). Needs kAccumulated.
  absl::StatusOr<ConstDtypeSpan> LocalGrads() const;
  // Multiplies the gradients the optimizer will read by `scale` (clipping):
  // the optimizer applies it as it reads them (UnitOptimizer::StepUnit's
  // grad_scale), so the gradients themselves stay as reduced.
  absl::Status ScaleReducedGrads(float scale);
  // One optimizer step: no_shard, on the full parameters; otherwise on this
  // rank's shard (params then kSharded until the next Unshard for
  // shard_optimizer / shard_grad_op). Needs kReduced.
  absl::Status StepOptimizer(UnitOptimizer& optimizer, int unit_index, float lr, int step);

  // --- Checkpoints ([Note: checkpoint regions]) -------------------------
  // The real (non-padding) elements of this rank's shard: flat elements
  // [owned_flat_begin(), owned_flat_begin() + owned_numel()).
  int64_t owned_flat_begin() const;
  int64_t owned_numel() const;
  // What this rank saves: the owned real elements of the fp32 parameters
  // (the master shard where there is one) and of every optimizer state
  // tensor. Any state but kGathering.
  absl::StatusOr<std::vector<StateRegion>> SaveRegions(UnitOptimizer& optimizer,
                                                       int64_t model_offset);
  // What this rank loads: the same for the sharded strategies; no_shard
  // loads the whole unit (it keeps everything). Call right after Create.
  absl::StatusOr<std::vector<StateRegion>> LoadRegions(UnitOptimizer& optimizer,
                                                       int64_t model_offset);
  // After the load regions were filled: zero the padding, set the
  // optimizer's step count, and leave the parameters as a step boundary of
  // an uninterrupted run leaves them (shard_optimizer / shard_grad_op:
  // kSharded, so the next forward all-gathers the loaded shards).
  absl::Status FinishLoad(UnitOptimizer& optimizer, int64_t optimizer_step);

  // --- Views --------------------------------------------------------------
  // The real elements of the unsharded parameters in the parameter dtype
  // (needs kUnsharded).
  absl::StatusOr<ConstDtypeSpan> UnshardedParams() const;
  // This rank's current parameter shard (master or slice), any state but
  // kGathering.
  absl::Span<const float> ParamShard() const;
  // Bytes of the unsharded buffers currently allocated beyond the persistent
  // ones (the "gathered parameters" and "unsharded gradients" working
  // buffers of fsdp/plan/memory_model.h).
  int64_t gathered_param_numel() const;
  int64_t unsharded_grad_numel() const;

 private:
  ShardedUnit(const proto::UnitPlan& plan, const UnitRuntime& runtime, MemoryTracker& tracker)
      : plan_(plan), runtime_(runtime), tracker_(tracker) {}
  absl::Status Fail(const char* call, const char* needed, const char* current) const;
  std::string Label() const;
  absl::Span<float> MutableParamShard();
  // Create's parameter half: the fp32 values initialized once, the master
  // and the parameters in their dtype derived from them.
  absl::Status CreateParams(const std::function<void(absl::Span<float>)>& init);
  // Where master_values_ and params_of_master_ point; called once, by
  // CreateParams.
  absl::Span<float> LocateMasterValues();
  DtypeSpan LocateParamsOfMaster();
  // shard *= 1 / world_size, in the shard's dtype.
  void Average(DtypeSpan shard) const;
  bool exact() const { return runtime_.precision.reduction == ReductionKind::kExact; }
  // The state a finished reduction leaves: kReduced, or kSummedExactly.
  GradState Summed() const { return exact() ? GradState::kSummedExactly : GradState::kReduced; }
  // The reduced gradients the optimizer reads: this rank's shard (no_shard:
  // `whole` the full unit), as reduced or as converted from exact sums.
  DtypeSpan OptimizerGrads(bool whole);
  // Zeroes what no model unit's backward writes: the gaps between the
  // plan's source units and the padding.
  void ZeroUnwrittenGrads(DtypeSpan grads) const;

  proto::UnitPlan plan_;
  UnitRuntime runtime_;
  MemoryTracker& tracker_;
  ParamState param_state_ = ParamState::kUnsharded;
  GradState grad_state_ = GradState::kIdle;

  // Unsharded parameters in the parameter dtype (padded_numel,
  // kParameters): persistent unless shard_params, then allocated by Unshard
  // and freed by Reshard.
  DtypeBuffer params_;
  // The master (fp32, kParameters) when runtime_.own_master(): shard_numel,
  // or for no_shard the whole unit (padded_numel).
  FloatBuffer master_;
  // shard_params: the kept shard the all-gather sends, in the parameter
  // dtype: the master itself, or its rounding in param_shard_ (shard_numel,
  // kParameters) when the parameters are stored in another dtype.
  DtypeBuffer param_shard_;
  DtypeSpan kept_shard_;
  // Fixed by Create: the fp32 values the optimizer updates (the master, or
  // the fp32 parameters themselves; no_shard: the whole unit, else this
  // rank's shard), and where their parameter-dtype copy lives (the kept
  // shard, this rank's slot of the whole parameters, or no_shard the whole
  // ones: the same memory when the parameters are their own master).
  absl::Span<float> master_values_;
  DtypeSpan params_of_master_;
  // Unsharded gradients in the reduce dtype (padded_numel, kGradients):
  // persistent unless shard_grads, then from the first backward to the
  // reduce-scatter.
  DtypeBuffer grads_;
  // The reduced gradient shard (shard_numel, reduce dtype): kGradients when
  // gradients are sharded (it is their home); otherwise kCommBuffers, the
  // reduce-scatter's staging, unless it runs in place
  // (grads_through_workspace: none).
  DtypeBuffer grad_shard_;
  // Where the reduce-scatter leaves this rank's sum and the reduced shard
  // stays until the optimizer step, fixed by Create: grad_shard_, or this
  // rank's chunk of the persistent grads_ (in place).
  DtypeSpan reduced_shard_;
  // The trainer's shared fp32 workspace (grads_through_workspace), and the
  // clip scale the optimizer applies.
  absl::Span<float> grad_workspace_;
  // --exact, from ConvertExactSums to ClearGrads: the fp32 gradients, in the
  // memory of the int64 sums they were converted from (no_shard: the whole
  // unit's, else the shard's).
  absl::Span<float> exact_floats_;
  float pending_grad_scale_ = 1.0f;
  PendingCollective param_gather_;
  PendingCollective grad_reduction_;
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_UNIT_STATE_H_
