// File: fsdp/train/train_step.cc
//
// The data-parallel step for every strategy, top to bottom:
//
//   for each micro-batch m of accum_steps:
//     forward over units 0..n-1:
//       unshard (all-gather, usually already prefetched), prefetch the next
//       units, compute, reshard (full_shard / hybrid; the last unit stays
//       gathered for the backward that follows at once)
//     backward over units n-1..0:
//       unshard, prefetch the previous units, backward into the unsharded
//       gradients; on the LAST micro-batch only, start this unit's gradient
//       reduce-scatter and finish the one of the unit after it; reshard
//   finish the reductions (unit 0's reduce-scatter; no_shard's all-gathers,
//     hybrid's cross-group all-reduces)
//   average the loss across ranks (one scalar all-reduce), for reporting
//   clip by the global gradient norm (one scalar all-reduce of the sum of
//     squares of the shards)
//   optimizer step: no_shard on the full buffers, every other strategy on
//     this rank's shard; zero the gradients
//   (shard_optimizer / shard_grad_op: the updated shards are all-gathered
//     into the whole parameters by the next forward's unshard + prefetch)
//
// Which buffers exist and which collectives run per strategy:
// docs/sharding.md. The unit states: fsdp/train/unit_state.h.
//
// [Note: prefetch] Before computing unit u the step starts the all-gathers
// of up to prefetch_depth units that come next (forward: u+1, u+2, ...;
// backward: u-1, u-2, ...), while fewer than max_gathers_in_flight gathers
// are outstanding. So at most 1 + prefetch_depth consecutive units are
// gathered at once, which is the bound fsdp/plan/memory_model.h predicts.
// The count of outstanding gathers is the units in kGathering, a function
// of the schedule alone, so every rank posts the same collectives in the
// same order (the communicator requires it).
//
// [Note: overlap of reduction and backward] A unit's reduce-scatter is
// posted right after its backward (the comm progress engine moves it while
// the next units compute). After the NEXT unit's backward we wait for it and
// start its second phase (no_shard: all-gather of the averaged shard;
// hybrid: the cross-group all-reduce) or, for the other strategies, free the
// unit's unsharded gradients. Waiting one unit behind, at fixed points, keeps
// the posting order identical on every rank, and bounds the unsharded
// gradients of gradient-sharding strategies to two consecutive units.
//
// [Note: accumulation] Micro-batches before the last only accumulate into
// the unsharded gradients (kAccumulated); reduction is linear, so reducing
// each micro-batch would send the same bytes accum_steps times. The price
// for gradient-sharding strategies: with accum_steps > 1 every unit's
// unsharded fp32 gradients live from its first backward of the step to its
// reduce-scatter on the last micro-batch (parameters stay sharded, and are
// re-gathered for every micro-batch's forward and backward). In exchange the
// result is bit-identical to no_shard's. docs/sharding.md weighs the
// alternative (a reduce-scatter per micro-batch into the shard).
#include "fsdp/train/train_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/optim/grad_clip.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/train/dtype_kernels.h"
#include "fsdp/train/model_entry.h"
#include "fsdp/train/plan_agreement.h"

namespace fsdp {
absl::StatusOr<proto::ShardPlan> BuildTrainingPlan(const std::vector<UnitSpec>& units,
                                                   const TrainStepOptions& options,
                                                   int world_size) {
  plan::PlannerOptions planner;
  planner.sharding = options.sharding;
  planner.world_size = world_size;
  planner.include_rank_ranges = true;
  return plan::BuildShardPlan(units, planner);
}

absl::StatusOr<std::unique_ptr<DataParallelTrainer>> DataParallelTrainer::Create(
    Model* model, comm::Communicator* world, MemoryTracker* tracker,
    std::unique_ptr<UnitOptimizer> optimizer, const TrainStepOptions& options) {
  FSDP_RETURN_IF_ERROR(CheckStrategyAvailable(options.sharding.strategy));
  if (options.accum_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "accum_steps must be at least 1 (micro-batches per optimizer step), got ",
        options.accum_steps));
  }
  if (options.comm_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("comm_timeout must be positive");
  }
  if (model->num_units() == 0) {
    return absl::InvalidArgumentError("the model has no units to train");
  }
  FSDP_RETURN_IF_ERROR(ValidatePrecisionPolicy(options.sharding.precision));
  const bool exact = options.sharding.precision.reduction == ReductionKind::kExact;
  if (exact && !model->per_sequence_products()) {
    return absl::InvalidArgumentError(
        "--exact needs a model whose products run over one sequence at a time "
        "(Model::per_sequence_products; GptConfig::per_sequence_products): this one computes "
        "over whole micro-batches, whose bits depend on how many sequences they hold");
  }
  if (exact && ComputeThreads() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--exact computes every product on one thread (a product's bits change with the thread "
        "count, docs/exact.md), but the compute threads are ", ComputeThreads(),
        "; call SetComputeThreads(1) (train_gpt does so with --exact)"));
  }
  if (options.sharding.precision.param_dtype != model->param_dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        comm::DtypeName(options.sharding.precision.param_dtype), " parameters: this model takes ",
        comm::DtypeName(model->param_dtype()), " parameters only; train it in ",
        comm::DtypeName(model->param_dtype()), " or give it a compute path for the other dtype "
        "(Model::param_dtype)"));
  }
  std::unique_ptr<DataParallelTrainer> trainer(
      new DataParallelTrainer(model, world, tracker, std::move(optimizer), options));
  DataParallelTrainer& t = *trainer;

  // The layout of every unit is the plan's, and every rank must hold the
  // same plan before any buffer is laid out by it.
  FSDP_ASSIGN_OR_RETURN(t.plan_, BuildTrainingPlan(model->units(), options, world->size()));
  FSDP_RETURN_IF_ERROR(CheckPlansAgree(*world, t.plan_, options.comm_timeout));

  const int group_size = t.plan_.shard_group_size();
  t.runtime_ = UnitRuntime::For(options.sharding.strategy, world->size(), world->rank(), group_size,
                                options.sharding.precision);
  t.comms_.shard_group = world;
  t.comms_.replica_group = world;
  if (options.sharding.strategy == Strategy::kHybridShard && group_size < world->size()) {
    // Shard group: G consecutive ranks. Replica group: the ranks with the
    // same shard rank in every shard group (plan.replica_groups).
    FSDP_ASSIGN_OR_RETURN(t.shard_group_, world->Split(/*color=*/world->rank() / group_size,
                                                       /*key=*/world->rank(),
                                                       options.comm_timeout));
    FSDP_ASSIGN_OR_RETURN(t.replica_group_, world->Split(/*color=*/world->rank() % group_size,
                                                         /*key=*/world->rank(),
                                                         options.comm_timeout));
    t.comms_.shard_group = t.shard_group_.get();
    t.comms_.replica_group = t.replica_group_.get();
  }

  if (t.runtime_.grads_through_workspace()) {
    int64_t largest = 0;
    for (const proto::UnitPlan& unit_plan : t.plan_.units()) {
      largest = std::max(largest, unit_plan.padded_numel());
    }
    FSDP_ASSIGN_OR_RETURN(t.grad_workspace_,
                          tracker->Allocate<float>(MemoryCategory::kGradients, largest,
                                                   "fp32 gradient workspace (gradients kept in another dtype)"));
  }
  for (const proto::UnitPlan& unit_plan : t.plan_.units()) {
    auto init = [&](absl::Span<float> padded) {
      if (!options.init_params) {
        std::fill(padded.begin(), padded.end(), 0.0f);
        return;
      }
      for (const proto::SourceUnit& source : unit_plan.source_units()) {
        model->InitUnitParams(source.model_unit_index(),
                              padded.subspan(source.offset(), source.numel()), options.seed);
      }
    };
    FSDP_ASSIGN_OR_RETURN(std::unique_ptr<ShardedUnit> unit,
                          ShardedUnit::Create(unit_plan, t.runtime_, *tracker, *t.optimizer_,
                                              init, t.grad_workspace_.span()));
    t.units_.push_back(std::move(unit));
  }
  if (exact) {
    FSDP_ASSIGN_OR_RETURN(t.exact_, ExactStepState::Create(t.plan_, model->units(),
                                                           world->size(), *tracker));
  }
  FSDP_ASSIGN_OR_RETURN(
      t.scalar_comm_buffer_,
      tracker->Allocate<float>(MemoryCategory::kCommBuffers,
                               plan::NormExchangeBytes(t.comms_.shard_group->size()) / sizeof(float),
                               "loss all-reduce and gradient-norm exchange"));
  return trainer;
}

absl::StatusOr<StepResult> DataParallelTrainer::Step(absl::Span<const Batch> micro_batches,
                                                     float lr) {
  FSDP_RETURN_IF_ERROR(CheckBatches(micro_batches));
  const absl::Time start = absl::Now();
  const int n = num_units();
  const int accum = options_.accum_steps;
  const absl::Duration timeout = options_.comm_timeout;
  const int64_t global_sequences = int64_t{micro_batches[0].batch_size} * accum * world_->size();
  const int64_t global_tokens = global_sequences * micro_batches[0].seq_len;
  if (exact_.has_value()) {
    // The embedding's sums take one contribution per token.
    FSDP_RETURN_IF_ERROR(CheckExactContributionCount(global_tokens));
  }
  clock_.Reset();
  unit_compute_.assign(units_.size(), absl::ZeroDuration());
  // From the second step on, every buffer comes from the tracker's cache.
  tracker_->BeginStep();

  // [Note: noise scale] The gradient noise scale (fsdp/optim/
  // gradient_noise_scale.h) needs the gradient's squared norm at two batch
  // sizes. The small one is the first micro-batch on this rank: its
  // gradients, scaled by 1 / accum, are the whole local buffer right after
  // its backward (before any reduction or later micro-batch); the ranks'
  // values are averaged. The big one is the averaged global gradient, whose
  // squared norm the clipping takes anyway. One rank without accumulation
  // has only one batch size and skips both. Under --exact the local
  // gradients are integer sums of the micro-batch's summed losses: their
  // norm is taken through each tensor's scale, divided by the micro-batch's
  // tokens (ExactStepState::SquaredNormOfLocalSums), not by accum.
  const bool measure_noise = accum > 1 || world_->size() > 1;
  LocalSums local;
  int passes = 1;
  // [Note: exact gradients] in unit_state.h: the int64 sums are usable once
  // the ranks agree that no tensor's contribution exceeded its bound; when
  // one did, its exponent is raised and the step computed again from the
  // same parameters and batches (the same contributions, which now fit).
  for (;; ++passes) {
    FSDP_ASSIGN_OR_RETURN(local, ComputeAndReduceGradients(micro_batches, measure_noise));
    if (!exact_.has_value()) break;
    FSDP_RETURN_IF_ERROR(exact_->AgreeOnMaxima(*world_, timeout, clock_));
    if (!exact_->RaiseOverflowedExponents()) break;
    if (passes == 2) {
      return absl::InternalError(
          "exact gradients overflowed twice: the step's contributions changed between two "
          "computations of the same step (a nondeterministic kernel?)");
    }
    for (auto& unit : units_) FSDP_RETURN_IF_ERROR(unit->ClearGrads());
  }

  // Loss for reporting: the mean over all ranks' micro-batches (--exact: of
  // every sequence's mean, summed exactly).
  float loss = 0.0f;
  if (exact_.has_value()) {
    FSDP_ASSIGN_OR_RETURN(loss, exact_->AgreedLoss(*world_, global_sequences, timeout, clock_));
    for (int u = 0; u < n; ++u) {
      FSDP_RETURN_IF_ERROR(units_[u]->ConvertExactSums(exact_->SegmentsOf(u), global_tokens));
    }
    exact_->ChooseNextExponents();
  } else {
    FSDP_ASSIGN_OR_RETURN(
        loss, AverageLossAcrossRanks(static_cast<float>(local.loss_sum / accum), clock_));
  }

  // Global-norm clipping over the shards.
  float grad_norm = 0.0f;
  GradientNormPair noise_norms;
  if (options_.grad_clip > 0.0f || measure_noise) {
    FSDP_ASSIGN_OR_RETURN(const double sum_of_squares, GlobalGradSumOfSquares(clock_));
    if (measure_noise) {
      // The first micro-batch's gradients were scaled by 1 / accum (not the
      // exact sums: already the micro-batch's mean).
      const double unscale = exact_.has_value() ? 1.0 : static_cast<double>(accum) * accum;
      FSDP_ASSIGN_OR_RETURN(const double mean_first_sq,
                            MeanAcrossRanks(static_cast<float>(local.first_sq), clock_));
      noise_norms.small_sq_norm = mean_first_sq * unscale;
      noise_norms.small_batch = micro_batches[0].batch_size;
      noise_norms.big_sq_norm = sum_of_squares;
      noise_norms.big_batch = int64_t{micro_batches[0].batch_size} * accum * world_->size();
    }
    if (options_.grad_clip > 0.0f) {
      grad_norm = static_cast<float>(std::sqrt(sum_of_squares));
      const float scale = ClipScale(sum_of_squares, options_.grad_clip);
      for (auto& unit : units_) FSDP_RETURN_IF_ERROR(unit->ScaleReducedGrads(scale));
    }
  }

  // Optimizer step (full buffers for no_shard, this rank's shard otherwise),
  // then clear the gradients.
  const int step = steps_taken_ + 1;
  const absl::Time optimizer_start = absl::Now();
  for (int u = 0; u < n; ++u) {
    FSDP_RETURN_IF_ERROR(units_[u]->StepOptimizer(*optimizer_, u, lr, step));
    FSDP_RETURN_IF_ERROR(units_[u]->ClearGrads());
  }
  steps_taken_ = step;
  const absl::Duration optimizer_time = absl::Now() - optimizer_start;

  // shard_optimizer / shard_grad_op: every unit is now kSharded (only this
  // rank's shard of its whole buffer is current). The next forward gathers
  // the updated shards through the same Unshard + prefetch path as
  // full_shard, so at most max_gathers_in_flight of them are outstanding.

  StepResult result;
  result.step = step;
  result.loss = loss;
  result.lr = lr;
  result.grad_norm = grad_norm;
  result.global_tokens = global_tokens;
  result.step_time = absl::Now() - start;
  result.comm_wait = clock_.total();
  result.optimizer_time = optimizer_time;
  result.unit_compute = unit_compute_;
  result.noise_norms = noise_norms;
  result.passes = passes;
  return result;
}

// ---------------------------------------------------------------------------
// Helpers of Step(), in the order it calls them.

// Forward and backward over every micro-batch, and the gradient reductions
// (the loop the file's header draws).
absl::StatusOr<DataParallelTrainer::LocalSums> DataParallelTrainer::ComputeAndReduceGradients(
    absl::Span<const Batch> micro_batches, bool measure_noise) {
  const int n = num_units();
  const int accum = options_.accum_steps;
  const absl::Duration timeout = options_.comm_timeout;
  // [Note: gradient scaling]; exact sums take each sequence's summed loss
  // and are divided by the global token count once, when converted.
  const float loss_scale = exact_.has_value() ? 1.0f : 1.0f / static_cast<float>(accum);
  if (exact_.has_value()) exact_->BeginPass();
  LocalSums local;
  for (int m = 0; m < accum; ++m) {
    const bool last_micro_batch = (m == accum - 1);
    for (int u = 0; u < n; ++u) {
      FSDP_RETURN_IF_ERROR(ForwardUnit(u, micro_batches[m]));  // gather, compute, free
    }
    local.loss_sum += model_->loss();
    if (exact_.has_value()) exact_->AddSequenceLosses(model_->sequence_losses());
    for (int u = n - 1; u >= 0; --u) {
      ShardedUnit& unit = *units_[u];
      FSDP_RETURN_IF_ERROR(BackwardUnit(u, loss_scale));
      if (measure_noise && m == 0) {
        FSDP_ASSIGN_OR_RETURN(const ConstDtypeSpan grads, unit.LocalGrads());
        local.first_sq +=
            exact_.has_value()
                ? exact_->SquaredNormOfLocalSums(
                      u, grads, int64_t{micro_batches[0].batch_size} * micro_batches[0].seq_len)
                : SquaredNormForStatistics(grads);
      }
      if (last_micro_batch) {  // [Note: accumulation]
        FSDP_RETURN_IF_ERROR(unit.StartReduction(comms_));
        if (u + 1 < n) {  // [Note: overlap of reduction and backward]
          FSDP_RETURN_IF_ERROR(units_[u + 1]->FinishReduceScatter(comms_, timeout, clock_));
        }
      }
      if (runtime_.shard_params) FSDP_RETURN_IF_ERROR(unit.Reshard());
    }
  }

  // Finish the reductions: the first unit's reduce-scatter, then every
  // second phase, in the order they were posted.
  FSDP_RETURN_IF_ERROR(units_[0]->FinishReduceScatter(comms_, timeout, clock_));
  for (int u = n - 1; u >= 0; --u) {
    FSDP_RETURN_IF_ERROR(units_[u]->FinishReduction(timeout, clock_));
  }
  return local;
}

absl::Status DataParallelTrainer::CheckBatches(absl::Span<const Batch> micro_batches) const {
  if (static_cast<int>(micro_batches.size()) != options_.accum_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Step() got ", micro_batches.size(), " micro-batches but accum_steps is ",
        options_.accum_steps, "; pass exactly one per accumulation step"));
  }
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    const Batch& b = micro_batches[m];
    if (b.batch_size != micro_batches[0].batch_size || b.seq_len != micro_batches[0].seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "micro-batch ", m, " is ", b.batch_size, "x", b.seq_len, " but micro-batch 0 is ",
          micro_batches[0].batch_size, "x", micro_batches[0].seq_len,
          "; gradient scaling assumes equal micro-batches"));
    }
  }
  return absl::OkStatus();
}

// [Note: prefetch]
// The limits are the plan's (the ones every rank checked it agrees on).
absl::Status DataParallelTrainer::Prefetch(int unit, int direction) {
  const int depth = plan_.options().prefetch_depth();
  const int max_in_flight = plan_.options().max_gathers_in_flight();
  int in_flight = 0;
  for (const auto& u : units_) in_flight += u->param_state() == ParamState::kGathering ? 1 : 0;
  for (int k = 1; k <= depth; ++k) {
    const int next = unit + k * direction;
    if (next < 0 || next >= num_units()) break;
    if (units_[next]->param_state() != ParamState::kSharded) continue;
    if (in_flight >= max_in_flight) break;
    FSDP_RETURN_IF_ERROR(units_[next]->Unshard(comms_));
    ++in_flight;
  }
  return absl::OkStatus();
}

absl::Status DataParallelTrainer::ForwardUnit(int u, const Batch& batch) {
  ShardedUnit& unit = *units_[u];
  FSDP_RETURN_IF_ERROR(unit.Unshard(comms_));  // no-op if prefetched or whole
  FSDP_RETURN_IF_ERROR(unit.WaitForUnshard(options_.comm_timeout, clock_));
  FSDP_RETURN_IF_ERROR(Prefetch(u, +1));
  NoteWorkingBuffers();
  FSDP_ASSIGN_OR_RETURN(const ConstDtypeSpan params, unit.UnshardedParams());
  const absl::Time compute_start = absl::Now();
  for (const proto::SourceUnit& source : unit.plan().source_units()) {
    FSDP_RETURN_IF_ERROR(model_->ForwardUnit(source.model_unit_index(),
                                             params.subspan(source.offset(), source.numel()),
                                             batch));
  }
  unit_compute_[u] += absl::Now() - compute_start;
  // The last unit's backward comes next: keep it gathered.
  if (runtime_.shard_params && u + 1 < num_units()) FSDP_RETURN_IF_ERROR(unit.Reshard());
  return absl::OkStatus();
}

absl::Status DataParallelTrainer::BackwardUnit(int u, float loss_scale) {
  ShardedUnit& unit = *units_[u];
  FSDP_RETURN_IF_ERROR(unit.Unshard(comms_));
  FSDP_RETURN_IF_ERROR(unit.WaitForUnshard(options_.comm_timeout, clock_));
  FSDP_RETURN_IF_ERROR(Prefetch(u, -1));
  FSDP_ASSIGN_OR_RETURN(const BackwardGrads grads, unit.GradsForBackward());
  NoteWorkingBuffers();
  FSDP_ASSIGN_OR_RETURN(const ConstDtypeSpan params, unit.UnshardedParams());
  const auto& sources = unit.plan().source_units();
  const absl::Time compute_start = absl::Now();
  for (int s = sources.size() - 1; s >= 0; --s) {
    const proto::SourceUnit& source = sources[s];
    const absl::Span<float> scratch =
        grads.fp32_scratch.empty() ? grads.fp32_scratch
                                   : grads.fp32_scratch.subspan(source.offset(), source.numel());
    const ExactGradSums exact =
        exact_.has_value() ? exact_->GradSumsFor(source.model_unit_index()) : ExactGradSums{};
    FSDP_RETURN_IF_ERROR(BackwardModelUnit(*model_, source.model_unit_index(),
                                           params.subspan(source.offset(), source.numel()),
                                           grads.grads.subspan(source.offset(), source.numel()),
                                           grads.write, scratch, loss_scale, exact));
  }
  unit_compute_[u] += absl::Now() - compute_start;
  return unit.MarkBackwardDone();
}

void DataParallelTrainer::NoteWorkingBuffers() {
  int64_t gathered = 0, grads = 0;
  for (const auto& unit : units_) {
    gathered += unit->gathered_param_numel();
    grads += unit->unsharded_grad_numel();
  }
  peak_gathered_param_numel_ = std::max(peak_gathered_param_numel_, gathered);
  peak_unsharded_grad_numel_ = std::max(peak_unsharded_grad_numel_, grads);
}

absl::StatusOr<float> DataParallelTrainer::AverageLossAcrossRanks(float local_loss,
                                                                  CommWaitClock& clock) {
  if (world_->size() == 1) return local_loss;
  scalar_comm_buffer_[0] = local_loss;
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(scalar_comm_buffer_.span().subspan(0, 1));
  options.dtype = comm::Dtype::kFloat32;
  options.op = comm::ReduceOp::kSum;
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world_->AllReduce(options));
  FSDP_RETURN_IF_ERROR(clock.Wait(*work, options_.comm_timeout, "loss all-reduce"));
  return scalar_comm_buffer_[0] / static_cast<float>(world_->size());
}

// The mean over ranks of one float per rank (a statistic, not a training
// value): summed by a one-element all-reduce, in the buffer the loss uses
// after it.
absl::StatusOr<double> DataParallelTrainer::MeanAcrossRanks(float local_value,
                                                            CommWaitClock& clock) {
  if (world_->size() == 1) return local_value;
  scalar_comm_buffer_[0] = local_value;
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(scalar_comm_buffer_.span().subspan(0, 1));
  options.dtype = comm::Dtype::kFloat32;
  options.op = comm::ReduceOp::kSum;
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world_->AllReduce(options));
  FSDP_RETURN_IF_ERROR(clock.Wait(*work, options_.comm_timeout, "gradient noise all-reduce"));
  return static_cast<double>(scalar_comm_buffer_[0]) / world_->size();
}

// [Note: sharded norm] Each rank takes ITS SHARD of every unit only; the
// shard group (which holds every shard exactly once; for hybrid_shard each
// group holds a full copy) combines the ranks' parts. no_shard does the same
// over its slice of the full gradients. The parts are an exact maximum and
// exact integer sums ([Note: exact sum of squares] in fsdp/optim/grad_clip.h),
// exchanged by two small all-gathers and combined in rank order, so the clip
// scale agrees bit for bit across strategies and world sizes.
//
// bf16 gradients are read as they are stored, widened block by block.
absl::StatusOr<double> DataParallelTrainer::GlobalGradSumOfSquares(CommWaitClock& clock) {
  float max_abs = 0.0f;
  for (const auto& unit : units_) {
    FSDP_ASSIGN_OR_RETURN(const ConstDtypeSpan shard, unit->OwnedReducedGrads());
    max_abs = LargerMagnitude(max_abs, MaxAbsOf(shard));
  }
  FSDP_ASSIGN_OR_RETURN(
      const std::vector<float> maxima,
      GatherFromShardGroup<float>(max_abs, clock, "gradient-norm all-gather (largest |g|)"));
  for (float m : maxima) max_abs = LargerMagnitude(max_abs, m);
  if (!std::isfinite(max_abs)) return static_cast<double>(max_abs) * max_abs;  // NaN or +inf
  if (max_abs == 0.0f) return 0.0;

  const int exponent = SquareUnitExponent(max_abs);
  SquareUnits units = 0;
  for (const auto& unit : units_) {
    FSDP_ASSIGN_OR_RETURN(const ConstDtypeSpan shard, unit->OwnedReducedGrads());
    units += SumOfSquareUnitsOf(shard, exponent);
  }
  FSDP_ASSIGN_OR_RETURN(
      const std::vector<SquareUnits> parts,
      GatherFromShardGroup<SquareUnits>(units, clock, "gradient-norm all-gather (squares)"));
  SquareUnits total = 0;
  for (SquareUnits part : parts) total += part;
  return SquareSumFromUnits(total, exponent);
}

// Every shard-group rank's `mine`, in group-rank order, through the norm
// exchange buffer (bytes moved, never added: any trivially copyable T).
template <typename T>
absl::StatusOr<std::vector<T>> DataParallelTrainer::GatherFromShardGroup(
    const T& mine, CommWaitClock& clock, absl::string_view what) {
  static_assert(sizeof(T) <= plan::kNormExchangeBytesPerRank, "the norm exchange holds 16 bytes a rank");
  comm::Communicator& group = *comms_.shard_group;
  std::vector<T> gathered(group.size());
  if (group.size() == 1) {
    gathered[0] = mine;
    return gathered;
  }
  const absl::Span<std::byte> output =
      comm::AsBytes(scalar_comm_buffer_.span()).subspan(0, sizeof(T) * group.size());
  std::memcpy(output.data() + sizeof(T) * group.rank(), &mine, sizeof(T));
  comm::AllGatherOptions options;
  options.input = output.subspan(sizeof(T) * group.rank(), sizeof(T));  // in place
  options.output = output;
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, group.AllGather(options));
  FSDP_RETURN_IF_ERROR(clock.Wait(*work, options_.comm_timeout, what));
  std::memcpy(gathered.data(), output.data(), output.size());
  return gathered;
}

// ---------------------------------------------------------------------------
// Checkpoints.

std::vector<int> DataParallelTrainer::exact_exponents() const {
  if (!exact_.has_value()) return {};
  return std::vector<int>(exact_->exponents().begin(), exact_->exponents().end());
}

absl::Status DataParallelTrainer::SetExactExponents(absl::Span<const int> exponents) {
  if (!exact_.has_value()) {
    return absl::InvalidArgumentError("exact exponents for a trainer without --exact");
  }
  return exact_->SetExponents(exponents);
}

int64_t DataParallelTrainer::ModelOffset(int u) const {
  int64_t offset = 0;
  for (int i = 0; i < u; ++i) offset += plan_.units(i).flat_numel();
  return offset;
}

absl::StatusOr<std::vector<StateRegion>> DataParallelTrainer::CheckpointSaveRegions() {
  if (!saves_checkpoint_shard()) return std::vector<StateRegion>();
  return CheckpointShardRegions();
}

absl::StatusOr<std::vector<StateRegion>> DataParallelTrainer::CheckpointShardRegions() {
  std::vector<StateRegion> regions;
  for (int u = 0; u < num_units(); ++u) {
    FSDP_ASSIGN_OR_RETURN(std::vector<StateRegion> unit_regions,
                          units_[u]->SaveRegions(*optimizer_, ModelOffset(u)));
    for (StateRegion& r : unit_regions) regions.push_back(std::move(r));
  }
  return regions;
}

absl::StatusOr<std::vector<StateRegion>> DataParallelTrainer::CheckpointLoadRegions() {
  std::vector<StateRegion> regions;
  for (int u = 0; u < num_units(); ++u) {
    FSDP_ASSIGN_OR_RETURN(std::vector<StateRegion> unit_regions,
                          units_[u]->LoadRegions(*optimizer_, ModelOffset(u)));
    for (StateRegion& r : unit_regions) regions.push_back(std::move(r));
  }
  return regions;
}

absl::Status DataParallelTrainer::FinishCheckpointLoad(int steps_taken) {
  if (steps_taken < 0) {
    return absl::InvalidArgumentError(absl::StrCat("steps_taken ", steps_taken, " < 0"));
  }
  for (auto& unit : units_) FSDP_RETURN_IF_ERROR(unit->FinishLoad(*optimizer_, steps_taken));
  steps_taken_ = steps_taken;
  return absl::OkStatus();
}

absl::Status DataParallelTrainer::ForEachGatheredUnit(
    const std::function<absl::Status(const proto::UnitPlan&, absl::Span<const float>)>& fn) {
  CommWaitClock clock;
  for (auto& unit : units_) {
    // A gather in flight (a prefetch after a failed step) lands first.
    if (unit->param_state() == ParamState::kGathering) {
      FSDP_RETURN_IF_ERROR(unit->WaitForUnshard(options_.comm_timeout, clock));
    }
    FSDP_ASSIGN_OR_RETURN(
        FloatBuffer whole,
        tracker_->Allocate<float>(MemoryCategory::kParameters, unit->plan().padded_numel(),
                                  absl::StrCat("unit ", unit->plan().index(), " consolidated")));
    FSDP_ASSIGN_OR_RETURN(
        PendingCollective gather,
        PostAllGather(*comms_.shard_group, unit->ParamShard(), whole.span(), "consolidation"));
    FSDP_RETURN_IF_ERROR(gather.Finish(options_.comm_timeout, clock,
                                       absl::StrCat(unit->name(), " consolidation gather")));
    FSDP_RETURN_IF_ERROR(
        fn(unit->plan(), absl::Span<const float>(whole.span()).subspan(0, unit->plan().flat_numel())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>>
DataParallelTrainer::GatherParamsInModelOrder() {
  std::vector<std::vector<float>> params(model_->num_units());
  FSDP_RETURN_IF_ERROR(ForEachGatheredUnit(
      [&](const proto::UnitPlan& plan, absl::Span<const float> whole) {
        for (const proto::SourceUnit& source : plan.source_units()) {
          auto span = whole.subspan(source.offset(), source.numel());
          params[source.model_unit_index()].assign(span.begin(), span.end());
        }
        return absl::OkStatus();
      }));
  return params;
}

}  // namespace fsdp
