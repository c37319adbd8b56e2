// File: fsdp/report/memory_estimate.cc
#include "fsdp/report/memory_estimate.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/plan/strategy.h"
#include "fsdp/report/step_schedule.h"

namespace fsdp {
namespace report {
namespace {

constexpr int64_t kFp32Bytes = 4;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int CheckpointEveryOf(const MemoryPoint& point) {
  return point.family == ModelFamily::kLlama ? point.llama.activation_checkpoint_every
                                             : point.config.activation_checkpoint_every;
}

bool FlashAttentionOf(const MemoryPoint& point) {
  return point.family == ModelFamily::kLlama ? point.llama.flash_attention
                                             : point.config.flash_attention;
}

}  // namespace

const char* ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kGpt:
      return "gpt";
    case ModelFamily::kLlama:
      return "llama";
  }
  return "unknown";
}

absl::StatusOr<ModelFamily> ParseModelFamily(absl::string_view name) {
  if (name == "gpt") return ModelFamily::kGpt;
  if (name == "llama") return ModelFamily::kLlama;
  return absl::InvalidArgumentError(
      absl::StrCat("model family '", name,
                   "' is not one of: gpt (GPT-2 style), llama (RMSNorm, rotary "
                   "positions, SwiGLU, grouped-query attention)"));
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kMixed:
      return "mixed";
    case Precision::kBf16:
      return "bf16";
  }
  return "unknown";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "mixed") return Precision::kMixed;
  if (name == "bf16_wire") {
    return absl::InvalidArgumentError(
        "precision 'bf16_wire' is gone: it was the runtime's old --mixed_precision (fp32 "
        "buffers, bf16 collectives), which is now an alias of --precision=bf16: use mixed (or "
        "bf16 for --reduce_dtype=fp32)");
  }
  if (name == "bf16") return Precision::kBf16;
  return absl::InvalidArgumentError(absl::StrCat(
      "precision '", name, "' is not one of: fp32 (4-byte parameters, gradients and Adam state), "
      "mixed (the runtime's --precision=bf16: bf16 parameters, gradients and compute, fp32 "
      "master and Adam state), bf16 (the runtime's --precision=bf16 --reduce_dtype=fp32: bf16 "
      "parameters and compute, fp32 master, gradients and Adam state)"));
}

PrecisionPolicy PrecisionPolicyOf(Precision precision) {
  PrecisionPolicy policy;
  if (precision != Precision::kFp32) policy.param_dtype = comm::Dtype::kBFloat16;
  if (precision == Precision::kMixed) policy.reduce_dtype = comm::Dtype::kBFloat16;
  return policy;
}

Precision PrecisionOf(const PrecisionPolicy& policy) {
  if (policy.param_dtype != comm::Dtype::kBFloat16) return Precision::kFp32;
  return policy.reduce_dtype == comm::Dtype::kBFloat16 ? Precision::kMixed : Precision::kBf16;
}

absl::StatusOr<ShardingOptions> ShardingOptionsOf(const MemoryPoint& point) {
  ShardingOptions sharding;
  FSDP_ASSIGN_OR_RETURN(sharding.strategy, plan::StrategyOfPlan(point.strategy));
  sharding.group_size = point.group_size;  // the planner checks it
  sharding.prefetch_depth = point.prefetch_depth;
  sharding.min_unit_numel = point.min_unit_numel;
  sharding.precision = PrecisionPolicyOf(point.precision);
  if (point.exact) {
    sharding.precision.reduction = ReductionKind::kExact;
    sharding.precision.reduce_dtype = comm::Dtype::kInt64;
  }
  return sharding;
}

std::string MemoryPointToString(const MemoryPoint& point) {
  std::string text = absl::StrCat(plan::ShardingStrategyName(point.strategy), " ",
                                  PrecisionName(point.precision), point.exact ? " exact" : "",
                                  " ranks=", point.ranks);
  if (point.strategy == proto::HYBRID_SHARD) absl::StrAppend(&text, " group_size=", point.group_size);
  absl::StrAppend(&text, " ", PointModelToString(point), " micro_batch=", point.micro_batch);
  if (point.accum > 1) absl::StrAppend(&text, " accum=", point.accum);
  if (CheckpointEveryOf(point) != 0) {
    absl::StrAppend(
        &text, " activation_checkpointing=", ActivationCheckpointingName(CheckpointEveryOf(point)));
  }
  if (FlashAttentionOf(point)) absl::StrAppend(&text, " attention=flash");
  return text;
}

std::string PointModelToString(const MemoryPoint& point) {
  if (point.family == ModelFamily::kLlama) {
    return absl::StrCat("llama ", LlamaConfigToString(point.llama));
  }
  return GptConfigToString(point.config);
}

int PointSeqLen(const MemoryPoint& point) {
  return point.family == ModelFamily::kLlama ? point.llama.seq_len : point.config.seq_len;
}

int64_t PointNumParams(const MemoryPoint& point) {
  return point.family == ModelFamily::kLlama ? LlamaNumParams(point.llama)
                                             : GptNumParams(point.config);
}

void SetPointSeqLen(MemoryPoint& point, int seq_len) {
  if (point.family == ModelFamily::kLlama) {
    point.llama.seq_len = seq_len;
  } else {
    point.config.seq_len = seq_len;
  }
}

int64_t RankMemoryEstimate::tracker_bytes(MemoryCategory category) const {
  switch (category) {
    case MemoryCategory::kParameters:
      return parameter_bytes + master_parameter_bytes + gathered_parameter_bytes;
    case MemoryCategory::kGradients:
      return gradient_bytes + unsharded_gradient_bytes + grad_workspace_bytes;
    case MemoryCategory::kOptimizerState:
      return optimizer_state_bytes;
    case MemoryCategory::kActivations:
      return activation_bytes;
    case MemoryCategory::kCommBuffers:
      return comm_buffer_bytes;
    case MemoryCategory::kWorkspace:
      return workspace_bytes;
    case MemoryCategory::kSnapshots:
      return snapshot_bytes;
  }
  return 0;
}

std::vector<NamedBytes> EstimateParts(const RankMemoryEstimate& e) {
  return {{"parameters", e.parameter_bytes},
          {"gradients", e.gradient_bytes},
          {"master_parameters", e.master_parameter_bytes},
          {"optimizer_state", e.optimizer_state_bytes},
          {"gathered", e.gathered_bytes},
          {"comm_buffers", e.comm_buffer_bytes},
          {"grad_workspace", e.grad_workspace_bytes},
          {"activations", e.activation_bytes},
          {"workspace", e.workspace_bytes},
          {"snapshots", e.snapshot_bytes}};
}

// [Note: peak of the total] Everything but the activations and the
// working buffers (kept parameters, gradients, master copy, optimizer state,
// communication buffers, workspace) is held for the whole run; the rest
// comes and goes unit by unit as the step walks forward and backward. The
// peak of the total is the held bytes plus the peak of that traffic, which
// step_schedule.h finds by replaying the runtime's step. Without working
// buffers (no_shard, shard_optimizer in fp32) and without checkpointing it
// is the sum of the category peaks; with working buffers it is less,
// because they peak in backward while the activations are being freed. A
// checkpointed block's recomputation is on top of the saved activations
// while it runs ([Note: activation transients] in step_schedule.h), so it
// counts in the activations' peak and in the replay.
namespace {

ScheduleInputs ScheduleOf(const proto::ShardPlan& plan, const GptActivationBreakdown& activations,
                          const MemoryPoint& point) {
  ScheduleInputs in;
  for (const proto::UnitPlan& unit : plan.units()) {
    std::vector<ModelUnitActivations> sources;
    for (const proto::SourceUnit& source : unit.source_units()) {
      const int m = source.model_unit_index();
      sources.push_back({activations.unit_saved_bytes(m), activations.unit_transient_bytes(m)});
    }
    ScheduleUnit u = ScheduleUnitActivations(sources);
    u.padded_numel = unit.padded_numel();
    u.shard_numel = unit.shard_numel();
    in.units.push_back(u);
  }
  const proto::ShardedState& sharded = plan.sharded_state();
  in.shard_params = sharded.parameters();
  in.shard_grads = sharded.gradients();
  in.shard_optimizer = sharded.optimizer_state();
  in.param_bytes = plan::DtypeBytes(plan.param_dtype());
  in.grad_bytes = plan::DtypeBytes(plan.reduce_dtype());
  in.prefetch_depth = point.prefetch_depth;
  in.max_gathers_in_flight = plan.options().max_gathers_in_flight();
  in.accum_steps = point.accum;
  return in;
}

// What the estimate needs of the model, whichever its family: its units
// (for the planner) and its activation bytes by unit (for the replay).
struct ModelMemory {
  std::vector<UnitSpec> units;
  GptActivationBreakdown activations;
};

// The point's model with the precision's dtypes (bf16 parameters are
// multiplied in bf16, as the runtime's models do), validated.
absl::StatusOr<ModelMemory> ModelMemoryOf(const MemoryPoint& point) {
  const bool bf16 = point.precision == Precision::kBf16 || point.precision == Precision::kMixed;
  const comm::Dtype dtype = bf16 ? comm::Dtype::kBFloat16 : comm::Dtype::kFloat32;
  switch (point.family) {
    case ModelFamily::kGpt: {
      GptConfig config = point.config;
      if (bf16) {
        config.compute_dtype = dtype;
        config.param_dtype = dtype;
      }
      config.per_sequence_products = point.exact;  // the same activations
      FSDP_RETURN_IF_ERROR(ValidateGptConfig(config));
      return ModelMemory{GptUnitSpecs(config), GptActivationBytesByUnit(config, point.micro_batch)};
    }
    case ModelFamily::kLlama: {
      LlamaConfig config = point.llama;
      config.compute_dtype = dtype;
      config.param_dtype = dtype;
      config.per_sequence_products = point.exact;  // the same activations
      FSDP_RETURN_IF_ERROR(ValidateLlamaConfig(config));
      return ModelMemory{LlamaUnitSpecs(config),
                         LlamaActivationBytesByUnit(config, point.micro_batch)};
    }
  }
  return absl::InvalidArgumentError("unknown model family");
}

}  // namespace

absl::StatusOr<RankMemoryEstimate> EstimateRankMemory(const MemoryPoint& point) {
  FSDP_ASSIGN_OR_RETURN(const ModelMemory model, ModelMemoryOf(point));
  if (point.micro_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro_batch must be at least 1 sequence per rank, got ", point.micro_batch));
  }
  if (point.accum < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("accum must be at least 1 micro-batch per step, got ", point.accum));
  }
  plan::PlannerOptions options;
  FSDP_ASSIGN_OR_RETURN(options.sharding, ShardingOptionsOf(point));
  options.world_size = point.ranks;
  options.include_rank_ranges = false;
  FSDP_ASSIGN_OR_RETURN(proto::ShardPlan plan, plan::BuildShardPlan(model.units, options));

  const GptActivationBreakdown& activations = model.activations;
  plan::MemoryModelInputs inputs;
  inputs.optimizer = point.optimizer;
  inputs.activation_bytes = activations.peak_bytes();
  inputs.workspace_bytes = activations.workspace_bytes;
  inputs.memory_snapshots = point.memory_snapshots;
  inputs.accum_steps = point.accum;
  const plan::RankMemoryPrediction planned = plan::PredictRankMemory(plan, inputs);

  RankMemoryEstimate e;
  e.num_params = plan.total_flat_numel();
  e.parameter_bytes = planned.parameter_bytes;
  e.gradient_bytes = planned.gradient_bytes;
  e.master_parameter_bytes = planned.master_parameter_bytes;
  e.optimizer_state_bytes = planned.optimizer_state_bytes;
  e.gathered_parameter_bytes = planned.gathered_parameter_bytes;
  e.unsharded_gradient_bytes = planned.unsharded_gradient_bytes;
  e.gathered_bytes = e.gathered_parameter_bytes + e.unsharded_gradient_bytes;
  e.comm_buffer_bytes = planned.communication_scratch_bytes;
  e.grad_workspace_bytes = planned.gradient_workspace_bytes;
  e.activation_bytes = planned.activation_bytes;
  e.workspace_bytes = planned.workspace_bytes;
  e.snapshot_bytes = planned.snapshot_bytes;
  const ScheduleInputs schedule = ScheduleOf(plan, activations, point);
  const int64_t held = e.model_state_bytes() + e.comm_buffer_bytes + e.grad_workspace_bytes +
                       e.workspace_bytes + e.snapshot_bytes;
  e.peak_total_bytes = held + PeakTransientBytes(schedule);
  return e;
}

absl::StatusOr<ModelStateBytes> ZeroModelStateBytes(int64_t num_params,
                                                    proto::ShardingStrategy strategy, int ranks,
                                                    int group_size, Precision precision,
                                                    plan::OptimizerKind optimizer) {
  if (num_params < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the parameter count must be positive, got ", num_params));
  }
  if (ranks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ranks must be at least 1, got ", ranks));
  }
  int shard_group = ranks;
  if (strategy == proto::HYBRID_SHARD) {
    if (group_size < 1 || group_size > ranks || ranks % group_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hybrid_shard needs a group size that divides the ", ranks,
          " ranks (--group_size), got ", group_size));
    }
    shard_group = group_size;
  } else if (strategy == proto::SHARDING_STRATEGY_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no sharding strategy given; use one of: ", plan::ValidShardingStrategyNames()));
  }
  const proto::ShardedState sharded = plan::ShardedStateOf(strategy);
  const bool bf16_params = precision == Precision::kMixed || precision == Precision::kBf16;
  const int64_t b = bf16_params ? 2 : 4;
  const int64_t grad_b = precision == Precision::kMixed ? 2 : 4;
  const int64_t k = kFp32Bytes * (bf16_params ? 1 : 0) +
                    kFp32Bytes * plan::OptimizerStatesPerParam(optimizer);
  const int64_t shard_numel = CeilDiv(num_params, shard_group);
  ModelStateBytes bytes;
  bytes.parameter_bytes = b * (sharded.parameters() ? shard_numel : num_params);
  bytes.gradient_bytes = grad_b * (sharded.gradients() ? shard_numel : num_params);
  bytes.optimizer_state_bytes = k * (sharded.optimizer_state() ? shard_numel : num_params);
  return bytes;
}

}  // namespace report
}  // namespace fsdp
