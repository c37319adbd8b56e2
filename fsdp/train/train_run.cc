// File: fsdp/train/train_run.cc
#include "fsdp/train/train_run.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/status_macros.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/gpt_model.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/optim/lr_schedule.h"
#include "fsdp/train/metrics_writer.h"
#include "fsdp/train/param_digest.h"
#include "fsdp/train/rank_batches.h"
#include "fsdp/train/train_step.h"
#include "fsdp/train/unit_optimizers.h"

namespace fsdp {
namespace {

GptConfig GptConfigFrom(const TrainOptions& options) {
  GptConfig config;
  config.layers = options.layers;
  config.d_model = options.d_model;
  config.heads = options.heads;
  config.vocab = options.vocab;
  config.seq_len = options.seq_len;
  return config;
}

}  // namespace

TrainStepOptions TrainStepOptionsFrom(const TrainOptions& options) {
  TrainStepOptions step_options;
  step_options.strategy = options.strategy;
  step_options.accum_steps = options.accum;
  step_options.grad_clip = options.grad_clip;
  step_options.seed = options.seed;
  step_options.comm_timeout = options.comm_timeout;
  step_options.group_size = options.group_size;
  step_options.prefetch_depth = options.prefetch_depth;
  step_options.max_gathers_in_flight = options.max_gathers_in_flight;
  step_options.mixed_precision = options.mixed_precision;
  step_options.min_unit_numel = options.min_unit_numel;
  return step_options;
}

absl::StatusOr<std::string> TrainingPlanText(const TrainOptions& options) {
  FSDP_RETURN_IF_ERROR(ValidateTrainOptions(options));
  FSDP_ASSIGN_OR_RETURN(proto::ShardPlan plan,
                        BuildTrainingPlan(GptUnitSpecs(GptConfigFrom(options)),
                                          TrainStepOptionsFrom(options), options.nproc));
  return plan::ShardPlanToText(plan);
}

absl::StatusOr<RunSummary> RunTraining(const TrainOptions& options, comm::Communicator& world,
                                       std::FILE* log) {
  FSDP_RETURN_IF_ERROR(ValidateTrainOptions(options));
  if (world.size() != options.nproc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this job has ", world.size(), " ranks but --nproc=", options.nproc,
        "; launch with the same --nproc as the job's world size"));
  }
  FSDP_RETURN_IF_ERROR(
      SetComputeThreads(options.threads > 0 ? options.threads : DefaultComputeThreads()));

  const GptConfig config = GptConfigFrom(options);

  MemoryTracker tracker(options.mem_budget_bytes);
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<GptModel> model,
                        GptModel::Create(config, options.micro_batch, &tracker));
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<UnitOptimizer> optimizer, MakeUnitOptimizer(options.optimizer, options.weight_decay));
  const TrainStepOptions step_options = TrainStepOptionsFrom(options);
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<DataParallelTrainer> trainer,
                        DataParallelTrainer::Create(model.get(), &world, &tracker,
                                                    std::move(optimizer), step_options));
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<RankBatches> batches,
                        RankBatches::Create(options, world.rank()));

  LrScheduleOptions schedule_options;
  schedule_options.base_lr = options.lr;
  schedule_options.min_lr = options.min_lr;
  schedule_options.warmup_steps = options.warmup_steps;
  schedule_options.total_steps = options.steps;
  schedule_options.decay = options.lr_decay;
  schedule_options.linear_scaling = options.lr_reference_batch > 0;
  schedule_options.global_batch = options.global_batch();
  schedule_options.reference_batch = std::max<int64_t>(options.lr_reference_batch, 1);
  FSDP_ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(schedule_options));

  const bool reporter = (world.rank() == 0);
  std::unique_ptr<MetricsWriter> metrics;
  if (reporter && !options.metrics_out.empty()) {
    FSDP_ASSIGN_OR_RETURN(metrics, MetricsWriter::Open(options.metrics_out));
  }
  RunSummary summary;
  summary.num_params = 0;
  for (const UnitSpec& unit : model->units()) summary.num_params += unit.numel();
  if (log != nullptr) {
    std::fprintf(log,
                 "train_gpt: %s\ntrain_gpt: %lld parameters in %d units (%d plan units, "
                 "%lld elements per rank per sharded state), %lld tokens/step\n",
                 TrainOptionsToString(options).c_str(),
                 static_cast<long long>(summary.num_params), model->num_units(),
                 trainer->num_units(),
                 static_cast<long long>(trainer->plan().total_shard_numel()),
                 static_cast<long long>(options.tokens_per_step()));
    std::fflush(log);
  }

  // The first step pays for warm-up (page faults, thread start); rates are
  // reported over the rest.
  absl::Duration timed_step_time, timed_comm_wait;
  int64_t timed_tokens = 0;
  for (int step = 1; step <= options.steps; ++step) {
    FSDP_ASSIGN_OR_RETURN(std::vector<Batch> micro_batches, batches->NextStep());
    const float lr = schedule.At(step - 1);  // the schedule counts from 0
    FSDP_ASSIGN_OR_RETURN(StepResult result, trainer->Step(micro_batches, lr));

    const double seconds = absl::ToDoubleSeconds(result.step_time);
    const double tokens_per_s = seconds > 0 ? result.global_tokens / seconds : 0.0;
    const int64_t peak_bytes = tracker.Snapshot().peak_total_bytes;
    if (step == 1) summary.first_loss = result.loss;
    if (step > 1 || options.steps == 1) {
      timed_step_time += result.step_time;
      timed_comm_wait += result.comm_wait;
      timed_tokens += result.global_tokens;
    }
    summary.final_loss = result.loss;
    if (log != nullptr) {
      std::fprintf(log,
                   "step %4d/%d | loss %.6f | lr %.3e | %9.0f tok/s | peak %s/rank | "
                   "comm wait %.1f ms (%.0f%%)\n",
                   step, options.steps, result.loss, result.lr, tokens_per_s,
                   FormatBytes(peak_bytes).c_str(), absl::ToDoubleMilliseconds(result.comm_wait),
                   seconds > 0 ? 100.0 * absl::ToDoubleSeconds(result.comm_wait) / seconds : 0.0);
      std::fflush(log);
    }
    if (metrics != nullptr) {
      StepMetrics m;
      m.step = step;
      m.loss = result.loss;
      m.lr = result.lr;
      m.tokens_per_s = tokens_per_s;
      m.peak_bytes = peak_bytes;
      m.comm_wait_s = absl::ToDoubleSeconds(result.comm_wait);
      FSDP_RETURN_IF_ERROR(metrics->WriteLine(StepMetricsJson(m)));
    }
  }

  summary.steps = options.steps;
  summary.memory = tracker.Snapshot();
  summary.peak_gathered_param_numel = trainer->peak_gathered_param_numel();
  summary.peak_unsharded_grad_numel = trainer->peak_unsharded_grad_numel();
  summary.plan_fingerprint = trainer->plan().fingerprint();
  FSDP_ASSIGN_OR_RETURN(std::vector<std::vector<float>> params,
                        trainer->GatherParamsInModelOrder());
  std::vector<absl::Span<const float>> param_spans(params.begin(), params.end());
  summary.param_sha256 = ParamSha256Hex(param_spans);
  const double timed_seconds = absl::ToDoubleSeconds(timed_step_time);
  summary.tokens_per_s = timed_seconds > 0 ? timed_tokens / timed_seconds : 0.0;
  summary.comm_wait_share =
      timed_seconds > 0 ? absl::ToDoubleSeconds(timed_comm_wait) / timed_seconds : 0.0;
  summary.peak_bytes = summary.memory.peak_total_bytes;
  if (metrics != nullptr) {
    FinalMetrics f;
    f.steps = summary.steps;
    f.loss = summary.final_loss;
    f.param_sha256 = summary.param_sha256;
    f.world_size = world.size();
    f.strategy = StrategyName(options.strategy);
    f.tokens_per_s = summary.tokens_per_s;
    f.comm_wait_share = summary.comm_wait_share;
    f.peak_bytes = summary.peak_bytes;
    FSDP_RETURN_IF_ERROR(metrics->WriteLine(FinalMetricsJson(f)));
  }
  if (log != nullptr) {
    std::fprintf(log,
                 "train_gpt: done, %d steps, loss %.4f -> %.4f, %.0f tok/s, comm wait %.1f%% "
                 "of step time, peak %s/rank, params sha256 %s\n",
                 summary.steps, summary.first_loss, summary.final_loss, summary.tokens_per_s,
                 100.0 * summary.comm_wait_share, FormatBytes(summary.peak_bytes).c_str(),
                 summary.param_sha256.c_str());
    std::fflush(log);
  }
  return summary;
}

}  // namespace fsdp
