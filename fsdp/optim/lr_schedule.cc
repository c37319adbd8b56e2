// File: fsdp/optim/lr_schedule.cc
#include "fsdp/optim/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fsdp {

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleOptions& o) {
  if (!(o.base_lr > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("base_lr must be positive, got ", o.base_lr));
  }
  if (!(o.min_lr >= 0.0f && o.min_lr <= o.base_lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_lr must lie in [0, base_lr = ", o.base_lr, "], got ", o.min_lr));
  }
  if (o.warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("warmup_steps must be non-negative, got ", o.warmup_steps));
  }
  if (o.total_steps < 1 || o.total_steps < o.warmup_steps) {
    return absl::InvalidArgumentError(absl::StrCat("total_steps (", o.total_steps,
                                                   ") must be at least 1 and at least "
                                                   "warmup_steps (",
                                                   o.warmup_steps, ")"));
  }
  if (o.linear_scaling && (o.global_batch < 1 || o.reference_batch < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linear scaling needs positive global_batch and reference_batch, got ", o.global_batch,
        " and ", o.reference_batch));
  }
  return LrSchedule(o);
}

LrSchedule::LrSchedule(const LrScheduleOptions& o) : options_(o) {
  const double factor =
      o.linear_scaling ? static_cast<double>(o.global_batch) / o.reference_batch : 1.0;
  peak_ = static_cast<float>(o.base_lr * factor);
  floor_ = static_cast<float>(o.min_lr * factor);
}

float LrSchedule::At(int64_t step) const {
  const LrScheduleOptions& o = options_;
  if (step < 0) step = 0;
  if (step < o.warmup_steps) {
    const double fraction = static_cast<double>(step + 1) / o.warmup_steps;
    const double start = o.linear_scaling ? o.base_lr : 0.0;
    return static_cast<float>(start + (peak_ - start) * fraction);
  }
  if (o.decay == LrDecay::kConstant) return peak_;
  if (step >= o.total_steps) return floor_;
  const double progress =
      static_cast<double>(step - o.warmup_steps) / static_cast<double>(o.total_steps - o.warmup_steps);
  if (o.decay == LrDecay::kLinear) return static_cast<float>(peak_ + (floor_ - peak_) * progress);
  return static_cast<float>(floor_ + (peak_ - floor_) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace fsdp
