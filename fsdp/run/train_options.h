// File: fsdp/run/train_options.h
//
// Everything a training run is configured by (the train_gpt flags), and its
// validation. The launching parent validates BEFORE any rank starts, so a bad
// flag is one clear error instead of N identical ones from N ranks.
//
//   TrainOptions options;            // defaults: the small GPT of train_gpt
//   options.nproc = 4;
//   FSDP_RETURN_IF_ERROR(ValidateTrainOptions(options));
//
// Batch arithmetic: global batch (sequences per optimizer step) =
// micro_batch * accum * nproc; see [Note: gradient scaling] in train_step.h.
#ifndef FSDP_RUN_TRAIN_OPTIONS_H_
#define FSDP_RUN_TRAIN_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fsdp/nn/activation_checkpointing.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/optim/lr_schedule.h"
#include "fsdp/plan/sharding_options.h"

namespace fsdp {

enum class OptimizerKind { kAdamW, kSgd };
const char* OptimizerKindName(OptimizerKind kind);  // "adamw", "sgd"

// --attention: the probabilities saved (standard) or recomputed blockwise
// from one log-sum-exp per query row (flash, memory-efficient).
enum class Attention { kStandard, kFlash };
const char* AttentionName(Attention attention);  // "standard", "flash"
// InvalidArgument naming the flag and the choices for anything else.
absl::StatusOr<Attention> ParseAttention(absl::string_view name);

struct TrainOptions {
  // The model family, by its name in the run's registry
  // (fsdp/run/model_registry.h): train_gpt's --model, "gpt" or "llama".
  std::string model = "gpt";
  // Job shape.
  int nproc = 2;
  // Sharding (docs/sharding.md; fsdp/plan/sharding_options.h), handed as
  // one value to the planner and the training step: --strategy,
  // --group_size (hybrid_shard's G, ranks per shard group, dividing nproc; 0
  // for the other strategies), --prefetch_depth, --max_gathers_in_flight,
  // --min_unit_numel, and the precision policy of --precision and
  // --reduce_dtype, parsed once by ParsePrecisionPolicy
  // (fsdp/plan/precision_policy.h) where the flags are read: --precision=fp32,
  // or bf16 (bf16 parameters and products with fp32 accumulation; fp32 master
  // and optimizer state; docs/compute.md); --reduce_dtype, the gradients under
  // bf16: bf16 (2-byte gradients, reduced in bf16 with fp32 additions; [Note:
  // bf16 gradients] in unit_state.h) or fp32.
  ShardingOptions sharding;
  // Activation memory (docs/memory.md): --activation_checkpointing, none,
  // all or every:K blocks checkpointed (recomputed in the backward; parsed
  // once by ParseActivationCheckpointing, fsdp/nn/activation_checkpointing.h), and
  // --attention, standard or flash (memory-efficient).
  ActivationCheckpointing activation_checkpointing;
  Attention attention = Attention::kStandard;
  // Model shape (the GPT of train_gpt: fsdp/models/gpt_config.h).
  int layers = 2;
  int d_model = 64;
  int heads = 4;
  int vocab = 64;
  int seq_len = 64;
  // The Llama family's shape (--model=llama, fsdp/models/llama.cc; the GPT
  // refuses them). 0 = the family's default: kv_heads = heads, ffn_hidden by
  // Llama's rule (8/3 d_model rounded up to a multiple of ffn_multiple_of),
  // rope_theta 10000, norm_eps 1e-5.
  int kv_heads = 0;
  int ffn_hidden = 0;
  int ffn_multiple_of = 256;
  float rope_theta = 0.0f;
  float norm_eps = 0.0f;
  bool tie_embeddings = false;
  // Batch: sequences per rank per micro-batch, micro-batches per step.
  int micro_batch = 8;
  int accum = 1;
  // Schedule and optimizer.
  int steps = 100;
  float lr = 3e-3f;           // peak learning rate
  int warmup_steps = 5;
  float min_lr = 3e-4f;       // floor of the decay
  LrDecay lr_decay = LrDecay::kCosine;
  // The linear scaling rule (Goyal et al. 2017): when > 0, the peak learning
  // rate is lr * global_batch / lr_reference_batch, reached by the warmup.
  int64_t lr_reference_batch = 0;
  float weight_decay = 0.0f;
  float grad_clip = 1.0f;     // global-norm clip; 0 = off
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  uint64_t seed = 42;
  // Compute threads per rank (matrix products and their libraries); 0 =
  // hardware threads / ranks on this machine.
  int threads = 0;
  // Matrix products (--matmul_backend, fsdp/run/compute_backend.h): default
  // (the machine's rule, never a timing), onednn, openblas, or auto (timed on
  // rank 0; the bits can change between runs).
  MatmulBackendChoice matmul_backend = MatmulBackendChoice::kDefault;
  // Data: an llm.c .bin token file, or "" for the synthetic Markov stream.
  std::string data;
  // Output: one JSON line per step, see fsdp/run/metrics_writer.h; "" = none.
  std::string metrics_out;
  // Bound on every wait for a collective.
  absl::Duration comm_timeout = absl::Seconds(120);
  // Per-rank memory budget for the MemoryTracker, 0 = none. Any allocation
  // that would exceed it fails with ResourceExhausted (category, requested,
  // in use, budget). train_gpt also checks the prediction against it before
  // any rank starts (fsdp/report/budget.h).
  int64_t mem_budget_bytes = 0;
  // Checkpoints (docs/checkpoints.md). checkpoint_dir "" = none. With a
  // directory, a checkpoint is saved every checkpoint_every steps (0: none
  // on a schedule), after the last step, and before stopping early.
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  int keep_checkpoints = 0;  // keep the newest K complete ones; 0 = all
  // Continue from the newest complete checkpoint in checkpoint_dir (from
  // step 0 if it has none), or from the checkpoint directory resume_from.
  bool resume = false;
  std::string resume_from;
  // Stragglers (fsdp/run/straggler_report.h): every straggler_every steps
  // the ranks exchange their phase times (0: never); a rank busier than the
  // fastest by more than straggler_threshold (a fraction) in two windows in a
  // row is named in the progress line and the metrics.
  int straggler_every = 10;
  double straggler_threshold = 0.2;
  // Stop, checkpointing first, once the schedule reaches this step; 0 = run
  // to `steps` (which still sets the schedule's length).
  int exit_after_steps = 0;
  // Safetensors (docs/checkpoints.md): write the consolidated fp32 model
  // here when the run ends (rank 0, one unit at a time); start from these
  // weights instead of the seed (a new run: step 0, zero optimizer state).
  // With init_from, steps may be 0: load, report the digest, export.
  std::string export_path;
  std::string init_from;
  // The launcher runs the whole job again up to this many times after a
  // rank fails; each restart resumes from the newest complete checkpoint
  // (so it needs checkpoint_dir).
  int max_restarts = 0;
  // Elastic world size (docs/failures.md; comm/launcher/elastic.h); 0 = a
  // fixed world. With min_nproc the job goes on at any size in [min_nproc,
  // max_nproc] after a rank's failure or a slot's return: the global batch
  // of nproc ranks re-split for the new size (fsdp/run/elastic_world.h), the
  // state carried over from the newest checkpoint.
  int min_nproc = 0;
  int max_nproc = 0;
  // Memory snapshots (fsdp/checkpoint/memory_snapshots.h): every
  // buddy_every steps each rank copies its shard into memory and, when it
  // is the shard's only holder, to the next rank; after a failure the
  // survivors hand the state to the next attempt through handover_dir (the
  // launcher's FSDP_HANDOVER_DIR, in /dev/shm; not a flag), so a restarted
  // or elastic job needs no checkpoint on disk. 0 = off.
  int buddy_every = 0;
  std::string handover_dir;
  // Which attempt of the job this is (the launcher's restart count, 0 for
  // the first); not a setting, so not printed. A restarted run, like a
  // resumed one, adds to --metrics_out instead of starting it anew.
  int restart = 0;
  // Text (docs/train_gpt.md; fsdp/run/text_monitor.h). val_data: an llm.c
  // token file of held-out text, evaluated (val_batches global batches)
  // before the first step, every val_every steps (0 = only then and at the
  // end) and after the last. sample_every: decode sample_tokens tokens
  // after every N steps (0 = none) on rank 0; with sample_tokens > 0 one
  // sample also ends the run. tokenizer: the tokenize example's file; ""
  // = PREFIX.tokenizer beside a --data PREFIX_train.bin, else byte-level.
  // plot: a PNG of the metrics curves written at the end (rank 0).
  std::string val_data;
  int val_every = 0;
  int val_batches = 8;
  int sample_every = 0;
  int sample_tokens = 0;
  std::string prompt;
  double temperature = 0.8;  // 0 = greedy
  int top_k = 40;            // 0 = whole vocabulary
  uint64_t sample_seed = 1;
  std::string tokenizer;
  std::string plot;

  bool elastic() const { return min_nproc > 0; }
  int64_t global_batch() const { return int64_t{micro_batch} * accum * nproc; }
  int64_t tokens_per_step() const { return global_batch() * seq_len; }
  // 2-byte gradients: --precision=bf16 unless --reduce_dtype=fp32.
  bool bf16_grads() const;
};

// OK, or InvalidArgument naming the flag, its value and what to do:
// every size positive, heads dividing d_model, lr positive, 0 <= min_lr <= lr,
// non-negative warmup, weight decay and clip, a group size that is 0 for
// every strategy but hybrid_shard and, for hybrid_shard, divides nproc (the
// message lists the sizes that do), prefetch_depth >= 0,
// max_gathers_in_flight >= 1, min_unit_numel >= 0, a readable --data file.
absl::Status ValidateTrainOptions(const TrainOptions& options);

// The compute threads a rank of this run uses: --threads, or 0's default
// (this process's CPUs over the ranks on the host: LOCAL_WORLD_SIZE, or
// --nproc in a process that will launch them, fsdp/nn/compute_threads.h);
// 1 under --exact (one thread per product, docs/exact.md).
int ResolvedComputeThreads(const TrainOptions& options);

// The --group_size rule alone (also used by ValidateTrainOptions): 0 for
// every strategy but hybrid_shard; for hybrid_shard 1..nproc dividing nproc.
absl::Status ValidateGroupSize(Strategy strategy, int group_size, int nproc);

// Sets micro_batch from a requested global batch: global_batch sequences per
// step split over nproc ranks and accum micro-batches each. InvalidArgument
// when it does not divide evenly, saying which sizes would.
absl::Status SetMicroBatchFromGlobalBatch(int64_t global_batch, TrainOptions& options);

// One line: "strategy=no_shard nproc=2 layers=2 d_model=64 ... global_batch=8".
std::string TrainOptionsToString(const TrainOptions& options);

}  // namespace fsdp

#endif  // FSDP_RUN_TRAIN_OPTIONS_H_
