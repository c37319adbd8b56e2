// File: fsdp/train/exact_sums.cc
#include "fsdp/train/exact_sums.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/train/unit_collectives.h"

namespace fsdp {

absl::StatusOr<ExactStepState> ExactStepState::Create(const proto::ShardPlan& plan,
                                                      const std::vector<UnitSpec>& units,
                                                      int world_size, MemoryTracker& tracker) {
  ExactStepState s;
  int tensors = 0;
  for (const UnitSpec& unit : units) {
    s.first_tensor_.push_back(tensors);
    tensors += static_cast<int>(unit.params.size());
  }
  // Each plan parameter is its model unit's next one, in order.
  std::vector<int> next_param(units.size(), 0);
  for (const proto::UnitPlan& unit : plan.units()) {
    std::vector<PlanTensor> laid_out;
    for (const proto::ParamLayout& param : unit.params()) {
      const int m = param.source_unit_index();
      if (m < 0 || m >= static_cast<int>(units.size()) ||
          next_param[m] >= static_cast<int>(units[m].params.size()) ||
          units[m].params[next_param[m]].numel() != param.numel()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan unit ", unit.index(), " lays out parameter ", param.name(), " (", param.numel(),
            " elements, model unit ", m, ") that is not the model's next one there; the plan "
            "was built for other units"));
      }
      const int tensor = s.first_tensor_[m] + next_param[m]++;
      laid_out.push_back({param.offset(), param.offset() + param.numel(), tensor});
    }
    std::sort(laid_out.begin(), laid_out.end(),
              [](const PlanTensor& a, const PlanTensor& b) { return a.begin < b.begin; });
    s.plan_tensors_.push_back(std::move(laid_out));
  }
  for (size_t m = 0; m < units.size(); ++m) {
    if (next_param[m] != static_cast<int>(units[m].params.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan lays out ", next_param[m], " of model unit ", m, "'s ",
          units[m].params.size(), " parameters; it was built for other units"));
    }
  }
  s.exponents_.assign(tensors, kExactMinExponent);
  s.max_abs_.assign(tensors, 0.0f);
  const int64_t gathered = int64_t{world_size} * (tensors + 1);
  FSDP_ASSIGN_OR_RETURN(s.gathered_,
                        tracker.Allocate<float>(MemoryCategory::kCommBuffers, gathered,
                                                "exact maxima exchange (every rank's)"));
  FSDP_ASSIGN_OR_RETURN(s.loss_sum_, tracker.Allocate<int64_t>(MemoryCategory::kCommBuffers, 1,
                                                               "exact loss all-reduce"));
  return s;
}

void ExactStepState::BeginPass() {
  std::fill(max_abs_.begin(), max_abs_.end(), 0.0f);
  losses_.clear();
}

ExactGradSums ExactStepState::GradSumsFor(int model_unit) {
  const int first = first_tensor_[model_unit];
  const int end = model_unit + 1 < static_cast<int>(first_tensor_.size())
                      ? first_tensor_[model_unit + 1]
                      : num_tensors();
  return {absl::MakeConstSpan(exponents_).subspan(first, end - first),
          absl::MakeSpan(max_abs_).subspan(first, end - first)};
}

void ExactStepState::AddSequenceLosses(absl::Span<const float> losses) {
  losses_.insert(losses_.end(), losses.begin(), losses.end());
}

absl::Status ExactStepState::AgreeOnMaxima(comm::Communicator& world, absl::Duration timeout,
                                           CommWaitClock& clock) {
  const int n = num_tensors() + 1;  // the tensors', then the loss's
  float largest_loss = 0.0f;
  for (float l : losses_) largest_loss = LargerMagnitude(largest_loss, l);
  const absl::Span<float> all = gathered_.span();
  const absl::Span<float> mine = all.subspan(int64_t{world.rank()} * n, n);
  std::copy(max_abs_.begin(), max_abs_.end(), mine.begin());
  mine[n - 1] = largest_loss;
  FSDP_ASSIGN_OR_RETURN(PendingCollective gather,
                        PostAllGather(world, DtypeSpan(mine), DtypeSpan(all),
                                      "exact maxima all-gather"));
  FSDP_RETURN_IF_ERROR(gather.Finish(timeout, clock, "exact maxima all-gather"));
  for (int r = 0; r < world.size(); ++r) {
    for (int t = 0; t < num_tensors(); ++t) {
      max_abs_[t] = LargerMagnitude(max_abs_[t], all[int64_t{r} * n + t]);
    }
  }
  return absl::OkStatus();
}

bool ExactStepState::RaiseOverflowedExponents() {
  bool raised = false;
  for (int t = 0; t < num_tensors(); ++t) {
    if (ExactSumStateOf(max_abs_[t], exponents_[t]) != ExactSumState::kOverflow) continue;
    exponents_[t] = ExactExponentFor(max_abs_[t], 0);
    raised = true;
  }
  return raised;
}

std::vector<ExactSegment> ExactStepState::SegmentsOf(int plan_unit) const {
  std::vector<ExactSegment> segments;
  for (const PlanTensor& t : plan_tensors_[plan_unit]) {
    segments.push_back({t.begin, t.end, exponents_[t.tensor], max_abs_[t.tensor]});
  }
  return segments;
}

absl::StatusOr<float> ExactStepState::AgreedLoss(comm::Communicator& world,
                                                 int64_t global_sequences,
                                                 absl::Duration timeout, CommWaitClock& clock) {
  const int n = num_tensors() + 1;
  float largest = 0.0f;
  for (int r = 0; r < world.size(); ++r) {
    largest = LargerMagnitude(largest, gathered_[int64_t{r} * n + n - 1]);
  }
  if (!std::isfinite(largest)) return std::numeric_limits<float>::quiet_NaN();
  const int exponent = ExactExponentFor(largest, 0);
  loss_sum_[0] = ExactSumOfValues(exponent, losses_);
  FSDP_ASSIGN_OR_RETURN(PendingCollective sum,
                        PostAllReduceSum(world, DtypeSpan(loss_sum_.span().subspan(0, 1))));
  FSDP_RETURN_IF_ERROR(sum.Finish(timeout, clock, "exact loss all-reduce"));
  float loss = 0.0f;
  FSDP_RETURN_IF_ERROR(ExactSumToFloats(exponent, loss_sum_.span().subspan(0, 1),
                                        global_sequences, largest,
                                        absl::MakeSpan(&loss, 1)));
  return loss;
}

absl::Status ExactStepState::SetExponents(absl::Span<const int> exponents) {
  if (static_cast<int>(exponents.size()) != num_tensors()) {
    return absl::InvalidArgumentError(absl::StrCat(
        exponents.size(), " exact exponents for a model of ", num_tensors(),
        " parameter tensors: they were saved for another model"));
  }
  for (int e : exponents) {
    if (e < kExactMinExponent || e > kExactMaxExponent) {
      return absl::InvalidArgumentError(absl::StrCat(
          "exact exponent ", e, " outside [", kExactMinExponent, ", ", kExactMaxExponent, "]"));
    }
  }
  exponents_.assign(exponents.begin(), exponents.end());
  return absl::OkStatus();
}

double ExactStepState::SquaredNormOfLocalSums(int plan_unit, ConstDtypeSpan sums,
                                              int64_t divisor) const {
  const absl::Span<const int64_t> values = sums.as<int64_t>();
  double total = 0.0;
  for (const PlanTensor& t : plan_tensors_[plan_unit]) {
    const double factor = std::ldexp(1.0 / static_cast<double>(divisor),
                                     exponents_[t.tensor] - kExactFractionBits);
    for (int64_t i = t.begin; i < t.end; ++i) {
      const double g = static_cast<double>(values[i]) * factor;
      total += g * g;
    }
  }
  return total;
}

void ExactStepState::ChooseNextExponents() {
  for (int t = 0; t < num_tensors(); ++t) {
    if (!std::isfinite(max_abs_[t])) continue;
    exponents_[t] = ExactExponentFor(max_abs_[t], kExactHeadroomBits);
  }
}

}  // namespace fsdp
