// File: fsdp/run/train_run.cc
#include "fsdp/run/train_run.h"

#include <string.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint.h"
#include "fsdp/checkpoint/checkpoint_reader.h"
#include "fsdp/checkpoint/handover.h"
#include "fsdp/checkpoint/memory_snapshots.h"
#include "fsdp/checkpoint/model_export.h"
#include "fsdp/checkpoint/safetensors.h"
#include "fsdp/exchange/blob_exchange.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/optim/lr_schedule.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/run/compute_backend.h"
#include "fsdp/run/metrics_plot.h"
#include "fsdp/run/metrics_writer.h"
#include "fsdp/run/model_registry.h"
#include "fsdp/run/param_digest.h"
#include "fsdp/run/rank_batches.h"
#include "fsdp/run/run_checkpoint.h"
#include "fsdp/run/straggler_report.h"
#include "fsdp/run/text_monitor.h"
#include "fsdp/run/unit_optimizers.h"
#include "fsdp/train/train_step.h"

namespace fsdp {

TrainStepOptions TrainStepOptionsFrom(const TrainOptions& options) {
  TrainStepOptions step_options;
  step_options.sharding = options.sharding;
  step_options.accum_steps = options.accum;
  step_options.grad_clip = options.grad_clip;
  step_options.seed = options.seed;
  step_options.comm_timeout = options.comm_timeout;
  return step_options;
}

absl::StatusOr<proto::ShardPlan> TrainingPlan(const TrainOptions& options) {
  FSDP_RETURN_IF_ERROR(ValidateTrainOptions(options));
  FSDP_RETURN_IF_ERROR(ValidateModelOptions(options));
  FSDP_ASSIGN_OR_RETURN(const ModelFactory* factory, FindModel(options.model));
  return BuildTrainingPlan(factory->unit_specs(options), TrainStepOptionsFrom(options),
                           options.nproc);
}

absl::StatusOr<std::string> TrainingPlanText(const TrainOptions& options) {
  FSDP_ASSIGN_OR_RETURN(proto::ShardPlan plan, TrainingPlan(options));
  return plan::ShardPlanToText(plan);
}

namespace {

// The checkpoint a run starts from ("" for none) and its --exact exponents
// (rank 0's manifest's ExactState, serialized), as every rank agreed.
struct StartChoice {
  std::string path;
  std::string exact_state;
};

// Rank 0 chooses the checkpoint and checks that it fits the run; every rank
// learns the choice. Before the trainer is built: a run that loads a
// checkpoint does not draw initial weights it would overwrite.
absl::StatusOr<StartChoice> ChooseStart(const TrainOptions& options, comm::Communicator& world,
                                        std::FILE* log, const RunSummary& summary) {
  if (!options.resume && options.resume_from.empty()) return StartChoice{};
  const bool exact = options.sharding.precision.reduction == ReductionKind::kExact;
  std::string path;
  std::string exact_state;  // rank 0's manifest's ExactState, serialized
  absl::Status chosen = absl::OkStatus();
  if (world.rank() == 0) {
    chosen = [&]() -> absl::Status {
      std::vector<std::string> notes;
      if (!options.handover_dir.empty() && options.restart > 0) {
        // What the last attempt's survivors left in memory, as a checkpoint.
        const absl::Time start = absl::Now();
        FSDP_ASSIGN_OR_RETURN(std::string assembled,
                              checkpoint::AssembleHandover(options.handover_dir, &notes));
        if (!assembled.empty() && log != nullptr) {
          std::fprintf(log,
                       "train_gpt: the survivors' memory copies assembled into %s in %.0f ms\n",
                       assembled.c_str(), absl::ToDoubleMilliseconds(absl::Now() - start));
        }
      }
      FSDP_ASSIGN_OR_RETURN(checkpoint::ResumeChoice choice,
                            checkpoint::ChooseResumeCheckpoint(options));
      notes.insert(notes.end(), choice.notes.begin(), choice.notes.end());
      if (!choice.path.empty()) {
        FSDP_ASSIGN_OR_RETURN(proto::CheckpointManifest manifest,
                              checkpoint::ReadManifest(choice.path));
        FSDP_RETURN_IF_ERROR(checkpoint::CheckResumeFitsRun(manifest, options, &notes));
        // Another backend rounds differently: the run goes on, but not with
        // the bits of one that never stopped.
        if (!manifest.matmul().empty() && manifest.matmul() != summary.MatmulRecord()) {
          notes.push_back(absl::StrCat("the checkpoint was computed with matmul ",
                                       manifest.matmul(), "; this run computes with ",
                                       summary.MatmulRecord(),
                                       ", which rounds differently from here on"));
        }
        // --exact's exponents are state: without them the sums start over
        // (the first step computed twice) at other scales.
        if (exact && manifest.exact().exponents_size() == 0) {
          notes.push_back(
              "the checkpoint was saved without --exact: the exact sums start "
              "without exponents, so the bits are not those of an --exact run that "
              "never stopped");
        } else if (!exact && manifest.exact().exponents_size() > 0) {
          notes.push_back(
              "the checkpoint was saved with --exact; this run goes on without it "
              "and rounds differently from here on");
        }
        exact_state = manifest.exact().SerializeAsString();
      }
      for (const std::string& note : notes) {
        if (log != nullptr) std::fprintf(log, "train_gpt: note: %s\n", note.c_str());
      }
      path = choice.path;
      return absl::OkStatus();
    }();
  }
  FSDP_RETURN_IF_ERROR(AgreeOnStatus(world, chosen, options.comm_timeout, "resume choice"));
  FSDP_ASSIGN_OR_RETURN(std::vector<std::string> paths,
                        AllGatherBlobs(world, path, options.comm_timeout, "resume path"));
  if (paths[0].empty()) return StartChoice{};
  FSDP_ASSIGN_OR_RETURN(
      std::vector<std::string> exact_states,
      AllGatherBlobs(world, exact_state, options.comm_timeout, "resume exact exponents"));
  return StartChoice{paths[0], exact_states[0]};
}

// Every rank loads its part of the chosen checkpoint. Returns the steps
// already taken.
absl::StatusOr<int> StartFromCheckpoint(const StartChoice& choice, const TrainOptions& options,
                                        comm::Communicator& world, DataParallelTrainer& trainer,
                                        MemoryTracker& tracker, std::FILE* log,
                                        RunSummary& summary) {
  const std::string& path = choice.path;
  if (path.empty()) return 0;
  const bool exact = options.sharding.precision.reduction == ReductionKind::kExact;
  FSDP_ASSIGN_OR_RETURN(checkpoint::LoadStats loaded,
                        checkpoint::LoadCheckpoint(world, trainer, path, options.comm_timeout,
                                                   &tracker));
  proto::ExactState saved_exact;
  if (!saved_exact.ParseFromString(choice.exact_state)) {
    return absl::DataLossError(absl::StrCat(path, ": its manifest's exact exponents do not parse"));
  }
  if (exact && saved_exact.exponents_size() > 0) {
    FSDP_RETURN_IF_ERROR(trainer.SetExactExponents(std::vector<int>(
        saved_exact.exponents().begin(), saved_exact.exponents().end())));
  }
  summary.resumed_from = path;
  if (log != nullptr) {
    std::fprintf(log, "train_gpt: resumed from %s at step %lld (%s; %s read on rank 0 in %.0f ms)\n",
                 path.c_str(), static_cast<long long>(loaded.step),
                 loaded.same_plan ? "same plan" : "resharded from another plan",
                 FormatBytes(loaded.rank_bytes_read).c_str(),
                 absl::ToDoubleMilliseconds(loaded.time));
    std::fflush(log);
  }
  return static_cast<int>(loaded.step);
}

// Saves a checkpoint after the trainer's last step. A failed save that
// leaves the job intact is a warning while the run goes on (the previous
// checkpoint stays the newest), and an error when the run is about to end
// or a peer is gone.
// The run's part of a checkpoint's manifest after the trainer's last step:
// the options, the data position, the product backend and --exact's
// exponents.
proto::CheckpointManifest RunManifestNow(const TrainOptions& options, DataParallelTrainer& trainer,
                                         const RunSummary& summary) {
  proto::CheckpointManifest manifest = checkpoint::RunManifest(options, trainer.steps_taken());
  manifest.set_matmul(summary.MatmulRecord());
  for (int e : trainer.exact_exponents()) manifest.mutable_exact()->add_exponents(e);
  return manifest;
}

absl::Status SaveRunCheckpoint(const TrainOptions& options, comm::Communicator& world,
                               DataParallelTrainer& trainer, bool final_save, std::FILE* log,
                               RunSummary& summary) {
  checkpoint::SaveOptions save;
  save.dir = options.checkpoint_dir;
  save.keep = options.keep_checkpoints;
  save.timeout = options.comm_timeout;
  save.keep_alive = [&world] { world.KeepAlive(); };
  absl::StatusOr<checkpoint::SaveStats> saved =
      checkpoint::SaveCheckpoint(world, trainer, RunManifestNow(options, trainer, summary), save);
  if (!saved.ok()) {
    const bool job_broken = absl::IsUnavailable(saved.status()) ||
                            absl::IsDeadlineExceeded(saved.status());
    if (final_save || job_broken) return saved.status();
    if (log != nullptr) {
      std::fprintf(log, "train_gpt: warning: %s; training goes on\n",
                   std::string(saved.status().message()).c_str());
      std::fflush(log);
    }
    return absl::OkStatus();
  }
  summary.checkpoint_save_seconds.push_back(absl::ToDoubleSeconds(saved->total_time));
  summary.checkpoint_total_bytes = saved->total_bytes;
  summary.last_checkpoint = saved->path;
  if (log != nullptr) {
    std::fprintf(log,
                 "checkpoint: step %lld saved to %s (%s in %d shard files, %s on rank 0 written "
                 "in %.0f ms; stall %.0f ms)\n",
                 static_cast<long long>(saved->step), saved->path.c_str(),
                 FormatBytes(saved->total_bytes).c_str(),
                 trainer.plan().shard_group_size(), FormatBytes(saved->rank_bytes).c_str(),
                 absl::ToDoubleMilliseconds(saved->write_time),
                 absl::ToDoubleMilliseconds(saved->total_time));
    for (const std::string& pruned : saved->pruned) {
      std::fprintf(log, "checkpoint: removed %s (--keep_checkpoints=%d)\n", pruned.c_str(),
                   options.keep_checkpoints);
    }
    for (const std::string& warning : saved->warnings) {
      std::fprintf(log, "checkpoint: warning: %s\n", warning.c_str());
    }
    std::fflush(log);
  }
  return absl::OkStatus();
}

// Why the run stops after a step, agreed by every rank.
struct StopDecision {
  std::string reason;  // "" = it goes on
  int signal = 0;      // the signal that asked for it (the lowest rank's), if any
};

StopDecision AgreedStop(const TrainOptions& options, const std::vector<uint64_t>& signals,
                        int step) {
  if (options.exit_after_steps > 0 && step == options.exit_after_steps) {
    return {absl::StrCat("--exit_after_steps=", options.exit_after_steps), 0};
  }
  for (uint64_t signal_number : signals) {
    if (signal_number != 0) {
      return {absl::StrCat("signal ", signal_number, " (",
                           strsignal(static_cast<int>(signal_number)), ")"),
              static_cast<int>(signal_number)};
    }
  }
  return {};
}

// `always`: all-gather even without a stop signal (the memory snapshots'
// commit, [Note: two generations] in memory_snapshots.h).
absl::StatusOr<StopDecision> AgreeOnStop(const TrainOptions& options, comm::Communicator& world,
                                         const std::atomic<int>* stop_signal, int step,
                                         bool always) {
  std::vector<uint64_t> signals;
  if (stop_signal != nullptr || always) {
    FSDP_ASSIGN_OR_RETURN(
        signals,
        AllGatherU64(world, static_cast<uint64_t>(stop_signal != nullptr ? stop_signal->load() : 0),
                     options.comm_timeout, "stop-signal check"));
  }
  return AgreedStop(options, signals, step);
}

// How often the progress line shows the gradient noise scale.
constexpr int kNoiseScaleEvery = 10;

// A resumed or restarted run adds to the metrics file: the earlier
// attempts' lines are its history.
bool ContinuesEarlierRun(const TrainOptions& options) {
  return options.resume || !options.resume_from.empty() || options.restart > 0;
}

// This process's minor page faults so far (the kernel mapping a fresh page,
// clearing it first): a steady-state step that reuses its buffers has none.
int64_t MinorPageFaults() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return usage.ru_minflt;
}

// A sample between marker lines (the launcher prefixes each line with the
// rank, so multi-line text stays readable).
void PrintSample(std::FILE* log, int step, const std::string& how, const std::string& text) {
  if (log == nullptr) return;
  std::fprintf(log, "---- sample after step %d (%s) ----\n%s\n---- end of sample ----\n", step,
               how.c_str(), text.c_str());
  std::fflush(log);
}

}  // namespace

namespace {

// Everything one rank's run holds between its phases (RunTraining: set up,
// the steps, the end). Not movable: the trainer and the model point at the
// tracker.
struct TrainingRun {
  TrainingRun(const TrainOptions& options, comm::Communicator& world, std::FILE* log)
      : options(options), world(world), log(log), tracker(options.mem_budget_bytes) {}
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  const TrainOptions& options;
  comm::Communicator& world;
  std::FILE* log;  // null on ranks that do not report
  MemoryTracker tracker;
  StartChoice start;  // the checkpoint the run loads, chosen before the trainer is built
  std::unique_ptr<Model> model;
  std::unique_ptr<DataParallelTrainer> trainer;
  std::unique_ptr<RankBatches> batches;
  std::optional<LrSchedule> schedule;
  std::unique_ptr<MetricsWriter> metrics;  // rank 0 with --metrics_out
  std::unique_ptr<TextMonitor> text;
  RunSummary summary;
  int last_step = 0;
  // The first step pays for warm-up (page faults, thread start); rates are
  // reported over the rest.
  absl::Duration timed_step_time;
  absl::Duration timed_comm_wait;
  int64_t timed_tokens = 0;
  double timed_matmul_s = 0;
  absl::Duration timed_optimizer;
  double timed_matmul_flops = 0;
  // The gradient noise scale from every step's two squared norms
  // ([Note: noise scale] in fsdp/train/train_step.cc).
  GradientNoiseScale noise;
  // Stragglers: this rank's phases summed over the current window, and the
  // ranks' windows compared (options.straggler_every > 0, several ranks).
  RunHooks hooks;
  std::optional<StragglerDetector> stragglers;
  RankPhases window;
  int window_steps = 0;
  // --buddy_every: the state's copies in memory, and what keeping them cost.
  std::unique_ptr<checkpoint::MemorySnapshots> snapshots;
  int snapshots_taken = 0;
  absl::Duration snapshot_time;
};

// What one step measured, for its progress line and metrics.
struct StepRecord {
  int step = 0;
  StepResult result;
  MatmulStats matmul;
  int64_t page_faults = 0;
  int64_t peak_bytes = 0;
  bool validated = false;  // summary.final_val_loss is this step's
  std::optional<double> noise_scale;  // the smoothed gradient noise scale so far
  absl::Duration data_time;           // fetching the batches (and after_batches)
  std::optional<Straggler> straggler;  // named by the window this step closed
};

// The engine, the model, the trainer, the data and the schedule; the metrics
// file opened and the run's header printed. No step taken, nothing loaded.
absl::StatusOr<std::unique_ptr<TrainingRun>> BuildRun(const TrainOptions& options,
                                                      comm::Communicator& world, std::FILE* log,
                                                      const RunHooks& hooks) {
  FSDP_RETURN_IF_ERROR(ValidateTrainOptions(options));
  if (world.size() != options.nproc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this job has ", world.size(), " ranks but --nproc=", options.nproc,
        "; launch with the same --nproc as the job's world size (under srun or mpirun leave "
        "--nproc out: the engine's task count is the world size)"));
  }
  // --exact: one thread per product (docs/exact.md, "Products").
  const bool exact = options.sharding.precision.reduction == ReductionKind::kExact;
  const int threads = ResolvedComputeThreads(options);
  FSDP_RETURN_IF_ERROR(SetComputeThreads(threads));
  FSDP_ASSIGN_OR_RETURN(ComputeBackendChoice backend,
                        SelectMatmulBackend(options.matmul_backend, world, options.comm_timeout));
  auto run = std::make_unique<TrainingRun>(options, world, log);
  RunSummary& summary = run->summary;
  summary.matmul_backend = MatmulBackendName(backend.backend);
  summary.matmul_kernels = backend.kernels;
  if (log != nullptr) {
    std::fprintf(log, "train_gpt: matmul backend %s\n", backend.Description().c_str());
    const std::string why = exact                 ? "--exact: one thread per product"
                            : options.threads > 0 ? "--threads"
                                                  : "default: " + DefaultComputeThreadsReason();
    std::fprintf(log, "train_gpt: %d compute thread%s per rank (%s)\n", threads,
                 threads == 1 ? "" : "s", why.c_str());
    std::fflush(log);  // before the model is built: a crash there should not swallow it
  }

  FSDP_ASSIGN_OR_RETURN(run->start, ChooseStart(options, world, log, summary));
  FSDP_ASSIGN_OR_RETURN(const ModelFactory* factory, FindModel(options.model));
  FSDP_ASSIGN_OR_RETURN(run->model, factory->create(options, &run->tracker));
  if (hooks.wrap_model) run->model = hooks.wrap_model(std::move(run->model));
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<UnitOptimizer> optimizer,
                        MakeUnitOptimizer(options.optimizer, options.weight_decay));
  TrainStepOptions step_options = TrainStepOptionsFrom(options);
  // A checkpoint (or --init_from's weights) overwrites every parameter:
  // drawing them first (the whole model, on every rank) would only slow the
  // start.
  step_options.init_params = run->start.path.empty() && options.init_from.empty();
  FSDP_ASSIGN_OR_RETURN(run->trainer,
                        DataParallelTrainer::Create(run->model.get(), &world, &run->tracker,
                                                    std::move(optimizer), step_options));
  FSDP_ASSIGN_OR_RETURN(run->batches, RankBatches::Create(options, world.rank()));
  if (options.buddy_every > 0 && !options.handover_dir.empty()) {
    FSDP_ASSIGN_OR_RETURN(run->snapshots,
                          checkpoint::MemorySnapshots::Create(world, *run->trainer, &run->tracker,
                                                              options.comm_timeout));
    if (log != nullptr) {
      std::fprintf(log,
                   "train_gpt: memory snapshots every %d step%s: %s on rank 0 (its shard%s, two "
                   "generations); after a failure the survivors hand them to the next attempt\n",
                   options.buddy_every, options.buddy_every == 1 ? "" : "s",
                   FormatBytes(run->snapshots->bytes()).c_str(),
                   run->snapshots->buddy_copies() ? " and a buddy copy of the last rank's"
                                                  : "; replicas hold the second copy");
    }
  }

  LrScheduleOptions schedule_options;
  schedule_options.base_lr = options.lr;
  schedule_options.min_lr = options.min_lr;
  // A --steps=0 run (load and export) takes no step: any valid schedule.
  schedule_options.total_steps = std::max(options.steps, 1);
  schedule_options.warmup_steps =
      std::min<int64_t>(options.warmup_steps, schedule_options.total_steps);
  schedule_options.decay = options.lr_decay;
  schedule_options.linear_scaling = options.lr_reference_batch > 0;
  schedule_options.global_batch = options.global_batch();
  schedule_options.reference_batch = std::max<int64_t>(options.lr_reference_batch, 1);
  FSDP_ASSIGN_OR_RETURN(run->schedule, LrSchedule::Create(schedule_options));

  if (world.rank() == 0 && !options.metrics_out.empty()) {
    FSDP_ASSIGN_OR_RETURN(run->metrics,
                          MetricsWriter::Open(options.metrics_out,
                                              ContinuesEarlierRun(options)
                                                  ? MetricsWriter::Mode::kContinue
                                                  : MetricsWriter::Mode::kNewRun));
  }
  summary.num_params = 0;
  for (const UnitSpec& unit : run->model->units()) summary.num_params += unit.numel();
  if (log != nullptr) {
    std::fprintf(log,
                 "train_gpt: %s\ntrain_gpt: %lld parameters in %d units (%d plan units, "
                 "%lld elements per rank per sharded state), %lld tokens/step\n",
                 TrainOptionsToString(options).c_str(),
                 static_cast<long long>(summary.num_params), run->model->num_units(),
                 run->trainer->num_units(),
                 static_cast<long long>(run->trainer->plan().total_shard_numel()),
                 static_cast<long long>(options.tokens_per_step()));
    std::fflush(log);
  }
  return run;
}

// Where the run starts: a checkpoint (--resume, --resume_from) or the
// weights of --init_from, the data stream at that step, and the held-out
// loss before the first step.
absl::Status StartRun(TrainingRun& run) {
  const TrainOptions& options = run.options;
  RunSummary& summary = run.summary;
  FSDP_ASSIGN_OR_RETURN(summary.start_step,
                        StartFromCheckpoint(run.start, options, run.world, *run.trainer,
                                            run.tracker, run.log, summary));
  run.last_step = summary.start_step;
  if (run.metrics != nullptr && ContinuesEarlierRun(options)) {
    FSDP_RETURN_IF_ERROR(run.metrics->WriteLine(ResumedMetricsJson(summary.start_step)));
  }
  if (!options.init_from.empty()) {
    FSDP_RETURN_IF_ERROR(checkpoint::InitFromSafetensors(run.world, *run.trainer,
                                                         options.init_from, options.comm_timeout));
    if (run.log != nullptr) {
      std::fprintf(run.log, "train_gpt: parameters from %s\n", options.init_from.c_str());
    }
  }
  run.batches->SeekToStep(summary.start_step);
  // Validation and samples (fsdp/run/text_monitor.h), between steps.
  FSDP_ASSIGN_OR_RETURN(run.text, TextMonitor::Create(options, run.world.rank(), &run.tracker));
  if (!run.text->ValDue(summary.start_step)) return absl::OkStatus();
  FSDP_ASSIGN_OR_RETURN(summary.first_val_loss, run.text->Validate(*run.trainer, run.world));
  summary.final_val_loss = summary.first_val_loss;
  if (run.log != nullptr) {
    std::fprintf(run.log, "step %4d/%d | val_loss %.6f (%lld held-out tokens)\n",
                 summary.start_step, options.steps, summary.first_val_loss,
                 static_cast<long long>(run.text->val_tokens()));
    std::fflush(run.log);
  }
  if (run.metrics != nullptr) {
    FSDP_RETURN_IF_ERROR(run.metrics->WriteLine(
        ValMetricsJson(summary.start_step, summary.start_step * options.tokens_per_step(),
                       summary.first_val_loss)));
  }
  return absl::OkStatus();
}

// --buddy_every: the state after `step` copied into memory (and to the next
// rank); committed by the all-gather that follows.
absl::Status TakeSnapshot(TrainingRun& run, int step) {
  const absl::Time start = absl::Now();
  FSDP_RETURN_IF_ERROR(run.snapshots->Take(
      step, RunManifestNow(run.options, *run.trainer, run.summary), run.options.comm_timeout));
  run.snapshot_time += absl::Now() - start;
  ++run.snapshots_taken;
  return absl::OkStatus();
}

// After a failure, or before stopping early: every generation of the
// memory snapshots this rank holds whole goes into the handover directory
// for the next attempt (fsdp/checkpoint/handover.h). Best effort: what one
// rank cannot write, another's copy may hold. One line per rank on stderr.
void HandOver(TrainingRun& run) {
  if (run.snapshots == nullptr || run.options.handover_dir.empty()) return;
  const absl::Time start = absl::Now();
  std::vector<checkpoint::SnapshotPiece> pieces = run.snapshots->CompletePieces();
  absl::StatusOr<int64_t> written =
      checkpoint::WriteHandover(run.options.handover_dir, run.world.rank(), pieces);
  std::string steps;
  for (const checkpoint::SnapshotPiece& piece : pieces) {
    absl::StrAppend(&steps, steps.empty() ? "" : ", ", piece.step, " (shard ", piece.shard_rank,
                    ")");
  }
  if (written.ok()) {
    std::fprintf(stderr, "train_gpt: handed over the memory copies of steps %s: %s in %.0f ms\n",
                 steps.empty() ? "(none yet)" : steps.c_str(), FormatBytes(*written).c_str(),
                 absl::ToDoubleMilliseconds(absl::Now() - start));
  } else {
    std::fprintf(stderr, "train_gpt: could not hand over the memory copies: %s\n",
                 std::string(written.status().message()).c_str());
  }
  std::fflush(stderr);
}

// One optimizer step on this step's batches, measured (time, products,
// page faults) and added to the run's rates.
absl::StatusOr<StepRecord> TakeStep(TrainingRun& run, int step) {
  StepRecord record;
  record.step = step;
  const absl::Time data_start = absl::Now();
  FSDP_ASSIGN_OR_RETURN(std::vector<Batch> micro_batches, run.batches->NextStep());
  if (run.hooks.after_batches) run.hooks.after_batches(step);
  record.data_time = absl::Now() - data_start;
  const float lr = run.schedule->At(step - 1);  // the schedule counts from 0
  ResetMatmulStats();
  const int64_t faults_before = MinorPageFaults();
  FSDP_ASSIGN_OR_RETURN(record.result, run.trainer->Step(micro_batches, lr));
  record.matmul = CurrentMatmulStats();
  record.page_faults = MinorPageFaults() - faults_before;
  record.peak_bytes = run.tracker.Snapshot().peak_total_bytes;

  const int start_step = run.summary.start_step;
  if (step == start_step + 1) run.summary.first_loss = record.result.loss;
  if (step > start_step + 1 || run.options.steps == start_step + 1) {
    run.timed_step_time += record.result.step_time;
    run.timed_comm_wait += record.result.comm_wait;
    run.timed_matmul_s += record.matmul.seconds;
    run.timed_optimizer += record.result.optimizer_time;
    run.timed_matmul_flops += record.matmul.flops;
    run.timed_tokens += record.result.global_tokens;
  }
  run.summary.final_loss = record.result.loss;
  if (record.result.noise_norms.small_batch > 0) {
    FSDP_RETURN_IF_ERROR(run.noise.Add(record.result.noise_norms));
  }
  record.noise_scale = run.noise.smoothed();
  return record;
}

// Adds the step's phases to the window; every options.straggler_every steps
// the ranks all-gather their window's mean phases (four doubles each) and
// the detector may name a straggler in `record`.
absl::Status ExchangePhases(TrainingRun& run, StepRecord& record) {
  if (!run.stragglers.has_value()) return absl::OkStatus();
  const StepResult& result = record.result;
  run.window.data_s += absl::ToDoubleSeconds(record.data_time);
  run.window.comm_wait_s += absl::ToDoubleSeconds(result.comm_wait);
  run.window.optimizer_s += absl::ToDoubleSeconds(result.optimizer_time);
  run.window.compute_s +=
      absl::ToDoubleSeconds(result.step_time - result.comm_wait - result.optimizer_time);
  run.window.unit_compute_s.resize(result.unit_compute.size(), 0.0);
  for (size_t u = 0; u < result.unit_compute.size(); ++u) {
    run.window.unit_compute_s[u] += absl::ToDoubleSeconds(result.unit_compute[u]);
  }
  if (++run.window_steps < run.options.straggler_every) return absl::OkStatus();
  // Per step: compute, data, comm wait, optimizer, then each unit's compute.
  std::vector<double> mine = {run.window.compute_s, run.window.data_s, run.window.comm_wait_s,
                              run.window.optimizer_s};
  mine.insert(mine.end(), run.window.unit_compute_s.begin(), run.window.unit_compute_s.end());
  for (double& seconds : mine) seconds /= run.window_steps;
  run.window = RankPhases();
  run.window_steps = 0;
  const size_t bytes = mine.size() * sizeof(double);
  FSDP_ASSIGN_OR_RETURN(
      std::vector<std::string> blobs,
      AllGatherBlobs(run.world, absl::string_view(reinterpret_cast<const char*>(mine.data()), bytes),
                     run.options.comm_timeout, "straggler phase exchange"));
  std::vector<RankPhases> per_rank(blobs.size());
  for (size_t r = 0; r < blobs.size(); ++r) {
    if (blobs[r].size() != bytes) {
      return absl::InternalError(absl::StrCat("straggler phase exchange: rank ", r, " sent ",
                                              blobs[r].size(), " bytes, expected ", bytes));
    }
    std::vector<double> theirs(mine.size());
    std::memcpy(theirs.data(), blobs[r].data(), bytes);
    per_rank[r] = RankPhases{theirs[0], theirs[1], theirs[2], theirs[3],
                             std::vector<double>(theirs.begin() + 4, theirs.end())};
  }
  record.straggler = run.stragglers->AddWindow(per_rank);
  return absl::OkStatus();
}

// The plan unit's name ("block2"), or "" for none.
std::string UnitName(const TrainingRun& run, int unit) {
  const proto::ShardPlan& plan = run.trainer->plan();
  return unit >= 0 && unit < plan.units_size() ? plan.units(unit).name() : "";
}

// " | straggler rank 2 (data, 1.45x the fastest, 1.30x its best)", or
// "(compute in unit 3 (block2), ...)", or "".
std::string StragglerNote(const TrainingRun& run, const std::optional<Straggler>& straggler) {
  if (!straggler.has_value()) return "";
  const std::string where =
      straggler->unit >= 0
          ? absl::StrCat(straggler->phase, " in unit ", straggler->unit, " (",
                         UnitName(run, straggler->unit), ")")
          : straggler->phase;
  return absl::StrFormat(" | straggler rank %d (%s, %.2fx the fastest, %.2fx its best)",
                         straggler->rank, where, straggler->vs_fastest, straggler->vs_own_best);
}

// The step's progress line (rank 0) and metrics line.
absl::Status ReportStep(TrainingRun& run, const StepRecord& record) {
  const StepResult& result = record.result;
  const double seconds = absl::ToDoubleSeconds(result.step_time);
  const double tokens_per_s = seconds > 0 ? result.global_tokens / seconds : 0.0;
  const bool noise_due = record.noise_scale.has_value() &&
                         (record.step % kNoiseScaleEvery == 0 || record.step == run.options.steps);
  if (run.log != nullptr) {
    std::fprintf(run.log,
                 "step %4d/%d | loss %.6f | lr %.3e | %9.0f tok/s | peak %s/rank | "
                 "comm wait %.1f ms (%.0f%%) | matmul %.0f%% at %.0f GFLOP/s | %lld page "
                 "faults%s%s%s%s\n",
                 record.step, run.options.steps, result.loss, result.lr, tokens_per_s,
                 FormatBytes(record.peak_bytes).c_str(),
                 absl::ToDoubleMilliseconds(result.comm_wait),
                 seconds > 0 ? 100.0 * absl::ToDoubleSeconds(result.comm_wait) / seconds : 0.0,
                 seconds > 0 ? 100.0 * record.matmul.seconds / seconds : 0.0,
                 record.matmul.seconds > 0 ? record.matmul.flops / record.matmul.seconds / 1e9
                                           : 0.0,
                 static_cast<long long>(record.page_faults),
                 record.validated
                     ? absl::StrFormat(" | val_loss %.6f", run.summary.final_val_loss).c_str()
                     : "",
                 noise_due ? absl::StrFormat(" | noise scale %.0f seq (batch %d)",
                                             *record.noise_scale, result.noise_norms.big_batch)
                                 .c_str()
                           : "",
                 StragglerNote(run, record.straggler).c_str(),
                 result.passes > 1 ? " | computed twice (exact sums overflowed)" : "");
    std::fflush(run.log);
  }
  if (run.metrics == nullptr) return absl::OkStatus();
  StepMetrics m;
  m.step = record.step;
  m.loss = result.loss;
  m.lr = result.lr;
  m.tokens_per_s = tokens_per_s;
  m.peak_bytes = record.peak_bytes;
  m.comm_wait_s = absl::ToDoubleSeconds(result.comm_wait);
  m.matmul_s = record.matmul.seconds;
  m.matmul_flops = record.matmul.flops;
  m.page_faults = record.page_faults;
  m.tokens = record.step * run.options.tokens_per_step();
  m.has_val_loss = record.validated;
  m.val_loss = run.summary.final_val_loss;
  m.has_noise_scale = record.noise_scale.has_value();
  m.noise_scale = record.noise_scale.value_or(0.0);
  m.noise_batch = result.noise_norms.big_batch;
  if (record.straggler.has_value()) {
    m.has_straggler = true;
    m.straggler_rank = record.straggler->rank;
    m.straggler_phase = record.straggler->phase;
    m.straggler_vs_fastest = record.straggler->vs_fastest;
    m.straggler_vs_own_best = record.straggler->vs_own_best;
    m.straggler_unit = UnitName(run, record.straggler->unit);
  }
  return run.metrics->WriteLine(StepMetricsJson(m));
}

// The steps after the start, each: step, validate, report, sample, agree on
// stopping, checkpoint. Returns after --steps, or after the step every rank
// agreed to stop at.
absl::Status RunSteps(TrainingRun& run, const std::atomic<int>* stop_signal) {
  const TrainOptions& options = run.options;
  RunSummary& summary = run.summary;
  for (int step = summary.start_step + 1; step <= options.steps; ++step) {
    FSDP_ASSIGN_OR_RETURN(StepRecord record, TakeStep(run, step));
    FSDP_RETURN_IF_ERROR(ExchangePhases(run, record));
    record.validated = run.text->ValDue(step);
    if (record.validated) {
      FSDP_ASSIGN_OR_RETURN(summary.final_val_loss, run.text->Validate(*run.trainer, run.world));
    }
    FSDP_RETURN_IF_ERROR(ReportStep(run, record));
    run.last_step = step;
    if (run.text->SampleDue(step)) {
      FSDP_ASSIGN_OR_RETURN(summary.last_sample, run.text->Sample(*run.trainer));
      PrintSample(run.log, step, run.text->SampleDescription(), summary.last_sample);
    }

    const bool snapshot_due = run.snapshots != nullptr && step % options.buddy_every == 0;
    if (snapshot_due) FSDP_RETURN_IF_ERROR(TakeSnapshot(run, step));
    FSDP_ASSIGN_OR_RETURN(StopDecision stop, AgreeOnStop(options, run.world, stop_signal, step,
                                                         /*always=*/snapshot_due));
    if (snapshot_due) run.snapshots->Commit();
    summary.stop_reason = stop.reason;
    summary.stop_signal = stop.signal;
    if (!stop.reason.empty() && step < options.steps && run.snapshots != nullptr) {
      // Stopping early (a slot came back, SIGTERM): the next attempt goes on
      // from this step's copies in memory.
      if (run.snapshots->committed_step() != step) {
        FSDP_RETURN_IF_ERROR(TakeSnapshot(run, step));
        FSDP_RETURN_IF_ERROR(
            AllGatherU64(run.world, 0, options.comm_timeout, "memory snapshot commit").status());
        run.snapshots->Commit();
      }
      HandOver(run);
    }
    const bool stopping = !summary.stop_reason.empty() || step == options.steps;
    if (!options.checkpoint_dir.empty() &&
        (stopping || (options.checkpoint_every > 0 && step % options.checkpoint_every == 0))) {
      FSDP_RETURN_IF_ERROR(
          SaveRunCheckpoint(options, run.world, *run.trainer, stopping, run.log, summary));
    }
    if (!summary.stop_reason.empty()) break;
  }
  return absl::OkStatus();
}

// The parameters' digest, and --export written on rank 0, from one pass over
// the gathered units (one unit at a time, tracked, never the whole model).
absl::Status DigestAndExport(TrainingRun& run) {
  const TrainOptions& options = run.options;
  ParamDigest digest;
  std::unique_ptr<checkpoint::SafetensorsWriter> exporter;
  absl::Status exported = absl::OkStatus();
  if (!options.export_path.empty() && run.world.rank() == 0) {
    absl::StatusOr<std::unique_ptr<checkpoint::SafetensorsWriter>> created =
        checkpoint::SafetensorsWriter::Create(
            options.export_path,
            checkpoint::ExportSpecs(checkpoint::ModelTensors(run.trainer->plan())),
            checkpoint::ExportMetadata(checkpoint::RunManifest(options, run.last_step).model()));
    if (created.ok()) {
      exporter = std::move(*created);
    } else {
      exported = created.status();
    }
  }
  FSDP_RETURN_IF_ERROR(run.trainer->ForEachGatheredUnit(
      [&](const proto::UnitPlan& unit, absl::Span<const float> params) {
        digest.Update(params);
        if (exporter != nullptr && exported.ok()) {
          exported = checkpoint::AppendUnit(*exporter, unit, params);
        }
        return absl::OkStatus();
      }));
  if (exporter != nullptr && exported.ok()) exported = exporter->Finish();
  if (exporter != nullptr && exported.ok()) {
    exported = WriteHfConfigBeside(options, options.export_path);
  }
  if (!options.export_path.empty()) {
    FSDP_RETURN_IF_ERROR(AgreeOnStatus(run.world, exported, options.comm_timeout, "export"));
    if (run.log != nullptr) {
      std::fprintf(run.log, "train_gpt: exported the model after step %d to %s\n", run.last_step,
                   options.export_path.c_str());
    }
  }
  run.summary.param_sha256 = digest.HexDigest();
  return absl::OkStatus();
}

// After the last step: why it stopped, the summary (memory, rates, digest,
// export), the final metrics and "done" lines, the last sample and the plot.
absl::Status FinishRun(TrainingRun& run) {
  const TrainOptions& options = run.options;
  RunSummary& summary = run.summary;
  std::FILE* log = run.log;
  if (log != nullptr && !summary.stop_reason.empty()) {
    std::fprintf(
        log, "train_gpt: stopped after step %d of %d (%s)%s\n", run.last_step, options.steps,
        summary.stop_reason.c_str(),
        !summary.last_checkpoint.empty()
            ? absl::StrCat("; continue with --resume --checkpoint_dir=", options.checkpoint_dir)
                  .c_str()
        : run.snapshots != nullptr ? "; its state is in memory for the job's next attempt"
                                   : "; no --checkpoint_dir, nothing saved");
    std::fflush(log);
  }

  summary.steps = run.last_step;
  summary.memory = run.tracker.Snapshot();
  summary.peak_gathered_param_numel = run.trainer->peak_gathered_param_numel();
  summary.peak_unsharded_grad_numel = run.trainer->peak_unsharded_grad_numel();
  summary.plan_fingerprint = run.trainer->plan().fingerprint();
  FSDP_RETURN_IF_ERROR(DigestAndExport(run));
  const double timed_seconds = absl::ToDoubleSeconds(run.timed_step_time);
  summary.tokens_per_s = timed_seconds > 0 ? run.timed_tokens / timed_seconds : 0.0;
  summary.comm_wait_share =
      timed_seconds > 0 ? absl::ToDoubleSeconds(run.timed_comm_wait) / timed_seconds : 0.0;
  summary.matmul_share = timed_seconds > 0 ? run.timed_matmul_s / timed_seconds : 0.0;
  summary.matmul_gflops =
      run.timed_matmul_s > 0 ? run.timed_matmul_flops / run.timed_matmul_s / 1e9 : 0.0;
  summary.peak_bytes = summary.memory.peak_total_bytes;
  summary.noise_scale = run.noise.run_mean();
  if (run.metrics != nullptr) {
    FinalMetrics f;
    f.steps = summary.steps;
    f.loss = summary.final_loss;
    f.param_sha256 = summary.param_sha256;
    f.world_size = run.world.size();
    f.strategy = StrategyName(options.sharding.strategy);
    f.tokens_per_s = summary.tokens_per_s;
    f.comm_wait_share = summary.comm_wait_share;
    f.matmul_share = summary.matmul_share;
    f.matmul_gflops = summary.matmul_gflops;
    f.optimizer_share =
        timed_seconds > 0 ? absl::ToDoubleSeconds(run.timed_optimizer) / timed_seconds : 0.0;
    f.compute_threads = ComputeThreads();
    f.peak_bytes = summary.peak_bytes;
    f.matmul_backend = summary.matmul_backend;
    f.matmul_kernels = summary.matmul_kernels;
    if (summary.noise_scale.has_value()) {
      f.has_noise_scale = true;
      f.noise_scale = summary.noise_scale->scale;
      f.noise_scale_stderr = summary.noise_scale->standard_error;
      f.noise_steps = summary.noise_scale->steps;
      f.noise_batch = options.global_batch();
    }
    if (run.stragglers.has_value()) f.rank_skew = run.stragglers->SkewLines();
    FSDP_RETURN_IF_ERROR(run.metrics->WriteLine(FinalMetricsJson(f)));
  }
  if (log != nullptr) {
    const std::string no_noise_reason = NoNoiseScaleReason(run.world.size(), options.accum);
    if (summary.noise_scale.has_value()) {
      std::fprintf(log,
                   "train_gpt: gradient noise scale %.0f +- %.0f sequences (mean of %lld steps "
                   "at global batch %lld)\n",
                   summary.noise_scale->scale, summary.noise_scale->standard_error,
                   static_cast<long long>(summary.noise_scale->steps),
                   static_cast<long long>(options.global_batch()));
    } else {
      std::fprintf(log, "train_gpt: %s\n",
                   no_noise_reason.empty()
                       ? "no gradient noise scale yet: the gradient's true norm is still "
                         "below the noise (train longer)"
                       : no_noise_reason.c_str());
    }
    std::fprintf(log,
                 "train_gpt: done, %d steps, loss %.4f -> %.4f, %.0f tok/s, comm wait %.1f%% "
                 "of step time, matmul %s %.1f%% at %.0f GFLOP/s, peak %s/rank, params sha256 %s\n",
                 summary.steps, summary.first_loss, summary.final_loss, summary.tokens_per_s,
                 100.0 * summary.comm_wait_share, summary.matmul_backend.c_str(),
                 100.0 * summary.matmul_share, summary.matmul_gflops,
                 FormatBytes(summary.peak_bytes).c_str(),
                 summary.param_sha256.c_str());
    if (run.snapshots_taken > 0) {
      std::fprintf(log,
                   "train_gpt: memory snapshots: %d taken, %.1f ms each on rank 0 (the last: "
                   "copy %.1f ms, buddy shift %.1f ms)\n",
                   run.snapshots_taken,
                   absl::ToDoubleMilliseconds(run.snapshot_time) / run.snapshots_taken,
                   absl::ToDoubleMilliseconds(run.snapshots->last_copy_time()),
                   absl::ToDoubleMilliseconds(run.snapshots->last_shift_time()));
    }
    if (run.stragglers.has_value() && run.stragglers->windows() > 0) {
      std::fprintf(log, "train_gpt: per-rank skew over %d windows of %d steps:\n",
                   run.stragglers->windows(), options.straggler_every);
      for (const std::string& line : run.stragglers->SkewLines()) {
        std::fprintf(log, "train_gpt:   %s\n", line.c_str());
      }
    }
    std::fflush(log);
  }
  if (run.text->samples_at_end()) {
    FSDP_ASSIGN_OR_RETURN(summary.last_sample, run.text->Sample(*run.trainer));
    PrintSample(log, run.last_step, run.text->SampleDescription(), summary.last_sample);
  }
  if (!options.plot.empty() && run.metrics != nullptr) {
    run.metrics.reset();  // flushed and closed
    FSDP_ASSIGN_OR_RETURN(MetricsRun metrics_run,
                          ReadMetricsFile(options.metrics_out,
                                          StrategyName(options.sharding.strategy)));
    FSDP_RETURN_IF_ERROR(PlotMetrics({metrics_run}, options.plot, absl::Seconds(120)));
    if (log != nullptr) {
      std::fprintf(log, "train_gpt: plotted %s to %s (gnuplot script %s.gp)\n",
                   options.metrics_out.c_str(), options.plot.c_str(), options.plot.c_str());
      std::fflush(log);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunSummary> RunTraining(const TrainOptions& options, comm::Communicator& world,
                                       std::FILE* log, const std::atomic<int>* stop_signal,
                                       const RunHooks& hooks) {
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<TrainingRun> run, BuildRun(options, world, log, hooks));
  run->hooks = hooks;
  if (options.straggler_every > 0 && world.size() > 1) {
    StragglerOptions straggler_options;
    straggler_options.threshold = options.straggler_threshold;
    run->stragglers.emplace(world.size(), straggler_options);
  }
  FSDP_RETURN_IF_ERROR(StartRun(*run));
  if (absl::Status ran = RunSteps(*run, stop_signal); !ran.ok()) {
    HandOver(*run);
    return ran;
  }
  FSDP_RETURN_IF_ERROR(FinishRun(*run));
  return std::move(run->summary);
}

}  // namespace fsdp
