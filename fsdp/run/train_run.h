// File: fsdp/run/train_run.h
//
// One rank's whole training run, as the train_gpt example and the benchmark
// drive it: build the GPT, the data stream for this rank, the optimizer and
// the DataParallelTrainer; run options.steps steps; report.
//
//   FSDP_ASSIGN_OR_RETURN(auto world, comm::Communicator::CreateFromEnvironment());
//   FSDP_ASSIGN_OR_RETURN(RunSummary summary,
//                         RunTraining(options, *world, world->rank() == 0 ? stdout : nullptr));
//
// Rank 0 prints one progress line per step to `log` and writes
// options.metrics_out (see fsdp/run/metrics_writer.h). Every rank computes
// the same loss (averaged across ranks) and ends with the same parameters.
#ifndef FSDP_RUN_TRAIN_RUN_H_
#define FSDP_RUN_TRAIN_RUN_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/model.h"
#include "fsdp/optim/gradient_noise_scale.h"
#include "fsdp/run/train_options.h"
#include "fsdp/train/train_step.h"

namespace fsdp {

struct RunSummary {
  int steps = 0;
  float first_loss = 0.0f;
  float final_loss = 0.0f;
  std::string param_sha256;   // fsdp/run/param_digest.h
  double tokens_per_s = 0.0;  // global tokens / wall time, steps after the first
  // The gradient noise scale over the run's steps (fsdp/optim/
  // gradient_noise_scale.h); nullopt with one rank and no accumulation, or
  // while the estimate of the true gradient's norm is not positive.
  std::optional<NoiseScaleValue> noise_scale;
  double comm_wait_share = 0.0;  // time blocked in collectives / step time, same steps
  double matmul_share = 0.0;     // time in matrix products / step time, same steps
  double matmul_gflops = 0.0;    // their achieved rate
  // The product backend every rank computed with ("onednn", "openblas") and
  // its kernels here (fsdp/run/compute_backend.h): the bits depend on both.
  std::string matmul_backend;
  std::string matmul_kernels;
  int64_t peak_bytes = 0;     // this rank's tracked peak
  int64_t num_params = 0;
  // This rank's tracker after the last step (current and peak per category),
  // taken before the parameter digest's transient gather.
  MemorySnapshot memory;
  // Largest gathered-parameter / unsharded-gradient working buffers held at
  // once, in elements (DataParallelTrainer::peak_*_numel).
  int64_t peak_gathered_param_numel = 0;
  int64_t peak_unsharded_grad_numel = 0;
  uint64_t plan_fingerprint = 0;
  // Checkpoints: the step the run started from (0, or the resumed
  // checkpoint's), each save's stall (the time every rank spent in
  // SaveCheckpoint), and why the run stopped before --steps, if it did.
  int start_step = 0;
  std::string resumed_from;
  std::vector<double> checkpoint_save_seconds;
  int64_t checkpoint_total_bytes = 0;  // of the last save, all ranks
  std::string last_checkpoint;
  std::string stop_reason;  // "" = ran to --steps
  int stop_signal = 0;      // the signal the ranks stopped for, if one did
  // --val_data: the held-out loss at the start and after the last
  // evaluation; --sample_tokens: the last sample, decoded.
  double first_val_loss = 0.0;
  double final_val_loss = 0.0;
  std::string last_sample;

  // "onednn (onednn 2.6.3: f32 brg:avx512_core, ...)": what a checkpoint
  // records of the backend.
  std::string MatmulRecord() const {
    return matmul_backend + " (" + matmul_kernels + ")";
  }
};

// The step options a TrainOptions asks for (strategy, accumulation, clip,
// seed, timeout and the sharding options).
TrainStepOptions TrainStepOptionsFrom(const TrainOptions& options);

// The shard plan RunTraining would use. No communication; the errors are
// the planner's.
absl::StatusOr<proto::ShardPlan> TrainingPlan(const TrainOptions& options);

// The shard plan RunTraining would use, as text protobuf (what train_gpt
// --dump_plan prints). No communication; the errors are the planner's.
absl::StatusOr<std::string> TrainingPlanText(const TrainOptions& options);

// Extension points of a run, each optional. after_batches(step) runs on the
// training thread right after the step's batches are fetched and is timed as
// part of the data phase (train_gpt's test build delays one rank there to
// test straggler reports, fsdp/run/straggler_report.h).
// wrap_model(model) returns the model the run trains: `model` itself or a
// decorator of it (the test build slows one unit's compute on one rank).
struct RunHooks {
  std::function<void(int step)> after_batches;
  std::function<std::unique_ptr<Model>(std::unique_ptr<Model>)> wrap_model;
};

// Runs options.steps optimizer steps on this rank, from step 0 or from a
// checkpoint (--resume, --resume_from), saving checkpoints as
// options.checkpoint_* ask. `log` may be null (no progress lines).
// world.size() must equal options.nproc.
//
// `stop_signal`, if given, is polled at every step boundary (a signal
// handler stores the signal's number there): once any rank sees it nonzero,
// every rank saves a checkpoint (with --checkpoint_dir) and returns after
// that step, as after --exit_after_steps. The ranks agree on it with one
// 8-byte all-gather per step.
absl::StatusOr<RunSummary> RunTraining(const TrainOptions& options, comm::Communicator& world,
                                       std::FILE* log,
                                       const std::atomic<int>* stop_signal = nullptr,
                                       const RunHooks& hooks = RunHooks());

}  // namespace fsdp

#endif  // FSDP_RUN_TRAIN_RUN_H_
