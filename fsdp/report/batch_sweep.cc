// File: fsdp/report/batch_sweep.cc
#include "fsdp/report/batch_sweep.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace report {

absl::StatusOr<BatchSplit> SplitGlobalBatch(int64_t global_batch, int micro_batch,
                                            int max_ranks) {
  if (micro_batch <= 0 || global_batch <= 0 || global_batch % micro_batch != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a global batch of ", global_batch, " sequences is not a positive multiple ",
                     "of the micro-batch (", micro_batch, "); choose batch sizes that are"));
  }
  const int64_t micro_batches = global_batch / micro_batch;
  BatchSplit split;
  for (int r = std::max(1, max_ranks); r >= 1; --r) {
    if (micro_batches % r == 0) {
      split.ranks = r;
      split.accum = static_cast<int>(micro_batches / r);
      break;
    }
  }
  return split;
}

int StepsForTokens(int64_t tokens, int64_t global_batch, int seq_len) {
  const int64_t per_step = global_batch * seq_len;
  return static_cast<int>(std::max<int64_t>(1, (tokens + per_step - 1) / per_step));
}

std::optional<LossPoint> FirstReaching(const std::vector<LossPoint>& curve, double target) {
  for (const LossPoint& point : curve) {
    if (point.loss <= target) return point;
  }
  return std::nullopt;
}

std::optional<double> StepsToReach(const std::vector<LossPoint>& curve, double target) {
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].loss > target) continue;
    if (i == 0) return static_cast<double>(curve[0].step);
    const LossPoint& above = curve[i - 1];
    const LossPoint& below = curve[i];
    const double fraction = (above.loss - target) / (above.loss - below.loss);
    return above.step + fraction * (below.step - above.step);
  }
  return std::nullopt;
}

absl::StatusOr<CriticalBatchFit> FitCriticalBatch(const std::vector<StepsAtBatch>& points) {
  // S = a + b x with x = 1 / B; S_min = a, B_crit = b / a.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::map<int64_t, bool> distinct;
  for (const StepsAtBatch& p : points) {
    if (p.batch <= 0) continue;
    const double x = 1.0 / static_cast<double>(p.batch);
    n += 1;
    sx += x;
    sy += p.steps;
    sxx += x * x;
    sxy += x * p.steps;
    distinct[p.batch] = true;
  }
  if (distinct.size() < 2) {
    return absl::InvalidArgumentError(
        "fitting the critical batch needs runs at two or more batch sizes that reached the "
        "target loss");
  }
  const double denominator = n * sxx - sx * sx;
  const double b = (n * sxy - sx * sy) / denominator;
  const double a = (sy - b * sx) / n;
  if (!(a > 0) && b > 0) {
    return absl::OutOfRangeError(
        "the steps to the target fall as fast as 1 / B across the whole sweep (perfect "
        "scaling): the critical batch is above the sweep's largest batch");
  }
  if (!(a > 0) || !(b > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the steps to the target do not fall with the batch as S_min (1 + B_crit / B) does "
        "(fit S_min ", a, ", S_min B_crit ", b, "); train longer or lower the target"));
  }
  return CriticalBatchFit{a, b / a};
}

std::optional<int64_t> DiminishingReturnsBatch(const std::vector<StepsAtBatch>& points) {
  std::map<int64_t, double> steps;
  for (const StepsAtBatch& p : points) steps[p.batch] = p.steps;
  for (const auto& [batch, s] : steps) {
    if (batch % 2 != 0) continue;
    auto half = steps.find(batch / 2);
    if (half == steps.end() || !(s > 0)) continue;
    if (half->second / s < 1.5) return batch;
  }
  return std::nullopt;
}

}  // namespace report
}  // namespace fsdp
