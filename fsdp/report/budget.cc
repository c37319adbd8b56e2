// File: fsdp/report/budget.cc
#include "fsdp/report/budget.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "comm/dtype.h"
#include "fsdp/models/gpt_config.h"
#include "fsdp/models/llama_config.h"
#include "fsdp/optim/gradient_noise_scale.h"
#include "fsdp/plan/precision_policy.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/plan/strategy.h"
#include "fsdp/report/gpt_family.h"

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

// The global batch `point` trains on when it is beyond the measured noise
// scale, else 0.
int64_t BatchBeyondNoiseScale(const MemoryPoint& point, const BatchScale& batch) {
  const int64_t global_batch = int64_t{point.micro_batch} * batch.accum * point.ranks;
  return BeyondNoiseScale(global_batch, batch.noise_scale) ? global_batch : 0;
}

// "full_shard on 4 ranks (310.20 MiB)", and "; global batch 512, 18x the
// noise scale of 28" inside the parentheses when it is beyond it.
std::string Suggestion(const MemoryPoint& point, const RankMemoryEstimate& estimate,
                       const BatchScale& batch) {
  std::string beyond;
  if (const int64_t global_batch = BatchBeyondNoiseScale(point, batch); global_batch > 0) {
    beyond = absl::StrFormat("; global batch %d, %.2gx the noise scale of %.3g", global_batch,
                             global_batch / batch.noise_scale, batch.noise_scale);
  }
  return absl::StrCat(plan::ShardingStrategyName(point.strategy), " on ", point.ranks,
                      point.ranks == 1 ? " rank" : " ranks", " (",
                      FormatBytes(estimate.total_bytes()), beyond, ")");
}

// Up to kMaxSuggestions fitting variations of `point`, fewest ranks first:
// the least sharded other strategy that fits on the same ranks, then each
// strategy that does not fit there at its smallest rank count ranks x 2^k.
// `beyond_noise_scale` is set when a suggestion's global batch exceeds the
// measured noise scale.
std::vector<std::string> FittingAlternatives(const MemoryPoint& point, int64_t budget_bytes,
                                             const BatchScale& batch, bool* beyond_noise_scale) {
  struct Fit {
    int ranks;
    int order;  // position in kSuggestedStrategies
    std::string text;
    bool beyond_noise_scale;
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
        fits.push_back({point.ranks, s, Suggestion(alternative, *here, batch),
                        BatchBeyondNoiseScale(alternative, batch) > 0});
        same_ranks_found = true;
      }
      continue;
    }
    for (int64_t ranks = int64_t{point.ranks} * 2; ranks <= kMaxSuggestedRanks; ranks *= 2) {
      alternative.ranks = static_cast<int>(ranks);
      absl::StatusOr<RankMemoryEstimate> estimate = EstimateRankMemory(alternative);
      if (!estimate.ok()) break;
      if (estimate->total_bytes() <= budget_bytes) {
        fits.push_back({alternative.ranks, s, Suggestion(alternative, *estimate, batch),
                        BatchBeyondNoiseScale(alternative, batch) > 0});
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
    if (fit.beyond_noise_scale) *beyond_noise_scale = true;
  }
  return suggestions;
}

// The cheapest activation mode (ActivationModesByCost) other than point's
// own that fits on the same strategy and ranks, with its estimate.
struct ModeFit {
  ActivationMode mode;
  RankMemoryEstimate estimate;
};
std::optional<ModeFit> CheapestFittingMode(const MemoryPoint& point, int64_t budget_bytes) {
  for (const ActivationMode& mode : ActivationModesByCost(point)) {
    if (mode == ActivationModeOf(point)) continue;
    MemoryPoint alternative = point;
    if (!ApplyActivationMode(mode, alternative).ok()) continue;
    absl::StatusOr<RankMemoryEstimate> estimate = EstimateRankMemory(alternative);
    if (estimate.ok() && estimate->total_bytes() <= budget_bytes) return ModeFit{mode, *estimate};
  }
  return std::nullopt;
}

// The leanest mode the point's model can take (the last of ActivationModesByCost).
std::optional<ActivationMode> LeanestMode(const MemoryPoint& point) {
  const std::vector<ActivationMode> modes = ActivationModesByCost(point);
  if (modes.empty()) return std::nullopt;
  return modes.back();
}

}  // namespace

// What a suggestion beyond the noise scale costs, and the way around it.
std::string BeyondNoiseScaleAdvice(const BatchScale& batch) {
  return absl::StrFormat(
      " Beyond the measured noise scale (%.3g sequences) a larger global batch shortens each "
      "step but barely the number of steps to a given loss (docs/batch-size.md): to keep the "
      "batch, lower micro_batch as the ranks grow (it needs less memory too).",
      batch.noise_scale);
}

absl::Status CheckFitsBudget(const MemoryPoint& point, int64_t budget_bytes,
                             const BatchScale& batch) {
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
      plan::ShardingStrategyName(point.strategy), " ", PrecisionName(point.precision),
      point.exact ? " --exact" : "", " on ", point.ranks, point.ranks == 1 ? " rank" : " ranks",
      " (", PointModelToString(point), " micro_batch=", point.micro_batch,
      point.accum > 1 ? absl::StrCat(" accum=", point.accum) : std::string(), ", activations ",
      ActivationModeName(ActivationModeOf(point)), ", ", estimate.num_params, " parameters) needs ",
      FormatBytes(total), " per rank, ", FormatBytes(total - budget_bytes), " (",
      Percent(total - budget_bytes, budget_bytes), "%) over the budget of ",
      FormatBytes(budget_bytes), "; the largest part is ", largest.name, ": ",
      FormatBytes(largest.bytes), " (", Percent(largest.bytes, total), "% of the total; ",
      absl::StrJoin(listed, ", "), ").");

  bool beyond_noise_scale = false;
  const std::vector<std::string> suggestions =
      FittingAlternatives(point, budget_bytes, batch, &beyond_noise_scale);
  const std::string here = absl::StrCat(plan::ShardingStrategyName(point.strategy), " on ",
                                        point.ranks, point.ranks == 1 ? " rank" : " ranks");
  if (!suggestions.empty()) {
    absl::StrAppend(&message, " Would fit: ", absl::StrJoin(suggestions, ", "), ".");
    // Activation memory is the other lever: recomputation instead of ranks.
    if (const std::optional<ModeFit> fit = CheapestFittingMode(point, budget_bytes)) {
      absl::StrAppend(&message, " Or, with ", ActivationModeFlags(fit->mode), ", ", here,
                      " would fit (", FormatBytes(fit->estimate.total_bytes()), ").");
    } else if (const std::optional<ActivationMode> leanest = LeanestMode(point);
               leanest.has_value() && *leanest != ActivationModeOf(point)) {
      MemoryPoint lean = point;
      if (ApplyActivationMode(*leanest, lean).ok()) {
        absl::StatusOr<RankMemoryEstimate> lean_estimate = EstimateRankMemory(lean);
        if (lean_estimate.ok()) {
          absl::StrAppend(&message, " No activation mode makes ", here, " fit (",
                          ActivationModeFlags(*leanest), " still needs ",
                          FormatBytes(lean_estimate->total_bytes()), ").");
        }
      }
    }
    if (beyond_noise_scale) absl::StrAppend(&message, BeyondNoiseScaleAdvice(batch));
    return absl::ResourceExhaustedError(message);
  }
  // No strategy fits with these activations. Sharding cannot shrink
  // activations and workspace; say so when they are what is left over, and
  // whether an activation mode would make some strategy fit.
  const int64_t unshardable = estimate.activation_bytes + estimate.workspace_bytes;
  absl::StrAppend(&message, " No strategy fits on up to ", kMaxSuggestedRanks,
                  " ranks: activations and workspace alone need ", FormatBytes(unshardable),
                  unshardable > budget_bytes / 2 ? " (sharding does not reduce them)" : "", ".");
  const char* kOtherwise = "reduce micro_batch or seq_len, or choose a smaller model.";
  if (const std::optional<ModeFit> fit = CheapestFittingMode(point, budget_bytes)) {
    absl::StrAppend(&message, " With ", ActivationModeFlags(fit->mode), ", ", here,
                    " would fit (", FormatBytes(fit->estimate.total_bytes()), "); otherwise ",
                    kOtherwise);
    return absl::ResourceExhaustedError(message);
  }
  for (const ActivationMode& mode : ActivationModesByCost(point)) {
    if (mode == ActivationModeOf(point)) continue;
    MemoryPoint alternative = point;
    if (!ApplyActivationMode(mode, alternative).ok()) continue;
    const std::vector<std::string> with_mode =
        FittingAlternatives(alternative, budget_bytes, batch, &beyond_noise_scale);
    if (!with_mode.empty()) {
      absl::StrAppend(&message, " With ", ActivationModeFlags(mode), ", would fit: ",
                      absl::StrJoin(with_mode, ", "), "; otherwise ", kOtherwise);
      if (beyond_noise_scale) absl::StrAppend(&message, BeyondNoiseScaleAdvice(batch));
      return absl::ResourceExhaustedError(message);
    }
  }
  absl::StrAppend(&message, " No activation mode fits either; ", kOtherwise);
  return absl::ResourceExhaustedError(message);
}

absl::StatusOr<MemoryPoint> MemoryPointFromTrainOptions(const TrainOptions& options) {
  MemoryPoint point;
  absl::StatusOr<ModelFamily> family = ParseModelFamily(options.model);
  if (!family.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mem_budget predicts --model=gpt and --model=llama only: ", family.status().message()));
  }
  point.family = *family;
  if (point.family == ModelFamily::kLlama) {
    point.llama = LlamaConfigOf(options);
  } else {
    point.config = GptConfigOf(options);
  }
  point.micro_batch = options.micro_batch;
  point.accum = options.accum;
  point.ranks = options.nproc;
  point.optimizer = options.optimizer == OptimizerKind::kAdamW
                        ? plan::OptimizerKind::kAdam
                        : plan::OptimizerKind::kSgdMomentum;
  const ShardingOptions& sharding = options.sharding;
  point.strategy = plan::ToPlanStrategy(sharding.strategy);
  point.group_size = sharding.strategy == Strategy::kHybridShard ? sharding.group_size : 0;
  point.prefetch_depth = sharding.prefetch_depth;
  point.min_unit_numel = sharding.min_unit_numel;
  // [Note: runtime precision] in sweep.cc.
  point.precision = PrecisionOf(sharding.precision);
  point.exact = sharding.precision.reduction == ReductionKind::kExact;
  point.memory_snapshots = options.buddy_every > 0;
  return point;
}

absl::Status CheckTrainingFitsBudget(const TrainOptions& options, int64_t budget_bytes) {
  FSDP_ASSIGN_OR_RETURN(MemoryPoint point, MemoryPointFromTrainOptions(options));
  return CheckFitsBudget(point, budget_bytes);
}

absl::StatusOr<std::optional<FittingModel>> LargestFittingFamilyModel(const MemoryPoint& point,
                                                                      int64_t budget_bytes) {
  if (point.family != ModelFamily::kGpt) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the largest model within a budget is searched in the GPT family (gpt_family.h) only, "
        "not for --model=",
        ModelFamilyName(point.family)));
  }
  std::optional<FittingModel> largest;
  const ActivationMode mode = ActivationModeOf(point.config);
  for (int width = kGptFamilyWidthStep; width <= kGptFamilyMaxWidth;
       width += kGptFamilyWidthStep) {
    MemoryPoint candidate = point;
    candidate.config = GptFamilyConfig(width, point.config.vocab, point.config.seq_len);
    candidate.config.compute_dtype = point.config.compute_dtype;
    if (mode.checkpoint_every > candidate.config.layers) continue;  // too few blocks for every:K
    FSDP_RETURN_IF_ERROR(ApplyActivationMode(mode, candidate.config));
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

absl::StatusOr<std::optional<FittingSeqLen>> LargestFittingSeqLen(const MemoryPoint& point,
                                                                  int64_t budget_bytes) {
  auto estimate_at = [&](int seq_len) {
    MemoryPoint candidate = point;
    SetPointSeqLen(candidate, seq_len);
    return EstimateRankMemory(candidate);
  };
  FSDP_ASSIGN_OR_RETURN(RankMemoryEstimate shortest, estimate_at(1));
  if (shortest.total_bytes() > budget_bytes) return std::optional<FittingSeqLen>();
  // Invariant: lo fits (best is its estimate), hi does not or is past the limit.
  int lo = 1;
  int64_t hi = int64_t{kMaxSearchedSeqLen} + 1;
  RankMemoryEstimate best = shortest;
  while (hi - lo > 1) {
    const int mid = static_cast<int>(lo + (hi - lo) / 2);
    FSDP_ASSIGN_OR_RETURN(RankMemoryEstimate estimate, estimate_at(mid));
    if (estimate.total_bytes() <= budget_bytes) {
      lo = mid;
      best = estimate;
    } else {
      hi = mid;
    }
  }
  return std::optional<FittingSeqLen>(FittingSeqLen{lo, best, lo == kMaxSearchedSeqLen});
}

}  // namespace report
}  // namespace fsdp
