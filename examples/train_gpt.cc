// File: examples/train_gpt.cc
//
// Trains a small GPT with data parallelism on N local ranks, with any
// sharding strategy (docs/sharding.md):
//
//   bazel run -c opt //examples:train_gpt -- --nproc=2 --steps=60
//   bazel run -c opt //examples:train_gpt -- --nproc=4 --strategy=full_shard
//   bazel run -c opt //examples:train_gpt -- --nproc=4 --strategy=hybrid_shard --group_size=2
//   bazel run -c opt //examples:train_gpt -- --nproc=4 --strategy=full_shard --dump_plan
//
// Without a launcher around it, the process validates its flags and then
// re-launches itself as --nproc ranks (comm/launcher/launcher.h); each rank
// joins the job from its environment and runs fsdp::RunTraining
// (fsdp/run/train_run.h). Flags, output and the metrics file:
// docs/train_gpt.md.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/launcher/crash_trace.h"
#include "comm/launcher/elastic.h"
#include "comm/launcher/launcher.h"
#include "comm/launcher/restarts.h"
#include "comm/rendezvous/job_env.h"
#include "fsdp/checkpoint/checkpoint.h"
#include "fsdp/checkpoint/checkpoint_reader.h"
#include "fsdp/checkpoint/handover.h"
#include "fsdp/checkpoint/model_export.h"
#include "fsdp/checkpoint/safetensors.h"
#include "fsdp/nn/model.h"
#include "fsdp/plan/strategy.h"
#include "fsdp/report/budget.h"
#include "fsdp/report/byte_size.h"
#include "fsdp/run/elastic_world.h"
#include "fsdp/run/model_registry.h"
#include "fsdp/run/rank_batches.h"
#include "fsdp/run/run_checkpoint.h"
#include "fsdp/run/text_monitor.h"
#include "fsdp/run/train_options.h"
#include "fsdp/run/train_run.h"

namespace {
const fsdp::TrainOptions kDefaults;
}  // namespace

ABSL_FLAG(int, nproc, 0,
          "ranks to launch on this machine (0 = 2); under srun or mpirun leave it out: the "
          "engine's task count is the world size");
ABSL_FLAG(std::string, strategy, "no_shard",
          "no_shard, shard_optimizer (ZeRO-1), shard_grad_op (ZeRO-2), full_shard (ZeRO-3), "
          "hybrid_shard (full_shard within --group_size ranks, replicated across groups)");
ABSL_FLAG(int, group_size, 0,
          "hybrid_shard only: ranks per shard group (consecutive ranks); must divide --nproc");
ABSL_FLAG(int, prefetch_depth, kDefaults.sharding.prefetch_depth,
          "units whose parameter all-gather starts ahead of the unit computing; 0 = none");
ABSL_FLAG(int, max_gathers_in_flight, kDefaults.sharding.max_gathers_in_flight,
          "most parameter all-gathers outstanding at once (>= 1)");
ABSL_FLAG(bool, mixed_precision, false,
          "an alias of --precision=bf16 (it once meant fp32 buffers with bf16 collectives, "
          "which the bf16 layout replaced)");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32, or bf16: bf16 parameters (all-gathered in bf16) and matrix products with "
          "fp32 accumulation, fp32 master and optimizer state; gradients per --reduce_dtype");
ABSL_FLAG(std::string, reduce_dtype, "",
          "gradients under --precision=bf16: bf16 (the default: 2-byte gradients, reduced in "
          "bf16 with fp32 additions) or fp32 (4-byte gradients reduced in fp32)");
ABSL_FLAG(bool, exact, false,
          "the same bits at any world size and split of the global batch: gradients as exact "
          "int64 sums of per-sequence contributions, every product over one sequence on one "
          "thread (docs/exact.md; its cost is there)");
ABSL_FLAG(int64_t, min_unit_numel, 0,
          "merge consecutive model units into plan units of at least this many elements; "
          "0 = one plan unit per model unit");
ABSL_FLAG(bool, dump_plan, false,
          "print the shard plan (text protobuf) for these flags and exit without training");
ABSL_FLAG(std::string, model, kDefaults.model,
          "model family: gpt (GPT-2 style) or llama (RMSNorm, rotary positions, SwiGLU, "
          "grouped-query attention; docs/model.md)");
ABSL_FLAG(int, layers, kDefaults.layers, "transformer blocks");
ABSL_FLAG(int, d_model, kDefaults.d_model, "model width (channels)");
ABSL_FLAG(int, heads, kDefaults.heads, "attention heads; must divide d_model");
ABSL_FLAG(int, vocab, kDefaults.vocab, "vocabulary size");
ABSL_FLAG(int, seq_len, kDefaults.seq_len, "tokens per sequence");
ABSL_FLAG(int, kv_heads, kDefaults.kv_heads,
          "llama: key/value heads (grouped-query attention), dividing --heads; 0 = --heads");
ABSL_FLAG(int, ffn_hidden, kDefaults.ffn_hidden,
          "llama: SwiGLU width; 0 = 8/3 d_model rounded up to a multiple of --ffn_multiple_of");
ABSL_FLAG(int, ffn_multiple_of, kDefaults.ffn_multiple_of,
          "llama: the multiple --ffn_hidden=0 rounds up to");
ABSL_FLAG(double, rope_theta, kDefaults.rope_theta,
          "llama: rotary base; 0 = 10000 (Llama 3 uses 500000)");
ABSL_FLAG(double, norm_eps, kDefaults.norm_eps, "llama: RMSNorm epsilon; 0 = 1e-5");
ABSL_FLAG(bool, tie_embeddings, kDefaults.tie_embeddings,
          "llama: the head reads the embedding's weight (lm_head = embed_tokens)");
ABSL_FLAG(int, micro_batch, kDefaults.micro_batch, "sequences per rank per micro-batch");
ABSL_FLAG(int, accum, kDefaults.accum, "micro-batches per optimizer step");
ABSL_FLAG(int64_t, global_batch, 0,
          "if > 0: sequences per optimizer step; sets micro_batch = global_batch / "
          "(nproc * accum), which must divide evenly");
ABSL_FLAG(int, steps, kDefaults.steps, "optimizer steps");
ABSL_FLAG(double, lr, kDefaults.lr, "peak learning rate");
ABSL_FLAG(double, min_lr, kDefaults.min_lr, "learning rate at the end of the decay");
ABSL_FLAG(std::string, lr_decay, "cosine", "after the warmup: cosine, linear or constant");
ABSL_FLAG(int64_t, lr_reference_batch, 0,
          "linear scaling rule: peak lr = --lr x global batch / this (sequences); 0 = off");
ABSL_FLAG(int, warmup_steps, kDefaults.warmup_steps, "linear warmup steps");
ABSL_FLAG(double, weight_decay, kDefaults.weight_decay, "decoupled weight decay");
ABSL_FLAG(double, grad_clip, kDefaults.grad_clip, "max global gradient L2 norm; 0 = off");
ABSL_FLAG(std::string, optimizer, "adamw", "adamw or sgd");
ABSL_FLAG(uint64_t, seed, kDefaults.seed, "parameter initialization seed");
ABSL_FLAG(std::string, activation_checkpointing,
          fsdp::ActivationCheckpointingName(kDefaults.activation_checkpointing),
          "none, all, or every:K: checkpointed blocks (0, K, 2K, ...) keep only their output "
          "in the forward and recompute the rest in their backward (docs/memory.md); results "
          "are bit-identical");
ABSL_FLAG(std::string, attention, fsdp::AttentionName(kDefaults.attention),
          "standard (saves the B H T T probabilities) or flash (blocked, saves one "
          "log-sum-exp per query row; equal to standard within rounding; either precision)");
ABSL_FLAG(std::string, matmul_backend, fsdp::MatmulBackendChoiceName(kDefaults.matmul_backend),
          "matrix products: default (oneDNN from AVX2 up, else OpenBLAS: a rule of the "
          "machine, the same bits every run), onednn, openblas, or auto (timed on rank 0: "
          "oneDNN unless OpenBLAS is >20% faster; the bits can change between runs)");
ABSL_FLAG(int, threads, kDefaults.threads,
          "compute threads per rank; 0 = hardware threads / ranks");
ABSL_FLAG(std::string, data, "",
          "llm.c .bin token file; empty = the synthetic Markov token stream");
ABSL_FLAG(std::string, metrics_out, "", "write one JSON line per step here (rank 0)");
ABSL_FLAG(int, comm_timeout_s, 120, "seconds any rank waits for a collective before failing");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "directory of sharded checkpoints (docs/checkpoints.md); one is saved after the last "
          "step, before an early stop, and every --checkpoint_every steps");
ABSL_FLAG(int, straggler_every, fsdp::TrainOptions().straggler_every,
          "every N steps the ranks compare their phase times and a rank consistently busier "
          "than the fastest is named (progress line, metrics); 0 = off");
ABSL_FLAG(double, straggler_threshold, fsdp::TrainOptions().straggler_threshold,
          "how much busier than the fastest rank (a fraction: 0.2 = 20%) a rank must be, two "
          "windows in a row, to be named a straggler");
ABSL_FLAG(int, checkpoint_every, 0, "save a checkpoint every N steps; 0 = none on a schedule");
ABSL_FLAG(int, keep_checkpoints, 0, "keep the newest K complete checkpoints; 0 = keep all");
ABSL_FLAG(bool, resume, false,
          "continue from the newest complete checkpoint in --checkpoint_dir (from step 0 if "
          "there is none); any world size and strategy");
ABSL_FLAG(std::string, resume_from, "", "continue from this checkpoint directory");
ABSL_FLAG(int, exit_after_steps, 0,
          "stop (saving a checkpoint first) once the schedule reaches this step; --steps still "
          "sets the schedule's length; 0 = run to --steps");
ABSL_FLAG(std::string, export, "",
          "write the consolidated fp32 model as FILE.safetensors when the run ends (rank 0, one "
          "unit at a time)");
ABSL_FLAG(std::string, init_from, "",
          "start from the weights of FILE.safetensors (any strategy and world size; a new run: "
          "step 0, zero optimizer state); with --steps=0 it only loads and exports");
ABSL_FLAG(int, max_restarts, 0,
          "when a rank dies or fails, stop every rank and run the job again, up to N times; each "
          "restart resumes from the newest complete checkpoint in --checkpoint_dir");
ABSL_FLAG(int, min_nproc, 0,
          "elastic job (docs/failures.md): when a rank fails, go on with the survivors down to "
          "this many ranks, from the newest checkpoint, with the same global batch re-split; "
          "0 = the world size is fixed");
ABSL_FLAG(int, max_nproc, 0,
          "elastic job: the largest world size; each `kill -USR1` to the launcher brings back "
          "one lost slot (the ranks stop at a step boundary and go on with it); 0 = --nproc");
ABSL_FLAG(int, buddy_every, 0,
          "with --min_nproc or --max_restarts: every N steps each rank copies its shard of the "
          "parameters and optimizer state into memory and to the next rank, and after a failure "
          "the survivors hand them to the next attempt, which goes on without reading a "
          "checkpoint (docs/failures.md); 0 = off");
ABSL_FLAG(int, hang_timeout_s, 20,
          "seconds a rank may be stopped, or compute without calling the communicator while "
          "others wait for it, before every rank fails naming it as hung; 0 = off "
          "(docs/comm-transport.md)");
ABSL_FLAG(std::string, mem_budget, "",
          "per-rank memory budget, e.g. 2GiB or 500MB: a configuration predicted not to fit is "
          "refused before any rank starts, and every rank's allocations are held to it");
ABSL_FLAG(std::string, val_data, "",
          "llm.c token file of held-out text (tokenize writes PREFIX_val.bin): validation loss "
          "before the first step, every --val_every steps and after the last");
ABSL_FLAG(int, val_every, kDefaults.val_every,
          "evaluate --val_data every N steps; 0 = at the "
          "start and the end only");
ABSL_FLAG(int, val_batches, kDefaults.val_batches,
          "global batches of held-out sequences per evaluation (same for any --nproc)");
ABSL_FLAG(int, sample_every, kDefaults.sample_every,
          "print --sample_tokens of text from the model every N steps (rank 0); 0 = none");
ABSL_FLAG(int, sample_tokens, kDefaults.sample_tokens,
          "tokens per sample; > 0 also prints one sample at the end of the run");
ABSL_FLAG(std::string, prompt, "", "text the samples continue; empty = a newline");
ABSL_FLAG(double, temperature, kDefaults.temperature, "sampling temperature; 0 = greedy");
ABSL_FLAG(int, top_k, kDefaults.top_k, "sample among the k most likely tokens; 0 = all");
ABSL_FLAG(uint64_t, sample_seed, kDefaults.sample_seed, "seed of the sampling draws");
ABSL_FLAG(std::string, tokenizer, "",
          "tokenizer file for decoding samples; empty = PREFIX.tokenizer beside a --data "
          "PREFIX_train.bin, else byte-level");
ABSL_FLAG(std::string, plot, "",
          "write the loss and throughput curves to FILE.png at the end (gnuplot; the metrics go "
          "to --metrics_out, default FILE.png.jsonl)");

namespace {

// --nproc belongs to the built-in launcher. Under an engine (srun, mpirun) the
// world size is the engine's: a rank started by it without --nproc takes
// SLURM_NTASKS / OMPI_COMM_WORLD_SIZE (a --nproc that differs is refused by
// RunTraining, naming both). The built-in launcher passes the argv it was given,
// so its ranks agree with it either way.
absl::StatusOr<int> NprocFromFlagOrEngine() {
  const int flag = absl::GetFlag(FLAGS_nproc);
  if (flag != 0) return flag;
  if (!comm::IsLaunchedRank()) return kDefaults.nproc;
  FSDP_ASSIGN_OR_RETURN(comm::JobEnv env, comm::JobEnvFromEnvironment());
  return env.world_size;
}

absl::StatusOr<fsdp::TrainOptions> OptionsFromFlags() {
  fsdp::TrainOptions o;
  FSDP_ASSIGN_OR_RETURN(o.nproc, NprocFromFlagOrEngine());
  FSDP_ASSIGN_OR_RETURN(o.sharding.strategy, fsdp::ParseStrategy(absl::GetFlag(FLAGS_strategy)));
  o.sharding.group_size = absl::GetFlag(FLAGS_group_size);
  o.sharding.prefetch_depth = absl::GetFlag(FLAGS_prefetch_depth);
  o.sharding.max_gathers_in_flight = absl::GetFlag(FLAGS_max_gathers_in_flight);
  std::string precision = absl::GetFlag(FLAGS_precision);
  if (absl::GetFlag(FLAGS_mixed_precision)) {
    if (!comm::IsLaunchedRank()) {
      std::fprintf(stderr,
                   "train_gpt: --mixed_precision is an alias of --precision=bf16 (bf16 "
                   "parameters and gradients, fp32 master and optimizer state)\n");
    }
    precision = "bf16";
  }
  FSDP_ASSIGN_OR_RETURN(o.sharding.precision,
                        fsdp::ParsePrecisionPolicy(precision, absl::GetFlag(FLAGS_reduce_dtype),
                                                   absl::GetFlag(FLAGS_exact)));
  FSDP_ASSIGN_OR_RETURN(o.attention, fsdp::ParseAttention(absl::GetFlag(FLAGS_attention)));
  o.sharding.min_unit_numel = absl::GetFlag(FLAGS_min_unit_numel);
  o.model = absl::GetFlag(FLAGS_model);
  o.layers = absl::GetFlag(FLAGS_layers);
  o.d_model = absl::GetFlag(FLAGS_d_model);
  o.heads = absl::GetFlag(FLAGS_heads);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.seq_len = absl::GetFlag(FLAGS_seq_len);
  o.kv_heads = absl::GetFlag(FLAGS_kv_heads);
  o.ffn_hidden = absl::GetFlag(FLAGS_ffn_hidden);
  o.ffn_multiple_of = absl::GetFlag(FLAGS_ffn_multiple_of);
  o.rope_theta = static_cast<float>(absl::GetFlag(FLAGS_rope_theta));
  o.norm_eps = static_cast<float>(absl::GetFlag(FLAGS_norm_eps));
  o.tie_embeddings = absl::GetFlag(FLAGS_tie_embeddings);
  FSDP_ASSIGN_OR_RETURN(
      o.activation_checkpointing,
      fsdp::ParseActivationCheckpointing(absl::GetFlag(FLAGS_activation_checkpointing), o.layers));
  o.micro_batch = absl::GetFlag(FLAGS_micro_batch);
  o.accum = absl::GetFlag(FLAGS_accum);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  o.min_lr = static_cast<float>(absl::GetFlag(FLAGS_min_lr));
  o.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  const std::string decay = absl::GetFlag(FLAGS_lr_decay);
  if (decay == "cosine") {
    o.lr_decay = fsdp::LrDecay::kCosine;
  } else if (decay == "linear") {
    o.lr_decay = fsdp::LrDecay::kLinear;
  } else if (decay == "constant") {
    o.lr_decay = fsdp::LrDecay::kConstant;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr_decay='", decay, "' is not one of: cosine, linear, constant"));
  }
  o.lr_reference_batch = absl::GetFlag(FLAGS_lr_reference_batch);
  o.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  o.grad_clip = static_cast<float>(absl::GetFlag(FLAGS_grad_clip));
  const std::string optimizer = absl::GetFlag(FLAGS_optimizer);
  if (optimizer == "adamw") {
    o.optimizer = fsdp::OptimizerKind::kAdamW;
  } else if (optimizer == "sgd") {
    o.optimizer = fsdp::OptimizerKind::kSgd;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer='", optimizer, "' is not one of: adamw, sgd"));
  }
  o.seed = absl::GetFlag(FLAGS_seed);
  o.threads = absl::GetFlag(FLAGS_threads);
  FSDP_ASSIGN_OR_RETURN(o.matmul_backend,
                        fsdp::ParseMatmulBackendChoice(absl::GetFlag(FLAGS_matmul_backend)));
  o.data = absl::GetFlag(FLAGS_data);
  o.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.straggler_every = absl::GetFlag(FLAGS_straggler_every);
  o.straggler_threshold = absl::GetFlag(FLAGS_straggler_threshold);
  o.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.resume_from = absl::GetFlag(FLAGS_resume_from);
  o.exit_after_steps = absl::GetFlag(FLAGS_exit_after_steps);
  o.export_path = absl::GetFlag(FLAGS_export);
  o.init_from = absl::GetFlag(FLAGS_init_from);
  o.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  o.buddy_every = absl::GetFlag(FLAGS_buddy_every);
  o.min_nproc = absl::GetFlag(FLAGS_min_nproc);
  o.max_nproc = absl::GetFlag(FLAGS_max_nproc);
  if (o.min_nproc < 0 || o.max_nproc < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_nproc=", o.min_nproc, " and --max_nproc=", o.max_nproc, " must not be negative"));
  }
  if (o.elastic() && o.max_nproc == 0) o.max_nproc = o.nproc;
  o.val_data = absl::GetFlag(FLAGS_val_data);
  o.val_every = absl::GetFlag(FLAGS_val_every);
  o.val_batches = absl::GetFlag(FLAGS_val_batches);
  o.sample_every = absl::GetFlag(FLAGS_sample_every);
  o.sample_tokens = absl::GetFlag(FLAGS_sample_tokens);
  o.prompt = absl::GetFlag(FLAGS_prompt);
  o.temperature = absl::GetFlag(FLAGS_temperature);
  o.top_k = absl::GetFlag(FLAGS_top_k);
  o.sample_seed = absl::GetFlag(FLAGS_sample_seed);
  o.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  o.plot = absl::GetFlag(FLAGS_plot);
  if (!o.plot.empty() && o.metrics_out.empty()) o.metrics_out = o.plot + ".jsonl";
  const int timeout_s = absl::GetFlag(FLAGS_comm_timeout_s);
  if (timeout_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--comm_timeout_s=", timeout_s, " must be positive"));
  }
  o.comm_timeout = absl::Seconds(timeout_s);
  const int64_t global_batch = absl::GetFlag(FLAGS_global_batch);
  if (global_batch != 0) FSDP_RETURN_IF_ERROR(fsdp::SetMicroBatchFromGlobalBatch(global_batch, o));
  FSDP_RETURN_IF_ERROR(fsdp::ValidateTrainOptions(o));
  FSDP_RETURN_IF_ERROR(fsdp::ValidateModelOptions(o));
  FSDP_RETURN_IF_ERROR(fsdp::ValidateTrainingData(o));
  FSDP_RETURN_IF_ERROR(fsdp::ValidateTextOptions(o));
  FSDP_RETURN_IF_ERROR(fsdp::ValidateElasticOptions(o));
  if (!comm::IsLaunchedRank()) {
    // The checkpoint a resume would take, checked once here rather than by
    // every rank (the ranks choose again: a save may land in between).
    FSDP_ASSIGN_OR_RETURN(fsdp::checkpoint::ResumeChoice choice,
                          fsdp::checkpoint::ChooseResumeCheckpoint(o));
    if (!o.init_from.empty()) {
      // One clear error for a file that does not fit, before any rank starts.
      FSDP_ASSIGN_OR_RETURN(std::unique_ptr<fsdp::checkpoint::SafetensorsReader> reader,
                            fsdp::checkpoint::SafetensorsReader::Open(o.init_from));
      FSDP_ASSIGN_OR_RETURN(fsdp::proto::ShardPlan plan, fsdp::TrainingPlan(o));
      // A config.json beside the file first: it names the flag to change.
      absl::Status fits = fsdp::CheckHfConfigBeside(o, o.init_from);
      if (fits.ok()) {
        fits = fsdp::checkpoint::CheckSafetensorsFitsModel(*reader,
                                                           fsdp::checkpoint::ModelTensors(plan));
      }
      if (!fits.ok())
        return absl::Status(fits.code(), absl::StrCat("--init_from: ", fits.message()));
    }
    if (!choice.path.empty()) {
      FSDP_ASSIGN_OR_RETURN(fsdp::proto::CheckpointManifest manifest,
                            fsdp::checkpoint::ReadManifest(choice.path));
      std::vector<std::string> notes;
      absl::Status fits = fsdp::checkpoint::CheckResumeFitsRun(manifest, o, &notes);
      if (!fits.ok()) {
        return absl::Status(fits.code(),
                            absl::StrCat("cannot resume from ", choice.path, ": ", fits.message()));
      }
    }
  }
  if (const std::string budget = absl::GetFlag(FLAGS_mem_budget); !budget.empty()) {
    FSDP_ASSIGN_OR_RETURN(o.mem_budget_bytes, fsdp::report::ParseByteSize(budget));
    FSDP_RETURN_IF_ERROR(fsdp::report::CheckTrainingFitsBudget(o, o.mem_budget_bytes));
    // An elastic job must fit at every size it may go on at (the fewer the
    // ranks, the larger each one's shards).
    for (int world = o.min_nproc; o.elastic() && world <= o.max_nproc; ++world) {
      FSDP_ASSIGN_OR_RETURN(fsdp::TrainOptions at, fsdp::OptionsForWorldSize(o, world));
      absl::Status fits = fsdp::report::CheckTrainingFitsBudget(at, o.mem_budget_bytes);
      if (!fits.ok()) {
        return absl::Status(fits.code(), absl::StrCat("at ", world,
                                                      " ranks (the elastic range "
                                                      "--min_nproc..--max_nproc): ",
                                                      fits.message()));
      }
    }
  }
  return o;
}

#ifdef FSDP_TRAIN_GPT_TEST_HOOKS
// Test hook, compiled only into //examples:train_gpt_test_hooks (a testonly
// build of this file) for tests/integration/train (mismatched plans): the
// rank named by this variable plans with --min_unit_numel one larger than the
// others, as if it had been given different flags. The shipped train_gpt
// reads no such variable.
constexpr char kPerturbPlanRankEnv[] = "TRAIN_GPT_TEST_PERTURB_PLAN_RANK";
// And for the straggler report: the rank named by the first variable sleeps
// the milliseconds of the second after fetching each step's batches (a slow
// data loader), so the others wait for it.
constexpr char kSlowDataRankEnv[] = "TRAIN_GPT_TEST_SLOW_DATA_RANK";
constexpr char kSlowDataMsEnv[] = "TRAIN_GPT_TEST_SLOW_DATA_MS";
// And "RANK:UNIT:MS": that rank's model sleeps MS milliseconds in each
// forward of model unit UNIT (slow compute in one unit).
constexpr char kSlowUnitEnv[] = "TRAIN_GPT_TEST_SLOW_UNIT";

// The model with one unit's forward slowed.
class SlowUnitModel : public fsdp::Model {
 public:
  SlowUnitModel(std::unique_ptr<fsdp::Model> inner, int unit, absl::Duration delay)
      : inner_(std::move(inner)), unit_(unit), delay_(delay) {}
  const std::vector<fsdp::UnitSpec>& units() const override { return inner_->units(); }
  void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const override {
    inner_->InitUnitParams(unit, params, seed);
  }
  comm::Dtype param_dtype() const override { return inner_->param_dtype(); }
  bool per_sequence_products() const override { return inner_->per_sequence_products(); }
  absl::Span<const float> sequence_losses() const override { return inner_->sequence_losses(); }
  absl::Status ForwardUnit(int unit, fsdp::ConstDtypeSpan params,
                           const fsdp::Batch& batch) override {
    if (unit == unit_) absl::SleepFor(delay_);
    return inner_->ForwardUnit(unit, params, batch);
  }
  float loss() const override { return inner_->loss(); }
  absl::Status BackwardUnit(int unit, fsdp::ConstDtypeSpan params, fsdp::UnitGrads grads,
                            float loss_scale, fsdp::GradWrite write) override {
    return inner_->BackwardUnit(unit, params, grads, loss_scale, write);
  }

 private:
  std::unique_ptr<fsdp::Model> inner_;
  int unit_;
  absl::Duration delay_;
};
#endif

// Set by SIGTERM / SIGINT in a rank: RunTraining saves a checkpoint at the
// next step boundary and returns (Slurm sends SIGTERM before a time limit or
// a preemption; the launcher forwards Ctrl-C as SIGTERM).
std::atomic<int> g_stop_signal{0};

void OnStopSignal(int signal_number) { g_stop_signal.store(signal_number); }

// An elastic job's ranks also stop so for SIGUSR1: the launcher's "a slot
// came back, stop for the job to grow" (comm/launcher/elastic.h).
void InstallStopSignalHandlers(bool elastic) {
  struct sigaction action = {};
  action.sa_handler = &OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  if (elastic) sigaction(SIGUSR1, &action, nullptr);
}

// A restarted job (comm/launcher/restarts.h) continues from its newest
// complete checkpoint, whatever the first attempt was started from.
absl::Status ContinueAfterRestart(int restart, fsdp::TrainOptions& options) {
  options.restart = restart;
  if (restart == 0 || (options.checkpoint_dir.empty() && options.handover_dir.empty())) {
    return absl::OkStatus();
  }
  options.resume = true;
  options.resume_from.clear();
  if (!options.init_from.empty()) {
    FSDP_ASSIGN_OR_RETURN(fsdp::checkpoint::ResumeChoice choice,
                          fsdp::checkpoint::ChooseResumeCheckpoint(options));
    if (choice.path.empty()) {
      options.resume = false;  // nothing saved yet: start from the weights again
    } else {
      options.init_from.clear();
    }
  }
  return absl::OkStatus();
}

// --hang_timeout_s as CommunicatorOptions::hang_timeout.
absl::StatusOr<absl::Duration> HangTimeoutFromFlag() {
  const int seconds = absl::GetFlag(FLAGS_hang_timeout_s);
  if (seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hang_timeout_s=", seconds, " must be >= 0 (0 turns it off)"));
  }
  return seconds == 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
}

// The rank's exit code: 0, or kResizeExitCode when it stopped for the
// launcher to grow the job.
absl::StatusOr<int> RunRank(fsdp::TrainOptions options) {
  comm::CommunicatorOptions comm_options;
  FSDP_ASSIGN_OR_RETURN(comm_options.hang_timeout, HangTimeoutFromFlag());
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment(comm_options));
#ifdef FSDP_TRAIN_GPT_TEST_HOOKS
  if (const char* perturb = std::getenv(kPerturbPlanRankEnv);
      perturb != nullptr && std::atoi(perturb) == world->rank()) {
    options.sharding.min_unit_numel += 1;
  }
#endif
  const int restart = comm::RestartCountFromEnvironment();
  if (const char* handover = std::getenv(fsdp::checkpoint::kHandoverDirEnv);
      handover != nullptr && options.buddy_every > 0) {
    options.handover_dir = handover;
  }
  FSDP_RETURN_IF_ERROR(ContinueAfterRestart(restart, options));
  if (options.elastic()) {
    FSDP_ASSIGN_OR_RETURN(options, fsdp::OptionsForWorldSize(options, world->size()));
    if (world->rank() == 0) {
      std::printf(
          "train_gpt: elastic job, attempt %d at %d ranks (--min_nproc=%d, "
          "--max_nproc=%d): global batch %lld = micro_batch %d x accum %d x %d ranks%s\n",
          restart, world->size(), options.min_nproc, options.max_nproc,
          static_cast<long long>(options.global_batch()), options.micro_batch, options.accum,
          world->size(), restart > 0 ? "; continuing from the newest checkpoint" : "");
      std::fflush(stdout);
    }
  } else if (restart > 0 && world->rank() == 0) {
    std::printf(
        "train_gpt: restart %d of at most %d: continuing from the newest checkpoint in %s\n",
        restart, options.max_restarts,
        options.checkpoint_dir.empty() ? "memory" : options.checkpoint_dir.c_str());
    std::fflush(stdout);
  }
  InstallStopSignalHandlers(options.elastic());
  fsdp::RunHooks hooks;
#ifdef FSDP_TRAIN_GPT_TEST_HOOKS
  if (const char* slow = std::getenv(kSlowDataRankEnv);
      slow != nullptr && std::atoi(slow) == world->rank()) {
    const char* ms = std::getenv(kSlowDataMsEnv);
    const absl::Duration delay = absl::Milliseconds(ms != nullptr ? std::atoi(ms) : 20);
    hooks.after_batches = [delay](int) { absl::SleepFor(delay); };
  }
  if (const char* slow = std::getenv(kSlowUnitEnv); slow != nullptr) {
    int rank = -1, unit = -1, ms = 0;
    if (std::sscanf(slow, "%d:%d:%d", &rank, &unit, &ms) == 3 && rank == world->rank()) {
      hooks.wrap_model = [unit, ms](std::unique_ptr<fsdp::Model> model) {
        return std::unique_ptr<fsdp::Model>(
            new SlowUnitModel(std::move(model), unit, absl::Milliseconds(ms)));
      };
    }
  }
#endif
  FSDP_ASSIGN_OR_RETURN(fsdp::RunSummary summary,
                        fsdp::RunTraining(options, *world, world->rank() == 0 ? stdout : nullptr,
                                          &g_stop_signal, hooks));
  if (options.elastic() && summary.stop_signal == SIGUSR1 && summary.steps < options.steps) {
    return comm::kResizeExitCode;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::SetProgramUsageMessage(
      "Trains a small GPT with data parallelism (any --strategy) on --nproc local ranks.\n"
      "Example: train_gpt --nproc=2 --strategy=full_shard --steps=60 --metrics_out=/tmp/m.jsonl");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<fsdp::TrainOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    // Validation happens in the launching parent, before any rank starts.
    std::fprintf(stderr, "train_gpt: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  if (absl::StatusOr<absl::Duration> hang = HangTimeoutFromFlag(); !hang.ok()) {
    std::fprintf(stderr, "train_gpt: %s\n", std::string(hang.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_dump_plan)) {
    absl::StatusOr<std::string> text = fsdp::TrainingPlanText(*options);
    if (!text.ok()) {
      std::fprintf(stderr, "train_gpt: %s\n", std::string(text.status().message()).c_str());
      return 2;
    }
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  if (!comm::IsLaunchedRank()) {
    comm::LaunchOptions launch = comm::SelfLaunchOptions(options->nproc, argc, argv);
    // After a SIGTERM or Ctrl-C the ranks finish their step and save a
    // checkpoint before they exit: give them the time (a second Ctrl-C
    // still stops them at once).
    launch.grace = std::max(launch.grace, options->comm_timeout);
    absl::StatusOr<int> result;
    if (options->elastic()) {
      comm::ElasticOptions elastic;
      elastic.min_nproc = options->min_nproc;
      elastic.max_nproc = options->max_nproc;
      elastic.max_restarts = options->max_restarts;
      result = comm::LaunchElastic(launch, elastic, stderr);
    } else {
      result = comm::LaunchWithRestarts(launch, options->max_restarts, stderr);
    }
    if (!result.ok()) {
      std::fprintf(stderr, "train_gpt: %s\n", std::string(result.status().message()).c_str());
    }
    return comm::JobExitCode(result);
  }
  absl::StatusOr<int> exit_code = RunRank(*options);
  if (!exit_code.ok()) {
    std::fprintf(stderr, "train_gpt: %s\n", std::string(exit_code.status().message()).c_str());
    return 1;
  }
  return *exit_code;
}
