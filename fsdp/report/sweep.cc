// File: fsdp/report/sweep.cc
#include "fsdp/report/sweep.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "comm/dtype.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/report/gpt_family.h"
#include "fsdp/plan/strategy.h"

namespace fsdp {
namespace report {
namespace {

const std::vector<proto::ShardingStrategy> kAllStrategies = {
    proto::NO_SHARD, proto::SHARD_OPTIMIZER, proto::SHARD_GRAD_OP, proto::FULL_SHARD,
    proto::HYBRID_SHARD};

// The second plot's lines: none, every:2, all, flash, all+flash.
std::vector<ActivationMode> SeqLenSweepModes() {
  return {ActivationMode{0, false}, ActivationMode{2, false}, ActivationMode{1, false},
          ActivationMode{0, true}, ActivationMode{1, true}};
}

}  // namespace

absl::StatusOr<SweepOptions> SweepPreset(absl::string_view name) {
  SweepOptions sweep;
  sweep.name = std::string(name);
  sweep.strategies = kAllStrategies;
  sweep.precisions = {Precision::kFp32, Precision::kBf16, Precision::kMixed};
  if (name == "small") {
    sweep.widths = {32, 64};
    sweep.max_measured_width = 64;
    sweep.vocab = 256;
    sweep.seq_len = 32;
    sweep.micro_batch = 2;
    sweep.ranks = {1, 2, 4};
    sweep.steps = 2;
    sweep.seq_len_sweep.width = 32;
    sweep.seq_len_sweep.vocab = sweep.vocab;
    sweep.seq_len_sweep.seq_lens = {32, 64, 128, 256};
    sweep.seq_len_sweep.modes = SeqLenSweepModes();
    sweep.seq_len_sweep.max_measured_seq_len = 256;
    return sweep;
  }
  if (name == "full") {
    sweep.widths = {128, 192, 256, 384, 512, 640, 768, 1024, 1536, 2048, 3072, 4096};
    sweep.max_measured_width = 512;
    sweep.vocab = 2048;
    sweep.seq_len = 128;
    sweep.micro_batch = 2;
    sweep.ranks = {1, 2, 4, 8};
    sweep.steps = 2;
    // 4 blocks of width 128, as the quick start trains: a step at seq_len
    // 1024 takes a few seconds here, at 4096 a minute (predicted only).
    sweep.seq_len_sweep.width = 128;
    sweep.seq_len_sweep.vocab = sweep.vocab;
    sweep.seq_len_sweep.seq_lens = {128, 256, 512, 1024, 2048, 4096};
    sweep.seq_len_sweep.modes = SeqLenSweepModes();
    sweep.seq_len_sweep.max_measured_seq_len = 1024;
    return sweep;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown preset '", name, "'; use small (a few tiny points, seconds) or full "
                   "(1e6 to 2.6e10 parameters, a few minutes)"));
}

int SweepHybridGroupSize(int ranks) { return ranks >= 2 ? ranks / 2 : 1; }

std::vector<MemoryPoint> SweepPoints(const SweepOptions& sweep) {
  std::vector<MemoryPoint> points;
  for (Precision precision : sweep.precisions) {
    for (proto::ShardingStrategy strategy : sweep.strategies) {
      for (int ranks : sweep.ranks) {
        for (const ActivationMode& mode : sweep.modes) {
          for (int width : sweep.widths) {
            MemoryPoint point;
            point.config = GptFamilyConfig(width, sweep.vocab, sweep.seq_len);
            if (!ApplyActivationMode(mode, point.config).ok()) continue;
            point.micro_batch = sweep.micro_batch;
            point.strategy = strategy;
            point.ranks = ranks;
            point.group_size =
                strategy == proto::HYBRID_SHARD ? SweepHybridGroupSize(ranks) : 0;
            point.precision = precision;
            points.push_back(point);
          }
        }
      }
    }
  }
  return points;
}

std::vector<MemoryPoint> SeqLenSweepPoints(const SweepOptions& sweep) {
  const SeqLenSweep& s = sweep.seq_len_sweep;
  std::vector<MemoryPoint> points;
  if (s.width == 0) return points;
  for (const ActivationMode& mode : s.modes) {
    for (int seq_len : s.seq_lens) {
      MemoryPoint point;
      point.config = GptFamilyConfig(s.width, s.vocab, seq_len);
      if (!ApplyActivationMode(mode, point.config).ok()) continue;
      point.micro_batch = s.micro_batch;
      point.strategy = s.strategy;
      point.ranks = s.ranks;
      point.group_size = s.strategy == proto::HYBRID_SHARD ? SweepHybridGroupSize(s.ranks) : 0;
      point.precision = s.precision;
      points.push_back(point);
    }
  }
  return points;
}

absl::StatusOr<TrainOptions> TrainOptionsForPoint(const MemoryPoint& point, int steps) {
  // [Note: runtime precision] The runtime's --precision=bf16 (and its alias
  // --mixed_precision) is the ZeRO layout with 2-byte parameters and
  // gradients (Precision::kMixed), or with --reduce_dtype=fp32 2-byte
  // parameters and 4-byte gradients (Precision::kBf16).
  if (point.optimizer != plan::OptimizerKind::kAdam) {
    return absl::UnimplementedError("the report measures AdamW runs only");
  }
  TrainOptions options;
  options.nproc = point.ranks;
  FSDP_ASSIGN_OR_RETURN(options.sharding, ShardingOptionsOf(point));
  if (point.strategy != proto::HYBRID_SHARD) options.sharding.group_size = 0;
  const bool bf16_layout =
      point.precision == Precision::kBf16 || point.precision == Precision::kMixed;
  if (point.config.compute_dtype == comm::Dtype::kBFloat16 && !bf16_layout) {
    return absl::UnimplementedError(
        "the runtime computes in bf16 only in its bf16 layout: use precision bf16");
  }
  options.layers = point.config.layers;
  options.d_model = point.config.d_model;
  options.heads = point.config.heads;
  options.vocab = point.config.vocab;
  options.seq_len = point.config.seq_len;
  options.activation_checkpointing =
      ActivationCheckpointingOf(point.config.activation_checkpoint_every);
  options.attention = point.config.flash_attention ? Attention::kFlash : Attention::kStandard;
  options.micro_batch = point.micro_batch;
  options.accum = point.accum;
  // The point's threads, not the machine's default: each holds an attention
  // scratch (GptConfig::compute_threads) that the prediction counts.
  options.threads = point.config.compute_threads;
  options.steps = steps;
  options.warmup_steps = 0;
  options.optimizer = OptimizerKind::kAdamW;
  FSDP_RETURN_IF_ERROR(ValidateTrainOptions(options));
  return options;
}

std::string SweepDescription(const SweepOptions& sweep) {
  std::string modes;
  if (sweep.modes.size() != 1 || sweep.modes[0] != ActivationMode{}) {
    std::vector<std::string> names;
    for (const ActivationMode& mode : sweep.modes) names.push_back(ActivationModeName(mode));
    modes = absl::StrCat(" activations ", absl::StrJoin(names, ","));
  }
  return absl::StrCat(sweep.name, " sweep: GPT family vocab=", sweep.vocab,
                      " seq_len=", sweep.seq_len, " micro_batch=", sweep.micro_batch, modes, ", ",
                      sweep.steps, " training steps per measured point");
}

std::string SeqLenSweepDescription(const SweepOptions& sweep) {
  const SeqLenSweep& s = sweep.seq_len_sweep;
  const GptConfig model = GptFamilyConfig(s.width, s.vocab, 0);
  return absl::StrCat(sweep.name, " sequence-length sweep: GPT layers=", model.layers,
                      " d_model=", model.d_model, " heads=", model.heads, " vocab=", s.vocab,
                      " micro_batch=", s.micro_batch, ", ", plan::ShardingStrategyName(s.strategy),
                      " ", PrecisionName(s.precision), " on ", s.ranks, " ranks, ", sweep.steps,
                      " training steps per measured point");
}

}  // namespace report
}  // namespace fsdp
