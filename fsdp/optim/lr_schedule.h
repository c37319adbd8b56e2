// File: fsdp/optim/lr_schedule.h
//
// Learning rate as a function of the (0-based) optimizer step:
//
//   peak = base_lr * (linear_scaling ? global_batch / reference_batch : 1)
//   floor = min_lr * (same factor)
//   warmup (step < warmup_steps):
//     without linear scaling: lr = peak * (step + 1) / warmup_steps
//     with linear scaling (Goyal et al. 2017, gradual warmup): start at the
//       unscaled base_lr and rise linearly to the scaled peak:
//       lr = base_lr + (peak - base_lr) * (step + 1) / warmup_steps
//   decay (warmup_steps <= step < total_steps), with
//     progress = (step - warmup_steps) / (total_steps - warmup_steps) in [0, 1):
//     kCosine:   lr = floor + (peak - floor) * 0.5 (1 + cos(pi progress))
//     kLinear:   lr = peak + (floor - peak) * progress
//     kConstant: lr = peak
//   after total_steps: lr = floor (peak for kConstant).
//
//   FSDP_ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(options));
//   float lr = schedule.At(step);
#ifndef FSDP_OPTIM_LR_SCHEDULE_H_
#define FSDP_OPTIM_LR_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace fsdp {

enum class LrDecay { kCosine, kLinear, kConstant };

struct LrScheduleOptions {
  float base_lr = 3e-4f;
  float min_lr = 0.0f;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  LrDecay decay = LrDecay::kCosine;
  // The linear scaling rule: lr grows with the global batch.
  bool linear_scaling = false;
  int64_t global_batch = 1;
  int64_t reference_batch = 1;
};

class LrSchedule {
 public:
  // InvalidArgument for: base_lr <= 0, min_lr < 0 or > base_lr, warmup_steps
  // < 0, total_steps < 1 or < warmup_steps, non-positive batches when
  // linear_scaling is on.
  static absl::StatusOr<LrSchedule> Create(const LrScheduleOptions& options);

  float At(int64_t step) const;
  float peak_lr() const { return peak_; }
  float floor_lr() const { return floor_; }

 private:
  explicit LrSchedule(const LrScheduleOptions& options);
  LrScheduleOptions options_;
  float peak_;
  float floor_;
};

}  // namespace fsdp

#endif  // FSDP_OPTIM_LR_SCHEDULE_H_
