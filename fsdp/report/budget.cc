// File: fsdp/report/budget.cc
#include "fsdp/report/budget.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/status_macros.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/report/gpt_family.h"
#include "fsdp/train/strategy.h"

namespace fsdp {
namespace report {
namespace {

constexpr int kMaxSuggestedRanks = 65536;
constexpr int kMaxSuggestions = 4;

// Strategies a suggestion may name, least sharded first. hybrid_shard is
// left out: with G < ranks it keeps more than full_shard on the same ranks.
constexpr proto::ShardingStrategy kSuggestedStrategies[] = {
    proto::NO_SHARD, proto::SHARD_OPTIMIZER, proto::SHARD_GRAD_OP, proto::FULL_SHARD};

int Percent(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<int>(100.0 * static_cast<double>(part) / whole + 0.5) : 0;
}

// "full_shard on 4 ranks (310.20 MiB)".
std::string Suggestion(const MemoryPoint& point, const RankMemoryEstimate& estimate) {
  return absl::StrCat(plan::ShardingStrategyName(point.strategy), " on ", point.ranks,
                      point.ranks == 1 ? " rank" : " ranks", " (",
                      FormatBytes(estimate.total_bytes()), ")");
}

// Up to kMaxSuggestions fitting variations of `point`, fewest ranks first:
// the least sharded other strategy that fits on the same ranks, then each
// strategy that does not fit there at its smallest rank count ranks x 2^k.
std::vector<std::string> FittingAlternatives(const MemoryPoint& point, int64_t budget_bytes) {
  struct Fit {
    int ranks;
    int order;  // position in kSuggestedStrategies
    std::string text;
  };
  std::vector<Fit> fits;
  bool same_ranks_found = false;
  for (int s = 0; s < static_cast<int>(std::size(kSuggestedStrategies)); ++s) {
    MemoryPoint alternative = point;
    alternative.strategy = kSuggestedStrategies[s];
    alternative.group_size = 0;
    absl::StatusOr<RankMemoryEstimate> here = EstimateRankMemory(alternative);
    if (here.ok() && here->total_bytes() <= budget_bytes) {
      // Fits on the same ranks: suggest the least sharded such strategy
      // only; more ranks for it would not be news.
      if (!same_ranks_found && alternative.strategy != point.strategy) {
        fits.push_back({point.ranks, s, Suggestion(alternative, *here)});
        same_ranks_found = true;
      }
      continue;
    }
    for (int64_t ranks = int64_t{point.ranks} * 2; ranks <= kMaxSuggestedRanks; ranks *= 2) {
      alternative.ranks = static_cast<int>(ranks);
      absl::StatusOr<RankMemoryEstimate> estimate = EstimateRankMemory(alternative);
      if (!estimate.ok()) break;
      if (estimate->total_bytes() <= budget_bytes) {
        fits.push_back({alternative.ranks, s, Suggestion(alternative, *estimate)});
        break;
      }
    }
  }
  std::sort(fits.begin(), fits.end(), [](const Fit& a, const Fit& b) {
    return a.ranks != b.ranks ? a.ranks < b.ranks : a.order < b.order;
  });
  std::vector<std::string> suggestions;
  for (const Fit& fit : fits) {
    if (static_cast<int>(suggestions.size()) == kMaxSuggestions) break;
    suggestions.push_back(fit.text);
  }
  return suggestions;
}

}  // namespace

absl::Status CheckFitsBudget(const MemoryPoint& point, int64_t budget_bytes) {
  if (budget_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the memory budget must be a positive byte count per rank, got ", budget_bytes));
  }
  FSDP_ASSIGN_OR_RETURN(RankMemoryEstimate estimate, EstimateRankMemory(point));
  const int64_t total = estimate.total_bytes();
  if (total <= budget_bytes) return absl::OkStatus();

  const std::vector<NamedBytes> parts = EstimateParts(estimate);
  NamedBytes largest = parts.front();
  std::vector<std::string> listed;
  for (const NamedBytes& part : parts) {
    if (part.bytes > largest.bytes) largest = part;
    if (part.bytes > 0) listed.push_back(absl::StrCat(part.name, " ", FormatBytes(part.bytes)));
  }
  std::string message = absl::StrCat(
      plan::ShardingStrategyName(point.strategy), " ", PrecisionName(point.precision), " on ",
      point.ranks, point.ranks == 1 ? " rank" : " ranks", " (", GptConfigToString(point.config),
      " micro_batch=", point.micro_batch, ", ", estimate.num_params, " parameters) needs ",
      FormatBytes(total), " per rank, ", FormatBytes(total - budget_bytes), " (",
      Percent(total - budget_bytes, budget_bytes), "%) over the budget of ",
      FormatBytes(budget_bytes), "; the largest part is ", largest.name, ": ",
      FormatBytes(largest.bytes), " (", Percent(largest.bytes, total), "% of the total; ",
      absl::StrJoin(listed, ", "), ").");

  const std::vector<std::string> suggestions = FittingAlternatives(point, budget_bytes);
  if (!suggestions.empty()) {
    absl::StrAppend(&message, " Would fit: ", absl::StrJoin(suggestions, ", "), ".");
  } else {
    // Sharding cannot shrink activations and workspace; say so when they
    // are what is left over.
    const int64_t unshardable = estimate.activation_bytes + estimate.workspace_bytes;
    absl::StrAppend(&message, " No strategy fits on up to ", kMaxSuggestedRanks,
                    " ranks: activations and workspace alone need ", FormatBytes(unshardable),
                    unshardable > budget_bytes / 2 ? " (sharding does not reduce them)" : "",
                    "; reduce micro_batch or seq_len, or choose a smaller model.");
  }
  return absl::ResourceExhaustedError(message);
}

absl::StatusOr<MemoryPoint> MemoryPointFromTrainOptions(const TrainOptions& options) {
  MemoryPoint point;
  point.config = GptConfigOf(options);
  point.micro_batch = options.micro_batch;
  point.ranks = options.nproc;
  point.optimizer = options.optimizer == OptimizerKind::kAdamW
                        ? plan::OptimizerKind::kAdam
                        : plan::OptimizerKind::kSgdMomentum;
  FSDP_ASSIGN_OR_RETURN(point.strategy,
                        plan::ParseShardingStrategy(StrategyName(options.strategy)));
  point.group_size = point.strategy == proto::HYBRID_SHARD ? options.group_size : 0;
  point.prefetch_depth = options.prefetch_depth;
  // The runtime's --mixed_precision: [Note: runtime mixed precision] in sweep.cc.
  point.precision = options.mixed_precision ? Precision::kBf16Wire : Precision::kFp32;
  return point;
}

absl::Status CheckTrainingFitsBudget(const TrainOptions& options, int64_t budget_bytes) {
  FSDP_ASSIGN_OR_RETURN(MemoryPoint point, MemoryPointFromTrainOptions(options));
  return CheckFitsBudget(point, budget_bytes);
}

absl::StatusOr<std::optional<FittingModel>> LargestFittingFamilyModel(const MemoryPoint& point,
                                                                      int64_t budget_bytes) {
  std::optional<FittingModel> largest;
  for (int width = kGptFamilyWidthStep; width <= kGptFamilyMaxWidth;
       width += kGptFamilyWidthStep) {
    MemoryPoint candidate = point;
    candidate.config = GptFamilyConfig(width, point.config.vocab, point.config.seq_len);
    FSDP_ASSIGN_OR_RETURN(RankMemoryEstimate estimate, EstimateRankMemory(candidate));
    // Memory grows with width, so the first miss ends the scan.
    if (estimate.total_bytes() > budget_bytes) {
      if (largest.has_value()) {
        largest->next_num_params = estimate.num_params;
        largest->next_total_bytes = estimate.total_bytes();
      }
      break;
    }
    largest = FittingModel{candidate.config, estimate};
  }
  return largest;
}

}  // namespace report
}  // namespace fsdp
