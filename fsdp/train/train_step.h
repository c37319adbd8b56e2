// File: fsdp/train/train_step.h
//
// The data-parallel training step for every strategy (fsdp/plan/strategy.h):
// no_shard, shard_optimizer (ZeRO-1), shard_grad_op (ZeRO-2), full_shard
// (ZeRO-3 / FSDP) and hybrid_shard. One DataParallelTrainer per rank lays
// the model out by the shard planner's ShardPlan (fsdp/plan/shard_planner.h),
// checks at start-up that every rank holds the same plan, owns every unit's
// buffers (fsdp/train/unit_state.h) and drives a fsdp::Model, the
// communicator(s) and an optimizer through one optimizer step at a time:
//
//   TrainStepOptions options;
//   options.sharding.strategy = Strategy::kFullShard;
//   FSDP_ASSIGN_OR_RETURN(auto trainer, DataParallelTrainer::Create(
//       &model, &world, &tracker, std::move(optimizer), options));
//   for (int step = 1; step <= steps; ++step) {
//     std::vector<Batch> micro_batches = ...;  // options.accum_steps of them,
//                                              // this rank's slice
//     FSDP_ASSIGN_OR_RETURN(StepResult r, trainer->Step(micro_batches, lr));
//   }
//
// The step itself reads top to bottom in train_step.cc; docs/sharding.md
// draws it, with the strategies side by side, and docs/data-parallel.md
// derives the averaging.
//
// [Note: gradient scaling] Every rank runs accum_steps micro-batches of the
// same shape. Each backward adds d(loss / accum_steps)/dparams, where loss is
// the mean over the micro-batch's tokens, so after the last micro-batch a
// rank holds the gradient of the mean over its accum_steps micro-batches; the
// reduction averages that over ranks. The result is the gradient of the mean
// over all micro_batch * accum_steps * world_size sequences' tokens: what
// one process computes on the whole global batch.
#ifndef FSDP_TRAIN_TRAIN_STEP_H_
#define FSDP_TRAIN_TRAIN_STEP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "fsdp/checkpoint/checkpointable_state.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/param_spec.h"
#include "fsdp/optim/gradient_noise_scale.h"
#include "fsdp/train/comm_wait_clock.h"
#include "fsdp/train/exact_sums.h"
#include "fsdp/plan/sharding_options.h"
#include "fsdp/train/unit_optimizer.h"
#include "fsdp/train/unit_state.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {

struct TrainStepOptions {
  // The run's sharding settings (fsdp/plan/sharding_options.h): strategy,
  // hybrid_shard's group size, prefetch, merging and the precision policy,
  // whose parameter dtype must be the model's (Model::param_dtype). The
  // planner reads the same value (BuildTrainingPlan).
  ShardingOptions sharding;
  int accum_steps = 1;    // micro-batches per optimizer step
  float grad_clip = 0.0f; // max global L2 norm of the gradients; <= 0: off
  uint64_t seed = 0;      // parameter initialization (Model::InitUnitParams)
  // false: the parameters start at zero, for a run that loads a checkpoint
  // over every one of them (no draw of initial weights it would overwrite).
  bool init_params = true;
  // Bound on every wait for a collective.
  absl::Duration comm_timeout = absl::Seconds(60);
};

struct StepResult {
  int step = 0;                  // 1-based count of optimizer steps taken
  float loss = 0.0f;             // mean over the global batch (all ranks)
  float lr = 0.0f;
  float grad_norm = 0.0f;        // global L2 norm before clipping (0 if off)
  int64_t global_tokens = 0;     // tokens in the global batch
  absl::Duration step_time;      // wall time of Step()
  absl::Duration comm_wait;      // of which blocked in collectives
  absl::Duration optimizer_time;  // of which the optimizer step (no collectives)
  // Of the rest, each plan unit's forward and backward math over every
  // micro-batch (waits for its gather excluded): where a slow rank's compute
  // goes (fsdp/run/straggler_report.h).
  std::vector<absl::Duration> unit_compute;
  // The squared gradient norms at two batch sizes the gradient noise scale
  // is estimated from ([Note: noise scale]); noise_norms.small_batch is 0
  // when the step measured one batch size (one rank, no accumulation).
  GradientNormPair noise_norms;
  // How many times the micro-batches were computed: 2 when --exact's sums
  // overflowed and the step was computed again ([Note: exact gradients] in
  // unit_state.h; always on the first step), else 1.
  int passes = 1;
};

// The shard plan the trainer uses for `units` on `world_size` ranks:
// options.sharding, planned as it is. InvalidArgument (the planner's, saying what to
// change) for a bad group size, world size or option.
absl::StatusOr<proto::ShardPlan> BuildTrainingPlan(const std::vector<UnitSpec>& units,
                                                   const TrainStepOptions& options,
                                                   int world_size);

class DataParallelTrainer final : public CheckpointableState {
 public:
  // Builds the plan (BuildTrainingPlan), checks that every rank of `world`
  // holds the same one (CheckPlansAgree: on a mismatch every rank fails
  // with the first differing unit and field), splits `world` into shard and
  // replica groups for hybrid_shard, allocates every unit's buffers through
  // `tracker`, initializes parameters from options.seed (identically on every
  // rank: Model::InitUnitParams is deterministic) and the optimizer state for
  // what this rank steps. Collective: every rank of `world` must call it.
  // model, world and tracker must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<DataParallelTrainer>> Create(
      Model* model, comm::Communicator* world, MemoryTracker* tracker,
      std::unique_ptr<UnitOptimizer> optimizer, const TrainStepOptions& options);

  // One optimizer step over `micro_batches` (exactly accum_steps of them,
  // this rank's part of the global batch) with learning rate `lr`. Every rank
  // must call it with the same number and shape of micro-batches.
  absl::StatusOr<StepResult> Step(absl::Span<const Batch> micro_batches, float lr);

  // Calls `fn` with every plan unit's real fp32 parameters in model order
  // (the master shards, not a bf16-rounded copy), gathered whole one unit
  // at a time into a tracked transient buffer (kParameters) that is freed
  // before the next: consolidating the model (digests, export, sampling)
  // needs no more than the largest unit beyond training's own memory, and
  // the budget can refuse it. Collective: every rank must call it.
  absl::Status ForEachGatheredUnit(
      const std::function<absl::Status(const proto::UnitPlan&, absl::Span<const float>)>& fn);

  // Every model unit's real parameters, in model order, gathered whole on
  // every rank, as untracked copies: for tests of small models only.
  absl::StatusOr<std::vector<std::vector<float>>> GatherParamsInModelOrder();

  // --- Checkpoints ([Note: checkpoint regions] in unit_state.h) ----------
  // The ranks of replica group 0 (global ranks 0 .. shard_group_size - 1)
  // hold every element once between them; they are the ones that save.
  bool saves_checkpoint_shard() const override {
    return world_->rank() < plan_.shard_group_size();
  }
  // Every unit's save regions, in unit order; empty on ranks that do not
  // save. Call between steps.
  absl::StatusOr<std::vector<StateRegion>> CheckpointSaveRegions() override;
  absl::StatusOr<std::vector<StateRegion>> CheckpointShardRegions() override;
  int shard_rank() const override { return world_->rank() % plan_.shard_group_size(); }
  // Every unit's load regions. Call right after Create, fill every region,
  // then FinishCheckpointLoad.
  absl::StatusOr<std::vector<StateRegion>> CheckpointLoadRegions() override;
  // The trainer continues as if it had taken `steps_taken` steps.
  absl::Status FinishCheckpointLoad(int steps_taken) override;
  const UnitOptimizer& optimizer() const { return *optimizer_; }
  // --exact: every parameter tensor's exponent for the next step's sums, in
  // model order (ExactStepState::exponents); empty without --exact. The
  // same on every rank; a checkpoint keeps it.
  std::vector<int> exact_exponents() const;
  // Restores them (after a checkpoint load): InvalidArgument without
  // --exact, for another count of tensors, or an exponent outside
  // [kExactMinExponent, kExactMaxExponent].
  absl::Status SetExactExponents(absl::Span<const int> exponents);
  CheckpointedOptimizer checkpointed_optimizer() const override {
    return {optimizer_->kind(), optimizer_->StateNames(), optimizer_->weight_decay()};
  }

  const proto::ShardPlan& plan() const override { return plan_; }
  const UnitRuntime& runtime() const { return runtime_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  const ShardedUnit& unit(int index) const { return *units_[index]; }
  int steps_taken() const override { return steps_taken_; }
  // Largest sum of gathered parameter / unsharded gradient elements held
  // at once by this trainer's units since Create (the working buffers the
  // memory model bounds; also visible in the tracker's categories).
  int64_t peak_gathered_param_numel() const { return peak_gathered_param_numel_; }
  int64_t peak_unsharded_grad_numel() const { return peak_unsharded_grad_numel_; }

 private:
  DataParallelTrainer(Model* model, comm::Communicator* world, MemoryTracker* tracker,
                      std::unique_ptr<UnitOptimizer> optimizer, TrainStepOptions options)
      : model_(model),
        world_(world),
        tracker_(tracker),
        optimizer_(std::move(optimizer)),
        options_(options) {}

  absl::Status CheckBatches(absl::Span<const Batch> micro_batches) const;
  // Helpers of Step(), in the order it calls them.
  struct LocalSums {
    double loss_sum = 0.0;  // this rank's micro-batch losses
    double first_sq = 0.0;  // [Note: noise scale] the first micro-batch's squared norm
  };
  absl::StatusOr<LocalSums> ComputeAndReduceGradients(absl::Span<const Batch> micro_batches,
                                                      bool measure_noise);
  absl::Status Prefetch(int unit, int direction);
  absl::Status ForwardUnit(int unit, const Batch& batch);
  absl::Status BackwardUnit(int unit, float loss_scale);
  void NoteWorkingBuffers();
  absl::StatusOr<float> AverageLossAcrossRanks(float local_loss, CommWaitClock& clock);
  absl::StatusOr<double> GlobalGradSumOfSquares(CommWaitClock& clock);
  absl::StatusOr<double> MeanAcrossRanks(float local_value, CommWaitClock& clock);
  template <typename T>
  absl::StatusOr<std::vector<T>> GatherFromShardGroup(const T& mine, CommWaitClock& clock,
                                                      absl::string_view what);
  // Unit u's first element in the model vector.
  int64_t ModelOffset(int u) const;

  Model* model_;
  comm::Communicator* world_;
  MemoryTracker* tracker_;
  std::unique_ptr<UnitOptimizer> optimizer_;
  TrainStepOptions options_;
  proto::ShardPlan plan_;
  UnitRuntime runtime_;
  // hybrid_shard: the sub-communicators from world_->Split; comms_ points at
  // them, or at world_ for the other strategies.
  std::unique_ptr<comm::Communicator> shard_group_;
  std::unique_ptr<comm::Communicator> replica_group_;
  UnitComms comms_;
  std::vector<std::unique_ptr<ShardedUnit>> units_;
  // --exact (ReductionKind::kExact): the exponents and maxima of the exact
  // gradient sums ([Note: exact gradients] in unit_state.h).
  std::optional<ExactStepState> exact_;
  // The loss all-reduce (1 float) and the gradient-norm exchange
  // (NormExchangeBytes(shard group size), fsdp/plan/memory_model.h).
  FloatBuffer scalar_comm_buffer_;
  // Gradients through the workspace (UnitRuntime::grads_through_workspace):
  // the fp32 gradient workspace every unit shares (the largest unit's padded
  // numel, kGradients; [Note: bf16 gradients]).
  FloatBuffer grad_workspace_;
  CommWaitClock clock_;             // this step's blocked time
  std::vector<absl::Duration> unit_compute_;  // this step's, per plan unit
  int steps_taken_ = 0;
  int64_t peak_gathered_param_numel_ = 0;
  int64_t peak_unsharded_grad_numel_ = 0;
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_TRAIN_STEP_H_
