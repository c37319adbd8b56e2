// File: fsdp/report/memory_estimate.cc
#include "fsdp/report/memory_estimate.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/status_macros.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"

namespace fsdp {
namespace report {
namespace {

constexpr int64_t kFp32Bytes = 4;
// DataParallelTrainer's one-float buffer for the loss and gradient-norm
// all-reduces (fsdp/train/train_step.h), held for the whole run.
constexpr int64_t kScalarAllReduceBytes = 4;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

const char* PrecisionName(Precision precision) {
  return precision == Precision::kMixed ? "mixed" : "fp32";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "mixed") return Precision::kMixed;
  return absl::InvalidArgumentError(absl::StrCat(
      "precision '", name, "' is not one of: fp32 (4-byte parameters, gradients and Adam state), "
      "mixed (bf16 parameters and gradients, fp32 master and Adam state)"));
}

std::string MemoryPointToString(const MemoryPoint& point) {
  std::string text = absl::StrCat(plan::ShardingStrategyName(point.strategy), " ",
                                  PrecisionName(point.precision), " ranks=", point.ranks);
  if (point.strategy == proto::HYBRID_SHARD) absl::StrAppend(&text, " group_size=", point.group_size);
  absl::StrAppend(&text, " ", GptConfigToString(point.config), " micro_batch=", point.micro_batch);
  return text;
}

int64_t RankMemoryEstimate::tracker_bytes(MemoryCategory category) const {
  switch (category) {
    case MemoryCategory::kParameters:
      return parameter_bytes + master_parameter_bytes + gathered_parameter_bytes;
    case MemoryCategory::kGradients:
      return gradient_bytes + unsharded_gradient_bytes;
    case MemoryCategory::kOptimizerState:
      return optimizer_state_bytes;
    case MemoryCategory::kActivations:
      return activation_bytes;
    case MemoryCategory::kCommBuffers:
      return comm_buffer_bytes;
    case MemoryCategory::kWorkspace:
      return workspace_bytes;
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
          {"activations", e.activation_bytes},
          {"workspace", e.workspace_bytes}};
}

// [Note: communication buffers] What the runtime keeps for collectives
// (fsdp/train/unit_state.h, unit_collectives.h), in fp32 training:
//  * strategies that keep whole gradients (no_shard, shard_optimizer)
//    reduce each unit's gradients by a reduce-scatter into a per-unit shard
//    buffer (then all-gather back, or step the shard); every unit owns its
//    shard buffer for the whole run, so together they hold one shard of
//    every unit: reduce dtype x total_shard_numel.
//  * gradient-sharding strategies reduce-scatter straight into the gradient
//    shard they keep (counted under gradients) and all-gather straight into
//    the gathered parameters: no staging at all.
//  * plus the trainer's one-float scalar for the loss / norm all-reduces.
// The shard planner's "communication scratch" (one shard of the largest
// unit, twice for hybrid_shard) describes neither: it undercounts the first
// case by up to the whole model on one rank (S = P there) and overcounts the
// second; docs/memory.md has the fix for fsdp/plan/memory_model.cc.
int64_t CommBufferBytes(const proto::ShardPlan& plan) {
  const int64_t reduce_bytes = plan.reduce_dtype() == proto::BF16 ? 2 : 4;
  if (!plan.sharded_state().gradients()) {
    return reduce_bytes * plan.total_shard_numel() + kScalarAllReduceBytes;
  }
  return kScalarAllReduceBytes;
}

// [Note: peak of the total] The runtime's step (fsdp/train/train_step.cc)
// walks the units forward, then backward, and the tracked total peaks at one
// of these moments (P_u = padded numel of plan unit u, b = compute bytes):
//   forward of unit u:  saved activations of units 0..u, plus (sharded
//                       parameters) unit u and the prefetch_depth next units
//                       gathered, b P each;
//   backward of unit u: saved activations of units 0..u (each unit's are
//                       freed after its backward), plus (sharded parameters)
//                       unit u and the prefetch_depth previous units
//                       gathered, plus (sharded gradients) the unsharded
//                       gradients of unit u and of unit u+1, whose
//                       reduce-scatter is waited for after u's backward.
// Everything else (kept parameters, gradients, master copy, optimizer state,
// communication buffers, workspace) is held for the whole step. So
//   peak total = held + max over those moments,
// which equals the sum of the category peaks when nothing is gathered.
namespace {

int64_t PeakTotalBytes(const proto::ShardPlan& plan, const GptActivationBreakdown& activations,
                       const RankMemoryEstimate& e, int prefetch_depth) {
  const int64_t param_bytes = plan.param_dtype() == proto::BF16 ? 2 : 4;
  const int64_t reduce_bytes = plan.reduce_dtype() == proto::BF16 ? 2 : 4;
  const bool gather = plan.sharded_state().parameters();
  const bool unshard_grads = plan.sharded_state().gradients();
  const int n = plan.units_size();
  const int last_model_unit = activations.layers + 1;  // the head
  std::vector<int64_t> saved(n), gathered(n), unsharded(n);
  for (int u = 0; u < n; ++u) {
    const proto::UnitPlan& unit = plan.units(u);
    for (const proto::SourceUnit& source : unit.source_units()) {
      const int m = source.model_unit_index();
      saved[u] += m == 0 ? activations.embedding_bytes
                         : (m == last_model_unit ? activations.head_bytes : activations.block_bytes);
    }
    gathered[u] = gather ? param_bytes * unit.padded_numel() : 0;
    unsharded[u] = unshard_grads ? reduce_bytes * unit.padded_numel() : 0;
  }
  int64_t transient = 0, saved_so_far = 0;
  std::vector<int64_t> saved_through(n);
  for (int u = 0; u < n; ++u) {
    saved_so_far += saved[u];
    saved_through[u] = saved_so_far;
    int64_t in_flight = gathered[u];
    for (int k = 1; k <= prefetch_depth && u + k < n; ++k) in_flight += gathered[u + k];
    transient = std::max(transient, saved_through[u] + in_flight);
  }
  for (int u = n - 1; u >= 0; --u) {
    int64_t in_flight = gathered[u] + unsharded[u] + (u + 1 < n ? unsharded[u + 1] : 0);
    for (int k = 1; k <= prefetch_depth && u - k >= 0; ++k) in_flight += gathered[u - k];
    transient = std::max(transient, saved_through[u] + in_flight);
  }
  const int64_t held = e.model_state_bytes() + e.comm_buffer_bytes + e.workspace_bytes;
  return held + transient;
}

}  // namespace

absl::StatusOr<RankMemoryEstimate> EstimateRankMemory(const MemoryPoint& point) {
  FSDP_RETURN_IF_ERROR(ValidateGptConfig(point.config));
  if (point.micro_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro_batch must be at least 1 sequence per rank, got ", point.micro_batch));
  }
  plan::PlannerOptions options;
  options.strategy = point.strategy;
  options.world_size = point.ranks;
  options.group_size = point.group_size;
  options.prefetch_depth = point.prefetch_depth;
  options.mixed_precision = point.precision == Precision::kMixed;
  options.include_rank_ranges = false;
  const std::vector<UnitSpec> units = GptUnitSpecs(point.config);
  FSDP_ASSIGN_OR_RETURN(proto::ShardPlan plan, plan::BuildShardPlan(units, options));

  const GptActivationBreakdown activations =
      GptActivationBytesByUnit(point.config, point.micro_batch);
  plan::MemoryModelInputs inputs;
  inputs.optimizer = point.optimizer;
  inputs.activation_bytes = activations.saved_bytes();
  inputs.workspace_bytes = activations.workspace_bytes;
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
  e.comm_buffer_bytes = CommBufferBytes(plan);
  e.activation_bytes = planned.activation_bytes;
  e.workspace_bytes = planned.workspace_bytes;
  e.peak_total_bytes = PeakTotalBytes(plan, activations, e, point.prefetch_depth);
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
  const int64_t b = precision == Precision::kMixed ? 2 : 4;
  const int64_t k = kFp32Bytes * (precision == Precision::kMixed ? 1 : 0) +
                    kFp32Bytes * plan::OptimizerStatesPerParam(optimizer);
  const int64_t shard_numel = CeilDiv(num_params, shard_group);
  ModelStateBytes bytes;
  bytes.parameter_bytes = b * (sharded.parameters() ? shard_numel : num_params);
  bytes.gradient_bytes = b * (sharded.gradients() ? shard_numel : num_params);
  bytes.optimizer_state_bytes = k * (sharded.optimizer_state() ? shard_numel : num_params);
  return bytes;
}

}  // namespace report
}  // namespace fsdp
