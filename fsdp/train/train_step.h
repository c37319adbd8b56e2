// File: fsdp/train/train_step.h
//
// The data-parallel training step. One DataParallelTrainer per rank owns the
// units' flat buffers (fsdp/train/flat_unit.h) and drives a fsdp::Model, a
// comm::Communicator and an optimizer through one optimizer step at a time:
//
//   FSDP_ASSIGN_OR_RETURN(auto trainer, DataParallelTrainer::Create(
//       &model, &world, &tracker, std::move(optimizer), options));
//   for (int step = 1; step <= steps; ++step) {
//     std::vector<Batch> micro_batches = ...;  // options.accum_steps of them,
//                                              // this rank's slice
//     FSDP_ASSIGN_OR_RETURN(StepResult r, trainer->Step(micro_batches, lr));
//   }
//
// The step itself reads top to bottom in train_step.cc; docs/data-parallel.md
// explains buckets, overlap, accumulation and the averaging math.
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
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/model.h"
#include "fsdp/train/comm_wait_clock.h"
#include "fsdp/train/flat_unit.h"
#include "fsdp/train/strategy.h"
#include "fsdp/train/unit_optimizer.h"

namespace fsdp {

struct TrainStepOptions {
  Strategy strategy = Strategy::kNoShard;
  int accum_steps = 1;    // micro-batches per optimizer step
  float grad_clip = 0.0f; // max global L2 norm of the gradients; <= 0: off
  uint64_t seed = 0;      // parameter initialization (Model::InitUnitParams)
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
};

class DataParallelTrainer {
 public:
  // Lays out every unit padded to the world size, allocates its buffers
  // through `tracker`, initializes parameters from options.seed (identically
  // on every rank: Model::InitUnitParams is deterministic), and allocates the
  // optimizer state. kUnimplemented for strategies not available yet,
  // kInvalidArgument for bad options. model, world and tracker must outlive
  // the trainer.
  static absl::StatusOr<std::unique_ptr<DataParallelTrainer>> Create(
      Model* model, comm::Communicator* world, MemoryTracker* tracker,
      std::unique_ptr<UnitOptimizer> optimizer, const TrainStepOptions& options);

  // One optimizer step over `micro_batches` (exactly accum_steps of them,
  // this rank's part of the global batch) with learning rate `lr`. Every rank
  // must call it with the same number and shape of micro-batches.
  absl::StatusOr<StepResult> Step(absl::Span<const Batch> micro_batches, float lr);

  int num_units() const { return static_cast<int>(units_.size()); }
  const FlatUnit& unit(int index) const { return *units_[index]; }
  int steps_taken() const { return steps_taken_; }
  // Every unit's real parameters in model order (for digests, checkpoints).
  std::vector<absl::Span<const float>> ParamsInModelOrder() const;

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
  absl::StatusOr<float> AverageLossAcrossRanks(float local_loss, CommWaitClock& clock);
  absl::StatusOr<float> GlobalGradSumOfSquares(CommWaitClock& clock);

  Model* model_;
  comm::Communicator* world_;
  MemoryTracker* tracker_;
  std::unique_ptr<UnitOptimizer> optimizer_;
  TrainStepOptions options_;
  std::vector<std::unique_ptr<FlatUnit>> units_;
  FloatBuffer scalar_comm_buffer_;  // 1 float: the loss / norm all-reduces
  int steps_taken_ = 0;
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_TRAIN_STEP_H_
