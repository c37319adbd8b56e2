// File: fsdp/run/train_options.cc
#include "fsdp/run/train_options.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/matmul.h"

namespace fsdp {
namespace {

absl::Status Positive(const char* flag, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " must be a positive integer"));
}

}  // namespace

absl::Status ValidateGroupSize(Strategy strategy, int group_size, int nproc) {
  if (strategy != Strategy::kHybridShard) {
    if (group_size == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "--group_size=", group_size, " only applies to --strategy=hybrid_shard (got --strategy=",
        StrategyName(strategy), "); drop --group_size or use hybrid_shard"));
  }
  std::string divisors;
  for (int g = 1; g <= nproc; ++g) {
    if (nproc % g == 0) absl::StrAppend(&divisors, divisors.empty() ? "" : ", ", g);
  }
  if (group_size < 1 || group_size > nproc || nproc % group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy=hybrid_shard needs --group_size (ranks per shard group) dividing --nproc=",
        nproc, " into equal groups; got --group_size=", group_size, "; valid: ", divisors));
  }
  return absl::OkStatus();
}

const char* OptimizerKindName(OptimizerKind kind) {
  return kind == OptimizerKind::kAdamW ? "adamw" : "sgd";
}

const char* AttentionName(Attention attention) {
  return attention == Attention::kFlash ? "flash" : "standard";
}

absl::StatusOr<Attention> ParseAttention(absl::string_view name) {
  if (name == "standard") return Attention::kStandard;
  if (name == "flash") return Attention::kFlash;
  return absl::InvalidArgumentError(absl::StrCat(
      "--attention=", name,
      " is not one of standard (saves B H T T probabilities), flash (memory-efficient)"));
}

absl::Status ValidateTrainOptions(const TrainOptions& o) {
  FSDP_RETURN_IF_ERROR(Positive("nproc", o.nproc));
  FSDP_RETURN_IF_ERROR(CheckStrategyAvailable(o.sharding.strategy));
  FSDP_RETURN_IF_ERROR(ValidateGroupSize(o.sharding.strategy, o.sharding.group_size, o.nproc));
  if (o.sharding.prefetch_depth < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prefetch_depth=", o.sharding.prefetch_depth,
        " must not be negative (0 disables prefetch)"));
  }
  if (o.sharding.max_gathers_in_flight < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_gathers_in_flight=", o.sharding.max_gathers_in_flight,
        " must be at least 1 (the unit about to compute needs its own all-gather)"));
  }
  if (o.sharding.min_unit_numel < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_unit_numel=", o.sharding.min_unit_numel,
        " must not be negative (0 disables merging)"));
  }
  FSDP_RETURN_IF_ERROR(Positive("layers", o.layers));
  FSDP_RETURN_IF_ERROR(Positive("d_model", o.d_model));
  FSDP_RETURN_IF_ERROR(Positive("heads", o.heads));
  FSDP_RETURN_IF_ERROR(Positive("vocab", o.vocab));
  FSDP_RETURN_IF_ERROR(Positive("seq_len", o.seq_len));
  FSDP_RETURN_IF_ERROR(Positive("micro_batch", o.micro_batch));
  FSDP_RETURN_IF_ERROR(Positive("accum", o.accum));
  if (o.steps < 0 || (o.steps == 0 && o.init_from.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--steps=", o.steps, " must be positive (0 only with --init_from: load, then export)"));
  }
  if (o.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--threads=", o.threads, " must not be negative (0 = pick from the core count)"));
  }
  FSDP_RETURN_IF_ERROR(ValidatePrecisionPolicy(o.sharding.precision));
  if (o.sharding.precision.reduction == ReductionKind::kExact) {
    // docs/exact.md, "Products": a product's bits depend on its thread count
    // and its library, so both are fixed.
    if (o.threads > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--threads=", o.threads, " with --exact: exact mode computes every product on one "
          "thread (its bits change with the thread count); drop --threads"));
    }
    if (o.matmul_backend == MatmulBackendChoice::kAuto) {
      return absl::InvalidArgumentError(
          "--matmul_backend=auto with --exact: a timed choice can change the bits between runs; "
          "use the default, onednn or openblas");
    }
  }
  FSDP_RETURN_IF_ERROR(ValidateActivationCheckpointing(o.activation_checkpointing, o.layers));
  if (o.d_model % o.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--heads=", o.heads, " does not divide --d_model=", o.d_model,
        "; each head needs d_model / heads channels, so pick heads that divide d_model"));
  }
  if (!(o.lr > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("--lr=", o.lr, " must be positive"));
  }
  if (!(o.min_lr >= 0.0f && o.min_lr <= o.lr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_lr=", o.min_lr, " must lie in [0, --lr=", o.lr, "]"));
  }
  if (o.lr_reference_batch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lr_reference_batch=", o.lr_reference_batch,
        " must not be negative (0 turns the linear scaling rule off)"));
  }
  if (o.warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--warmup_steps=", o.warmup_steps, " must not be negative"));
  }
  if (o.warmup_steps > o.steps && o.steps > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--warmup_steps=", o.warmup_steps, " exceeds --steps=", o.steps,
        "; the warmup must end within the run"));
  }
  if (!(o.weight_decay >= 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--weight_decay=", o.weight_decay, " must not be negative"));
  }
  if (!(o.grad_clip >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grad_clip=", o.grad_clip, " must not be negative (0 turns clipping off)"));
  }
  if (o.comm_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the collective timeout must be positive");
  }
  if (o.checkpoint_every < 0 || o.keep_checkpoints < 0 || o.exit_after_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every=", o.checkpoint_every, ", --keep_checkpoints=", o.keep_checkpoints,
        " and --exit_after_steps=", o.exit_after_steps, " must not be negative (0 = off)"));
  }
  if (o.straggler_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler_every=", o.straggler_every, " must not be negative (0 = off)"));
  }
  if (!(o.straggler_threshold > 0) || !std::isfinite(o.straggler_threshold)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler_threshold=", o.straggler_threshold,
        " must be a positive fraction (0.2: a rank 20% busier than the fastest is named)"));
  }
  if (o.max_restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_restarts=", o.max_restarts, " must not be negative"));
  }
  if (o.buddy_every < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--buddy_every=", o.buddy_every, " must not be negative (0 = off)"));
  }
  // A restart may also continue from the copies in memory.
  const bool restart_has_state = !o.checkpoint_dir.empty() || o.buddy_every > 0;
  if (o.checkpoint_dir.empty() &&
      (o.checkpoint_every > 0 || (o.resume && o.handover_dir.empty()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.resume ? "--resume" : "--checkpoint_every",
                     " needs --checkpoint_dir (where checkpoints are saved and found)"));
  }
  if (o.buddy_every > 0 && o.max_restarts == 0 && o.min_nproc == 0) {
    return absl::InvalidArgumentError(
        "--buddy_every keeps copies of the state in memory for the job's next attempt: it "
        "needs --max_restarts or --min_nproc (the built-in launcher keeps them between "
        "attempts)");
  }
  if (!restart_has_state && o.max_restarts > 0) {
    return absl::InvalidArgumentError(
        "--max_restarts needs --checkpoint_dir (where checkpoints are saved and found) or "
        "--buddy_every (copies of the state in memory)");
  }
  if (o.resume && !o.resume_from.empty()) {
    return absl::InvalidArgumentError(
        "--resume and --resume_from conflict: --resume takes the newest checkpoint in "
        "--checkpoint_dir, --resume_from names one; pass one of them");
  }
  if (!o.init_from.empty() && (o.resume || !o.resume_from.empty())) {
    return absl::InvalidArgumentError(
        "--init_from conflicts with --resume/--resume_from: --init_from starts a new run from "
        "weights, a resume continues a checkpoint's run (with its optimizer state); pass one");
  }
  if (o.exit_after_steps > o.steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--exit_after_steps=", o.exit_after_steps, " is beyond the schedule's --steps=", o.steps,
        "; it must stop the run before its end"));
  }
  if (!o.data.empty()) {
    std::FILE* file = std::fopen(o.data.c_str(), "rb");
    if (file == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data='", o.data, "' cannot be opened; pass an llm.c .bin token file, or omit "
          "--data for the synthetic stream"));
    }
    std::fclose(file);
  }
  return absl::OkStatus();
}

absl::Status SetMicroBatchFromGlobalBatch(int64_t global_batch, TrainOptions& o) {
  FSDP_RETURN_IF_ERROR(Positive("global_batch", global_batch));
  FSDP_RETURN_IF_ERROR(Positive("nproc", o.nproc));
  FSDP_RETURN_IF_ERROR(Positive("accum", o.accum));
  const int64_t per_micro_step = int64_t{o.nproc} * o.accum;
  if (global_batch % per_micro_step != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global_batch=", global_batch, " sequences do not split across --nproc=", o.nproc,
        " ranks x --accum=", o.accum, " micro-batches; use a multiple of ", per_micro_step,
        " (e.g. ", (global_batch / per_micro_step + 1) * per_micro_step,
        ") or change --nproc/--accum"));
  }
  o.micro_batch = static_cast<int>(global_batch / per_micro_step);
  return absl::OkStatus();
}

bool TrainOptions::bf16_grads() const {
  return sharding.precision.reduce_dtype == comm::Dtype::kBFloat16;
}

std::string TrainOptionsToString(const TrainOptions& o) {
  // Another family than the default names itself and its own shape.
  const std::string family =
      o.model == TrainOptions().model
          ? std::string()
          : absl::StrFormat(" model=%s kv_heads=%d ffn_hidden=%d ffn_multiple_of=%d "
                            "rope_theta=%g norm_eps=%g tie_embeddings=%d",
                            o.model, o.kv_heads, o.ffn_hidden, o.ffn_multiple_of, o.rope_theta,
                            o.norm_eps, o.tie_embeddings ? 1 : 0);
  return absl::StrFormat(
      "strategy=%s nproc=%d layers=%d d_model=%d heads=%d vocab=%d seq_len=%d "
      "micro_batch=%d accum=%d global_batch=%d steps=%d optimizer=%s lr=%g min_lr=%g "
      "warmup_steps=%d weight_decay=%g grad_clip=%g seed=%d threads=%d matmul_backend=%s "
      "data=%s group_size=%d "
      "prefetch_depth=%d max_gathers_in_flight=%d precision=%s "
      "reduce_dtype=%s activation_checkpointing=%s attention=%s min_unit_numel=%d%s",
      StrategyName(o.sharding.strategy), o.nproc, o.layers, o.d_model, o.heads, o.vocab, o.seq_len,
      o.micro_batch, o.accum, o.global_batch(), o.steps, OptimizerKindName(o.optimizer), o.lr,
      o.min_lr, o.warmup_steps, o.weight_decay, o.grad_clip, o.seed, o.threads,
      MatmulBackendChoiceName(o.matmul_backend),
      o.data.empty() ? "synthetic" : o.data, o.sharding.group_size, o.sharding.prefetch_depth,
      o.sharding.max_gathers_in_flight, comm::DtypeName(o.sharding.precision.param_dtype),
      comm::DtypeName(o.sharding.precision.reduce_dtype),
      ActivationCheckpointingName(o.activation_checkpointing), AttentionName(o.attention),
      o.sharding.min_unit_numel,
      o.checkpoint_dir.empty()
          ? ""
          : absl::StrCat(" checkpoint_dir=", o.checkpoint_dir,
                         " checkpoint_every=", o.checkpoint_every,
                         " keep_checkpoints=", o.keep_checkpoints)) +
         family;
}

int ResolvedComputeThreads(const TrainOptions& options) {
  if (options.sharding.precision.reduction == ReductionKind::kExact) return 1;
  // A launching parent (no LOCAL_WORLD_SIZE) speaks for its nproc local ranks.
  return options.threads > 0 ? options.threads : DefaultComputeThreadsOfLocalRanks(options.nproc);
}

}  // namespace fsdp
