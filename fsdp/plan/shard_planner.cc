// File: fsdp/plan/shard_planner.cc
//
// BuildShardPlan, top to bottom:
//   1. validate the options and the unit specs (every error says what to fix);
//   2. fill the plan header: strategy, sizes, dtypes, options used;
//   3. group consecutive model units into plan units (merging small ones);
//   4. lay out each plan unit: param offsets, padding, shard numel, and each
//      shard rank's padded and real-data range;
//   5. totals, rank groups, and last the fingerprint over all of it.
#include "fsdp/plan/shard_planner.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "comm/dtype.h"
#include "fsdp/plan/plan_fingerprint.h"
#include "fsdp/plan/sharding_strategy.h"
#include "google/protobuf/text_format.h"

namespace fsdp {
namespace plan {
namespace {

// Element counts stay below this so that padding and byte counts (x 16 at
// most) cannot overflow int64.
constexpr int64_t kMaxNumel = int64_t{1} << 58;

// ---- 1. Validation ---------------------------------------------------------

std::string DivisorsOf(int n) {
  std::vector<int> small, large;
  for (int d = 1; static_cast<int64_t>(d) * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return absl::StrJoin(small, ", ");
}

absl::Status ValidateOptions(const PlannerOptions& options) {
  const ShardingOptions& sharding = options.sharding;
  if (ToPlanStrategy(sharding.strategy) == proto::SHARDING_STRATEGY_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding strategy value ", static_cast<int>(sharding.strategy),
                     " is not a known strategy; set one of: ", ValidShardingStrategyNames()));
  }
  FSDP_RETURN_IF_ERROR(ValidatePrecisionPolicy(sharding.precision));
  const std::string strategy_name = StrategyName(sharding.strategy);
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world_size must be >= 1, got ", options.world_size));
  }
  if (sharding.strategy == Strategy::kHybridShard) {
    if (sharding.group_size < 1 || sharding.group_size > options.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hybrid_shard needs 1 <= group_size <= world_size (", options.world_size,
          "), got group_size ", sharding.group_size,
          "; group sizes that divide the world: ", DivisorsOf(options.world_size)));
    }
    if (options.world_size % sharding.group_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group_size ", sharding.group_size, " does not divide world_size ",
          options.world_size, "; group sizes that do: ", DivisorsOf(options.world_size)));
    }
  } else if (sharding.group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group_size ", sharding.group_size, " only applies to hybrid_shard; ",
        strategy_name, " shards over the whole world, so leave group_size 0"));
  }
  if (sharding.min_unit_numel < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_unit_numel must be >= 0 (0 = no merging), got ", sharding.min_unit_numel));
  }
  if (sharding.prefetch_depth < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefetch_depth must be >= 0 (0 = no prefetch), got ", sharding.prefetch_depth));
  }
  if (sharding.max_gathers_in_flight < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_gathers_in_flight must be >= 1, got ", sharding.max_gathers_in_flight));
  }
  return absl::OkStatus();
}

absl::Status ValidateParam(const UnitSpec& unit, int unit_index, const ParamSpec& param) {
  if (param.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unit ", unit_index, " '", unit.name, "' has a parameter with an empty name"));
  }
  int64_t numel = 1;
  for (int64_t dim : param.shape) {
    if (dim < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", param.name, "' in unit '", unit.name, "' has shape [",
          absl::StrJoin(param.shape, ", "), "]; every dimension must be >= 1"));
    }
    if (numel > kMaxNumel / dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", param.name, "' in unit '", unit.name, "' has shape [",
          absl::StrJoin(param.shape, ", "), "], more than 2^58 elements"));
    }
    numel *= dim;
  }
  return absl::OkStatus();
}

absl::Status ValidateUnits(const std::vector<UnitSpec>& units) {
  if (units.empty()) {
    return absl::InvalidArgumentError(
        "the model has no units; a shard plan needs at least one UnitSpec");
  }
  absl::flat_hash_map<std::string, int> unit_index_by_name;
  absl::flat_hash_map<std::string, int> unit_index_by_param_name;
  int64_t total_numel = 0;
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    const UnitSpec& unit = units[u];
    if (unit.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("unit ", u, " has an empty name"));
    }
    auto [unit_it, unit_is_new] = unit_index_by_name.emplace(unit.name, u);
    if (!unit_is_new) {
      return absl::InvalidArgumentError(absl::StrCat(
          "units ", unit_it->second, " and ", u, " are both named '", unit.name,
          "'; unit names must be unique"));
    }
    for (const ParamSpec& param : unit.params) {
      FSDP_RETURN_IF_ERROR(ValidateParam(unit, u, param));
      auto [param_it, param_is_new] = unit_index_by_param_name.emplace(param.name, u);
      if (!param_is_new) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter name '", param.name, "' appears in unit '",
            units[param_it->second].name, "' and again in unit '", unit.name,
            "'; parameter names must be unique (checkpoints are keyed by them)"));
      }
      total_numel += param.numel();
      if (total_numel > kMaxNumel) {
        return absl::InvalidArgumentError(
            "the model has more than 2^58 elements; the planner's counts would overflow");
      }
    }
  }
  return absl::OkStatus();
}

// ---- 2. Header --------------------------------------------------------------

void FillHeader(const PlannerOptions& options, int shard_group_size,
                proto::ShardPlan* plan) {
  const ShardingOptions& sharding = options.sharding;
  plan->set_format_version(kShardPlanFormatVersion);
  plan->set_strategy(ToPlanStrategy(sharding.strategy));
  *plan->mutable_sharded_state() = ShardedStateOf(plan->strategy());
  plan->set_world_size(options.world_size);
  plan->set_shard_group_size(shard_group_size);
  plan->set_replica_group_count(options.world_size / shard_group_size);

  // The plan's dtypes are the policy's: the bf16 layout's parameters, and
  // its gradients unless they stay fp32.
  const bool bf16_params = sharding.precision.param_dtype == comm::Dtype::kBFloat16;
  const bool fp32_gradients =
      bf16_params && sharding.precision.reduce_dtype == comm::Dtype::kFloat32;
  const proto::PlanDtype compute_dtype = bf16_params ? proto::BF16 : proto::FP32;
  plan->set_param_dtype(compute_dtype);
  if (sharding.precision.reduction == ReductionKind::kExact) {
    plan->set_reduce_dtype(proto::INT64);  // exact sums in either precision
  } else {
    plan->set_reduce_dtype(fp32_gradients ? proto::FP32 : compute_dtype);
  }
  plan->set_optimizer_state_dtype(proto::FP32);

  proto::PlannerOptionsUsed* used = plan->mutable_options();
  used->set_min_unit_numel(sharding.min_unit_numel);
  used->set_prefetch_depth(sharding.prefetch_depth);
  used->set_max_gathers_in_flight(sharding.max_gathers_in_flight);
  used->set_mixed_precision(bf16_params);
  used->set_fp32_gradients(fp32_gradients);
  used->set_include_rank_ranges(options.include_rank_ranges);
}

// ---- 3. Merging ---------------------------------------------------------------

// Model units [begin, end) that form one plan unit.
struct SourceUnitRange {
  int begin;
  int end;
};

// Greedy, in forward order: close a plan unit as soon as it holds at least
// `min_unit_numel` elements. A short tail joins the previous plan unit (a
// model smaller than min_unit_numel becomes one plan unit), so every plan unit
// but a lone one reaches the minimum.
std::vector<SourceUnitRange> GroupUnitsForMerging(const std::vector<UnitSpec>& units,
                                                  int64_t min_unit_numel) {
  const int num_units = static_cast<int>(units.size());
  std::vector<SourceUnitRange> groups;
  if (min_unit_numel == 0) {
    for (int u = 0; u < num_units; ++u) groups.push_back({u, u + 1});
    return groups;
  }
  int begin = 0;
  int64_t numel = 0;
  for (int u = 0; u < num_units; ++u) {
    numel += units[u].numel();
    if (numel >= min_unit_numel) {
      groups.push_back({begin, u + 1});
      begin = u + 1;
      numel = 0;
    }
  }
  if (begin < num_units) {
    if (groups.empty()) {
      groups.push_back({begin, num_units});
    } else {
      groups.back().end = num_units;
    }
  }
  return groups;
}

std::string MergedUnitName(const std::vector<UnitSpec>& units, SourceUnitRange range) {
  if (range.end - range.begin == 1) return units[range.begin].name;
  return absl::StrCat(units[range.begin].name, "..", units[range.end - 1].name);
}

// ---- 4. Unit layout -------------------------------------------------------------

void AddShardRanges(int shard_group_size, proto::UnitPlan* unit) {
  unit->mutable_shards()->Reserve(shard_group_size);
  for (int shard_rank = 0; shard_rank < shard_group_size; ++shard_rank) {
    *unit->add_shards() = ShardRangeOf(*unit, shard_rank);
  }
}

void LayOutUnit(const std::vector<UnitSpec>& units, SourceUnitRange range,
                int shard_group_size, bool include_rank_ranges, proto::UnitPlan* unit) {
  unit->set_name(MergedUnitName(units, range));
  int64_t offset = 0;  // params lie back to back in source-unit, then ParamSpec, order
  for (int u = range.begin; u < range.end; ++u) {
    proto::SourceUnit* source = unit->add_source_units();
    source->set_model_unit_index(u);
    source->set_name(units[u].name);
    source->set_offset(offset);
    for (const ParamSpec& param : units[u].params) {
      proto::ParamLayout* layout = unit->add_params();
      layout->set_name(param.name);
      for (int64_t dim : param.shape) layout->add_shape(dim);
      layout->set_offset(offset);
      layout->set_numel(param.numel());
      layout->set_source_unit_index(u);
      offset += param.numel();
    }
    source->set_numel(offset - source->offset());
  }
  // Minimal padding: the smallest multiple of the group size >= flat_numel.
  const int64_t flat_numel = offset;
  const int64_t shard_numel = (flat_numel + shard_group_size - 1) / shard_group_size;
  const int64_t padded_numel = shard_numel * shard_group_size;
  unit->set_flat_numel(flat_numel);
  unit->set_padded_numel(padded_numel);
  unit->set_padding_numel(padded_numel - flat_numel);
  unit->set_shard_numel(shard_numel);
  if (include_rank_ranges) AddShardRanges(shard_group_size, unit);
}

// ---- 5. Totals and rank groups --------------------------------------------------

void FillTotals(proto::ShardPlan* plan) {
  int64_t flat = 0, padded = 0, shard = 0;
  for (const proto::UnitPlan& unit : plan->units()) {
    flat += unit.flat_numel();
    padded += unit.padded_numel();
    shard += unit.shard_numel();
  }
  plan->set_total_flat_numel(flat);
  plan->set_total_padded_numel(padded);
  plan->set_total_shard_numel(shard);
}

void FillRankGroups(proto::ShardPlan* plan) {
  const int group_size = plan->shard_group_size();
  const int group_count = plan->replica_group_count();
  for (int group = 0; group < group_count; ++group) {
    proto::RankGroup* shard_group = plan->add_shard_groups();
    for (int r = 0; r < group_size; ++r) shard_group->add_ranks(group * group_size + r);
  }
  for (int shard_rank = 0; shard_rank < group_size; ++shard_rank) {
    proto::RankGroup* replica_group = plan->add_replica_groups();
    for (int group = 0; group < group_count; ++group) {
      replica_group->add_ranks(group * group_size + shard_rank);
    }
  }
}

}  // namespace

int ShardGroupSizeOf(const PlannerOptions& options) {
  return options.sharding.strategy == Strategy::kHybridShard ? options.sharding.group_size
                                                             : options.world_size;
}

proto::ShardRange ShardRangeOf(const proto::UnitPlan& unit, int shard_rank) {
  proto::ShardRange range;
  range.set_shard_rank(shard_rank);
  const int64_t begin = shard_rank * unit.shard_numel();
  const int64_t end = begin + unit.shard_numel();
  range.set_padded_begin(begin);
  range.set_padded_end(end);
  range.set_data_begin(std::min(begin, unit.flat_numel()));
  range.set_data_end(std::min(end, unit.flat_numel()));
  return range;
}

int ShardRankOf(const proto::ShardPlan& plan, int global_rank) {
  return global_rank % plan.shard_group_size();
}

absl::StatusOr<proto::ShardPlan> BuildShardPlan(const std::vector<UnitSpec>& units,
                                                const PlannerOptions& options) {
  FSDP_RETURN_IF_ERROR(ValidateOptions(options));
  FSDP_RETURN_IF_ERROR(ValidateUnits(units));
  const int shard_group_size = ShardGroupSizeOf(options);

  proto::ShardPlan plan;
  FillHeader(options, shard_group_size, &plan);
  for (SourceUnitRange range : GroupUnitsForMerging(units, options.sharding.min_unit_numel)) {
    proto::UnitPlan* unit = plan.add_units();
    unit->set_index(plan.units_size() - 1);
    LayOutUnit(units, range, shard_group_size, options.include_rank_ranges, unit);
  }
  FillTotals(&plan);
  if (options.include_rank_ranges) FillRankGroups(&plan);
  plan.set_fingerprint(ComputePlanFingerprint(plan));  // last: covers all the above
  return plan;
}

std::string ShardPlanToText(const proto::ShardPlan& plan) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(plan, &text);
  return text;
}

}  // namespace plan
}  // namespace fsdp
