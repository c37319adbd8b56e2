// File: fsdp/optim/gradient_noise_scale.h
//
// The gradient noise scale B_noise = tr(Sigma) / |G|^2 (McCandlish et al.,
// "An Empirical Model of Large-Batch Training", 2018, appendix A.1): the
// batch size around which a bigger batch stops cutting the number of steps.
// G is the true gradient, Sigma the covariance of one example's gradient.
//
// A gradient averaged over B examples has E|g_B|^2 = |G|^2 + tr(Sigma) / B,
// so squared norms measured at two batch sizes b < B give unbiased
// estimates of both terms:
//
//   |G|^2     ~ (B |g_B|^2 - b |g_b|^2) / (B - b)
//   tr(Sigma) ~ (|g_b|^2 - |g_B|^2) / (1/b - 1/B)
//
// A data-parallel step has both for free: every rank's local gradient
// before the reduction (b = its share of the batch) and the averaged one
// (B = the global batch). The mean of the ranks' local squared norms is the
// |g_b|^2 used (the same expectation, less noise). Under accumulation the
// first micro-batch's gradient is the small batch.
//
// One step's estimates are noisy (either can be negative), and their ratio
// is biased, so numerator and denominator are averaged separately before
// dividing, as the paper does:
//   - smoothed: exponential moving averages with factor `smoothing` (0.95 by
//     default, about the last 20 steps), bias-corrected as Adam corrects its
//     moments, so the value follows the run;
//   - run mean: plain means since the first step added, with a standard error
//     from the steps' spread (delta method for the ratio), for reports that
//     compare runs.
//
//   GradientNoiseScale noise;
//   noise.Add({.small_sq_norm = mean_local, .small_batch = 8,
//              .big_sq_norm = global, .big_batch = 32});
//   if (auto b = noise.smoothed()) print(*b);
//
// Batch sizes are in sequences; the scale comes out in the same unit.
#ifndef FSDP_OPTIM_GRADIENT_NOISE_SCALE_H_
#define FSDP_OPTIM_GRADIENT_NOISE_SCALE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fsdp {

// One step's two squared norms and the batch sizes they were measured at.
struct GradientNormPair {
  double small_sq_norm = 0;  // mean over ranks of |g_b|^2
  int64_t small_batch = 0;   // b
  double big_sq_norm = 0;    // |g_B|^2 of the averaged gradient
  int64_t big_batch = 0;     // B
};

// One step's unbiased estimates of |G|^2 and tr(Sigma).
struct NoiseTerms {
  double true_sq_norm = 0;  // |G|^2
  double trace = 0;         // tr(Sigma)
};

// InvalidArgument unless 0 < b < B and both norms are finite and >= 0.
absl::StatusOr<NoiseTerms> EstimateNoiseTerms(const GradientNormPair& pair);

// A noise scale with its standard error (0 when fewer than two steps).
struct NoiseScaleValue {
  double scale = 0;
  double standard_error = 0;
  int64_t steps = 0;
};

class GradientNoiseScale {
 public:
  explicit GradientNoiseScale(double smoothing = 0.95) : smoothing_(smoothing) {}

  // Adds one step. Errors as EstimateNoiseTerms (nothing is added then).
  absl::Status Add(const GradientNormPair& pair);

  // The bias-corrected moving averages' ratio; nullopt before the first step
  // or while the averaged |G|^2 is not positive (the noise dominates so far).
  std::optional<double> smoothed() const;

  // The ratio of the plain means since the first step, with its standard
  // error; nullopt as for smoothed().
  std::optional<NoiseScaleValue> run_mean() const;

  int64_t steps() const { return steps_; }

 private:
  double smoothing_;
  int64_t steps_ = 0;
  double ema_true_ = 0, ema_trace_ = 0, ema_weight_ = 0;
  // Welford running means and co-moments of (trace, true_sq_norm).
  double mean_true_ = 0, mean_trace_ = 0;
  double m2_true_ = 0, m2_trace_ = 0, co_moment_ = 0;
};

// Why a run with `ranks` ranks and `accum` micro-batches per step has no
// estimate ("" if it has one): one rank without accumulation measures the
// gradient at a single batch size.
std::string NoNoiseScaleReason(int ranks, int accum);

// A measured noise scale as the reports take it (--noise_scale, in
// sequences): finite and >= 0, 0 meaning unknown. InvalidArgument naming
// the flag otherwise.
absl::Status ValidateNoiseScaleFlag(double noise_scale);

// Whether `global_batch` sequences are beyond a known noise scale (never
// when it is 0, unknown): past it more batch cuts the steps to a given loss
// by less than it adds to each.
bool BeyondNoiseScale(int64_t global_batch, double noise_scale);

}  // namespace fsdp

#endif  // FSDP_OPTIM_GRADIENT_NOISE_SCALE_H_
