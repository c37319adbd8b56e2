#include "fsdp/optim/gradient_noise_scale.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fsdp {

absl::StatusOr<NoiseTerms> EstimateNoiseTerms(const GradientNormPair& pair) {
  if (pair.small_batch <= 0 || pair.big_batch <= pair.small_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient noise scale: the batch sizes must satisfy 0 < small < big, got small ",
        pair.small_batch, " and big ", pair.big_batch));
  }
  for (double sq : {pair.small_sq_norm, pair.big_sq_norm}) {
    if (!std::isfinite(sq) || sq < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient noise scale: a squared gradient norm must be finite and >= 0, got ", sq));
    }
  }
  const double b = static_cast<double>(pair.small_batch);
  const double big = static_cast<double>(pair.big_batch);
  NoiseTerms terms;
  terms.true_sq_norm = (big * pair.big_sq_norm - b * pair.small_sq_norm) / (big - b);
  terms.trace = (pair.small_sq_norm - pair.big_sq_norm) / (1.0 / b - 1.0 / big);
  return terms;
}

absl::Status GradientNoiseScale::Add(const GradientNormPair& pair) {
  absl::StatusOr<NoiseTerms> terms = EstimateNoiseTerms(pair);
  if (!terms.ok()) return terms.status();
  ema_true_ = smoothing_ * ema_true_ + (1 - smoothing_) * terms->true_sq_norm;
  ema_trace_ = smoothing_ * ema_trace_ + (1 - smoothing_) * terms->trace;
  ema_weight_ = smoothing_ * ema_weight_ + (1 - smoothing_);
  ++steps_;
  const double n = static_cast<double>(steps_);
  const double d_true = terms->true_sq_norm - mean_true_;
  const double d_trace = terms->trace - mean_trace_;
  mean_true_ += d_true / n;
  mean_trace_ += d_trace / n;
  m2_true_ += d_true * (terms->true_sq_norm - mean_true_);
  m2_trace_ += d_trace * (terms->trace - mean_trace_);
  co_moment_ += d_trace * (terms->true_sq_norm - mean_true_);
  return absl::OkStatus();
}

std::optional<double> GradientNoiseScale::smoothed() const {
  // The bias correction divides both averages by ema_weight_; it cancels in
  // the ratio but not in the sign test, which needs only ema_true_ > 0.
  if (steps_ == 0 || !(ema_true_ > 0)) return std::nullopt;
  return ema_trace_ / ema_true_;
}

std::optional<NoiseScaleValue> GradientNoiseScale::run_mean() const {
  if (steps_ == 0 || !(mean_true_ > 0)) return std::nullopt;
  NoiseScaleValue value;
  value.steps = steps_;
  value.scale = mean_trace_ / mean_true_;
  if (steps_ >= 2) {
    // Variances of the two means and their covariance, then the delta
    // method for the ratio of means.
    const double n = static_cast<double>(steps_);
    const double var_true = m2_true_ / (n - 1) / n;
    const double var_trace = m2_trace_ / (n - 1) / n;
    const double cov = co_moment_ / (n - 1) / n;
    const double r = value.scale;
    const double var_ratio =
        (var_trace - 2 * r * cov + r * r * var_true) / (mean_true_ * mean_true_);
    value.standard_error = std::sqrt(std::max(0.0, var_ratio));
  }
  return value;
}

std::string NoNoiseScaleReason(int ranks, int accum) {
  if (ranks > 1 || accum > 1) return "";
  return "no gradient noise scale: one rank without accumulation measures the gradient at a "
         "single batch size (run 2 or more ranks, or --accum=2 or more)";
}

absl::Status ValidateNoiseScaleFlag(double noise_scale) {
  if (noise_scale >= 0 && std::isfinite(noise_scale)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--noise_scale=", noise_scale, ": give the measured noise scale in sequences, or 0"));
}

bool BeyondNoiseScale(int64_t global_batch, double noise_scale) {
  return noise_scale > 0 && global_batch > noise_scale;
}

}  // namespace fsdp
