// File: fsdp/plan/memory_model.cc
#include "fsdp/plan/memory_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fsdp {
namespace plan {

int64_t DtypeBytes(proto::PlanDtype dtype) {
  switch (dtype) {
    case proto::BF16:
      return 2;
    case proto::INT64:
      return 8;
    default:
      return 4;
  }
}

namespace {

// The largest sum of padded_numel over `window` consecutive units (all units
// if there are fewer). The same in forward and backward order.
int64_t LargestWindowPaddedNumel(const proto::ShardPlan& plan, int window) {
  const int num_units = plan.units_size();
  window = std::min(window, num_units);
  int64_t window_numel = 0, largest = 0;
  for (int u = 0; u < num_units; ++u) {
    window_numel += plan.units(u).padded_numel();
    if (u >= window) window_numel -= plan.units(u - window).padded_numel();
    largest = std::max(largest, window_numel);
  }
  return largest;
}

std::string BytesLine(const char* label, int64_t bytes) {
  return absl::StrFormat("  %-28s %16d B  %10.3f GiB\n", label, bytes,
                         static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace

int OptimizerStatesPerParam(OptimizerKind optimizer) {
  switch (optimizer) {
    case OptimizerKind::kAdam:
      return 2;
    case OptimizerKind::kSgdMomentum:
      return 1;
    case OptimizerKind::kSgd:
      return 0;
  }
  return 0;
}

int64_t ParamTensorCount(const proto::ShardPlan& plan) {
  int64_t tensors = 0;
  for (const proto::UnitPlan& unit : plan.units()) tensors += unit.params_size();
  return tensors;
}

RankMemoryPrediction PredictRankMemory(const proto::ShardPlan& plan,
                                       const MemoryModelInputs& inputs) {
  const proto::ShardedState& sharded = plan.sharded_state();
  const int64_t full_numel = plan.total_padded_numel();
  const int64_t shard_numel = plan.total_shard_numel();
  const int64_t param_bytes = DtypeBytes(plan.param_dtype());
  const int64_t reduce_bytes = DtypeBytes(plan.reduce_dtype());
  const int64_t state_bytes = DtypeBytes(plan.optimizer_state_dtype());

  RankMemoryPrediction memory;
  // Model state: each category is either whole (P) or one shard (S) per rank.
  memory.parameter_bytes = param_bytes * (sharded.parameters() ? shard_numel : full_numel);
  memory.gradient_bytes = reduce_bytes * (sharded.gradients() ? shard_numel : full_numel);
  const int64_t optimizer_numel = sharded.optimizer_state() ? shard_numel : full_numel;
  if (plan.options().mixed_precision()) {
    memory.master_parameter_bytes = state_bytes * optimizer_numel;
  }
  memory.optimizer_state_bytes =
      OptimizerStatesPerParam(inputs.optimizer) * state_bytes * optimizer_numel;

  // Working buffers: [Note: gathered window] the unit computing plus the ones
  // prefetched are unsharded at once; a unit's unsharded gradients live from
  // its backward until its reduce-scatter finishes, overlapping the next
  // unit's backward.
  if (sharded.parameters()) {
    memory.gathered_parameter_bytes =
        param_bytes * LargestWindowPaddedNumel(plan, 1 + plan.options().prefetch_depth());
  }
  if (sharded.gradients()) {
    memory.unsharded_gradient_bytes =
        reduce_bytes *
        (inputs.accum_steps > 1 ? full_numel : LargestWindowPaddedNumel(plan, 2));
  }
  // Communication buffers, as the runtime (fsdp/train/unit_state.h) holds
  // them: strategies that keep whole gradients (no_shard, shard_optimizer)
  // reduce-scatter every unit into a shard buffer of its own, kept for the
  // run (S in total); the gradient-sharding strategies reduce-scatter
  // straight into their gradient shards and stage nothing. Plus the
  // trainer's loss and gradient-norm exchange buffer.
  // With gradients kept in another dtype than fp32 (the bf16 layout's 2-byte
  // ones, --exact's int64 sums) they reduce-scatter in place and one fp32
  // workspace of the largest unit serves every unit. --exact adds the
  // exchange of the per-tensor maxima and the exact loss (ExactExchangeBytes).
  const bool grads_through_workspace = plan.reduce_dtype() != proto::FP32;
  const bool reduce_in_place = sharded.gradients() || grads_through_workspace;
  memory.communication_scratch_bytes = (reduce_in_place ? 0 : reduce_bytes * shard_numel) +
                                       NormExchangeBytes(plan.shard_group_size());
  if (plan.reduce_dtype() == proto::INT64) {
    memory.communication_scratch_bytes +=
        ExactExchangeBytes(plan.world_size(), ParamTensorCount(plan));
  }
  if (grads_through_workspace) {
    memory.gradient_workspace_bytes = 4 * LargestWindowPaddedNumel(plan, 1);
  }

  memory.activation_bytes = inputs.activation_bytes;
  memory.workspace_bytes = inputs.workspace_bytes;
  if (inputs.memory_snapshots) memory.snapshot_bytes = MemorySnapshotBytes(plan, inputs.optimizer);
  return memory;
}

int64_t MemorySnapshotBytes(const proto::ShardPlan& plan, OptimizerKind optimizer) {
  // Rank 0's shard: every unit's first shard, never padding.
  const int64_t own_numel = (1 + OptimizerStatesPerParam(optimizer)) * plan.total_shard_numel();
  const bool buddy = plan.world_size() > 1 && plan.shard_group_size() == plan.world_size();
  return int64_t{2} * (buddy ? 2 : 1) * own_numel * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<RankMemoryPrediction> PredictRankMemoryFromUnits(
    const std::vector<UnitSpec>& units, const PlannerOptions& options,
    const MemoryModelInputs& inputs) {
  PlannerOptions summary_options = options;
  summary_options.include_rank_ranges = false;
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(units, summary_options);
  if (!plan.ok()) return plan.status();
  return PredictRankMemory(*plan, inputs);
}

std::string RankMemoryPredictionToText(const RankMemoryPrediction& memory) {
  std::string text = "predicted peak bytes per rank\n";
  absl::StrAppend(&text, BytesLine("parameters", memory.parameter_bytes),
                  BytesLine("gradients", memory.gradient_bytes),
                  BytesLine("master parameters (fp32)", memory.master_parameter_bytes),
                  BytesLine("optimizer state", memory.optimizer_state_bytes),
                  BytesLine("= model state", memory.model_state_bytes()),
                  BytesLine("gathered parameters", memory.gathered_parameter_bytes),
                  BytesLine("unsharded gradients", memory.unsharded_gradient_bytes),
                  BytesLine("communication scratch", memory.communication_scratch_bytes),
                  BytesLine("gradient workspace (fp32)", memory.gradient_workspace_bytes),
                  BytesLine("activations", memory.activation_bytes),
                  BytesLine("workspace", memory.workspace_bytes),
                  BytesLine("memory snapshots", memory.snapshot_bytes),
                  BytesLine("= total", memory.total_bytes()));
  return text;
}

}  // namespace plan
}  // namespace fsdp
