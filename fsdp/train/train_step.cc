// File: fsdp/train/train_step.cc
//
// The replicated data-parallel step (Strategy::kNoShard), top to bottom:
//
//   for each micro-batch m of accum_steps:
//     forward over units 0..n-1
//     backward over units n-1..0; on the LAST micro-batch only, each unit's
//       gradient bucket starts reducing as soon as its backward is done
//   finish the reductions (every rank now holds the averaged gradients)
//   average the loss across ranks (one scalar all-reduce), for reporting
//   clip by the global gradient norm (optional)
//   optimizer step over every unit's full flat buffer; zero the gradients
//
// [Note: overlap of reduction and backward] A unit's bucket is its flat
// gradient buffer. Its reduce-scatter is posted right after its backward
// (the comm progress engine moves it while the next units compute). After
// the NEXT unit's backward we wait for it, scale the shard and post the
// all-gather, which again runs while backward continues. Waiting one unit
// behind, at fixed points, keeps the order in which ranks post collectives
// identical on every rank (the communicator requires it) while letting each
// reduce-scatter overlap a whole unit of compute.
//
// [Note: accumulation] Micro-batches before the last only accumulate into
// the flat gradients (kAccumulated); communicating them would move the same
// bytes accum_steps times for nothing, because reduction is linear.
#include "fsdp/train/train_step.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/status_macros.h"
#include "fsdp/optim/grad_clip.h"

namespace fsdp {

absl::StatusOr<std::unique_ptr<DataParallelTrainer>> DataParallelTrainer::Create(
    Model* model, comm::Communicator* world, MemoryTracker* tracker,
    std::unique_ptr<UnitOptimizer> optimizer, const TrainStepOptions& options) {
  FSDP_RETURN_IF_ERROR(CheckStrategyAvailable(options.strategy));
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
  std::unique_ptr<DataParallelTrainer> trainer(
      new DataParallelTrainer(model, world, tracker, std::move(optimizer), options));
  for (int u = 0; u < model->num_units(); ++u) {
    FSDP_ASSIGN_OR_RETURN(FlatUnitLayout layout,
                          MakeFlatUnitLayout(model->units()[u], u, world->size()));
    FSDP_ASSIGN_OR_RETURN(std::unique_ptr<FlatUnit> unit, FlatUnit::Create(layout, *tracker));
    model->InitUnitParams(u, unit->mutable_params(), options.seed);
    FSDP_RETURN_IF_ERROR(trainer->optimizer_->AddUnit(u, layout.numel, *tracker));
    trainer->units_.push_back(std::move(unit));
  }
  FSDP_ASSIGN_OR_RETURN(trainer->scalar_comm_buffer_,
                        tracker->Allocate<float>(MemoryCategory::kCommBuffers, 1,
                                                 "loss/norm all-reduce scalar"));
  return trainer;
}

absl::StatusOr<StepResult> DataParallelTrainer::Step(absl::Span<const Batch> micro_batches,
                                                     float lr) {
  FSDP_RETURN_IF_ERROR(CheckBatches(micro_batches));
  const absl::Time start = absl::Now();
  const int n = num_units();
  const int accum = options_.accum_steps;
  const absl::Duration timeout = options_.comm_timeout;
  comm::Communicator& world = *world_;
  CommWaitClock clock;

  // Forward and backward over every micro-batch.
  double local_loss_sum = 0.0;
  for (int m = 0; m < accum; ++m) {
    const Batch& batch = micro_batches[m];
    const bool last_micro_batch = (m == accum - 1);
    for (int u = 0; u < n; ++u) {
      FSDP_RETURN_IF_ERROR(model_->ForwardUnit(u, units_[u]->params(), batch));
    }
    local_loss_sum += model_->loss();
    for (int u = n - 1; u >= 0; --u) {
      FlatUnit& unit = *units_[u];
      FSDP_RETURN_IF_ERROR(model_->BackwardUnit(u, unit.params(), unit.mutable_grads(),
                                                1.0f / static_cast<float>(accum)));
      FSDP_RETURN_IF_ERROR(unit.MarkBackwardDone());
      if (!last_micro_batch) continue;  // [Note: accumulation]
      FSDP_RETURN_IF_ERROR(unit.StartReduction(world));
      if (u + 1 < n) {  // [Note: overlap of reduction and backward]
        FSDP_RETURN_IF_ERROR(units_[u + 1]->FinishReduceScatter(
            world, 1.0f / static_cast<float>(world.size()), timeout, clock));
      }
    }
  }

  // Finish the reductions: the first unit's reduce-scatter, then every
  // all-gather, in the order they were posted.
  FSDP_RETURN_IF_ERROR(
      units_[0]->FinishReduceScatter(world, 1.0f / static_cast<float>(world.size()), timeout,
                                     clock));
  for (int u = n - 1; u >= 0; --u) {
    FSDP_RETURN_IF_ERROR(units_[u]->FinishAllGather(timeout, clock));
  }

  // Loss for reporting: the mean over all ranks' micro-batches.
  FSDP_ASSIGN_OR_RETURN(
      float loss,
      AverageLossAcrossRanks(static_cast<float>(local_loss_sum / accum), clock));

  // Global-norm clipping.
  float grad_norm = 0.0f;
  if (options_.grad_clip > 0.0f) {
    FSDP_ASSIGN_OR_RETURN(const float sum_of_squares, GlobalGradSumOfSquares(clock));
    grad_norm = std::sqrt(sum_of_squares);
    const float scale = ClipScale(sum_of_squares, options_.grad_clip);
    for (auto& unit : units_) ScaleInPlace(unit->mutable_grads(), scale);
  }

  // Optimizer step over the full flat buffers, then clear the gradients.
  const int step = steps_taken_ + 1;
  for (int u = 0; u < n; ++u) {
    FlatUnit& unit = *units_[u];
    FSDP_RETURN_IF_ERROR(
        optimizer_->StepUnit(u, unit.mutable_params(), unit.grads(), lr, step));
    FSDP_RETURN_IF_ERROR(unit.ZeroGrads());
  }
  steps_taken_ = step;

  StepResult result;
  result.step = step;
  result.loss = loss;
  result.lr = lr;
  result.grad_norm = grad_norm;
  result.global_tokens = int64_t{micro_batches[0].batch_size} * micro_batches[0].seq_len *
                         accum * world.size();
  result.step_time = absl::Now() - start;
  result.comm_wait = clock.total();
  return result;
}

// ---------------------------------------------------------------------------
// Helpers of Step(), in the order it calls them.

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

absl::StatusOr<float> DataParallelTrainer::AverageLossAcrossRanks(float local_loss,
                                                                  CommWaitClock& clock) {
  if (world_->size() == 1) return local_loss;
  scalar_comm_buffer_[0] = local_loss;
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(scalar_comm_buffer_.span());
  options.dtype = comm::Dtype::kFloat32;
  options.op = comm::ReduceOp::kSum;
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world_->AllReduce(options));
  FSDP_RETURN_IF_ERROR(clock.Wait(*work, options_.comm_timeout, "loss all-reduce"));
  return scalar_comm_buffer_[0] / static_cast<float>(world_->size());
}

// [Note: sharded norm] Each rank sums the squares of ITS SHARD of every
// unit only, and one scalar all-reduce adds the partial sums: exactly what
// the sharded strategies must do, so the clip scale agrees bit for bit.
absl::StatusOr<float> DataParallelTrainer::GlobalGradSumOfSquares(CommWaitClock& clock) {
  double local = 0.0;
  for (const auto& unit : units_) {
    local += SumOfSquares(unit->padded_grads().subspan(
        unit->layout().shard_offset(world_->rank()), unit->layout().shard_numel));
  }
  if (world_->size() == 1) return static_cast<float>(local);
  scalar_comm_buffer_[0] = static_cast<float>(local);
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(scalar_comm_buffer_.span());
  options.dtype = comm::Dtype::kFloat32;
  options.op = comm::ReduceOp::kSum;
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world_->AllReduce(options));
  FSDP_RETURN_IF_ERROR(clock.Wait(*work, options_.comm_timeout, "gradient-norm all-reduce"));
  return scalar_comm_buffer_[0];
}

std::vector<absl::Span<const float>> DataParallelTrainer::ParamsInModelOrder() const {
  std::vector<absl::Span<const float>> spans;
  spans.reserve(units_.size());
  for (const auto& unit : units_) spans.push_back(unit->params());
  return spans;
}

}  // namespace fsdp
