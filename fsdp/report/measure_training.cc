// File: fsdp/report/measure_training.cc
#include "fsdp/report/measure_training.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/status_macros.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/gpt_model.h"
#include "fsdp/train/rank_batches.h"
#include "fsdp/train/train_step.h"
#include "fsdp/train/unit_optimizers.h"

namespace fsdp {
namespace report {

absl::StatusOr<RankMeasurement> MeasureTrainingMemory(const TrainOptions& options,
                                                      comm::Communicator& world) {
  FSDP_RETURN_IF_ERROR(ValidateTrainOptions(options));
  if (world.size() != options.nproc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this job has ", world.size(), " ranks but the options say nproc=", options.nproc));
  }
  FSDP_RETURN_IF_ERROR(
      SetComputeThreads(options.threads > 0 ? options.threads : DefaultComputeThreads()));
  RankMeasurement measurement;
  FSDP_ASSIGN_OR_RETURN(measurement.baseline_rss_bytes, CurrentRssBytes());

  GptConfig config;
  config.layers = options.layers;
  config.d_model = options.d_model;
  config.heads = options.heads;
  config.vocab = options.vocab;
  config.seq_len = options.seq_len;
  MemoryTracker tracker;
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<GptModel> model,
                        GptModel::Create(config, options.micro_batch, &tracker));
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<UnitOptimizer> optimizer,
                        MakeUnitOptimizer(options.optimizer, options.weight_decay));
  TrainStepOptions step_options;
  step_options.strategy = options.strategy;
  step_options.accum_steps = options.accum;
  step_options.grad_clip = options.grad_clip;
  step_options.seed = options.seed;
  step_options.comm_timeout = options.comm_timeout;
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<DataParallelTrainer> trainer,
                        DataParallelTrainer::Create(model.get(), &world, &tracker,
                                                    std::move(optimizer), step_options));
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<RankBatches> batches,
                        RankBatches::Create(options, world.rank()));
  for (int step = 1; step <= options.steps; ++step) {
    FSDP_ASSIGN_OR_RETURN(std::vector<Batch> micro_batches, batches->NextStep());
    FSDP_ASSIGN_OR_RETURN(StepResult result, trainer->Step(micro_batches, options.lr));
    (void)result;
  }

  const MemorySnapshot snapshot = tracker.Snapshot();
  measurement.peak_bytes = snapshot.peak_bytes;
  measurement.peak_total_bytes = snapshot.peak_total_bytes;
  FSDP_ASSIGN_OR_RETURN(measurement.peak_rss_bytes, PeakRssBytes());
  return measurement;
}

}  // namespace report
}  // namespace fsdp
