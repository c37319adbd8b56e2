// File: fsdp/train/unit_optimizers.cc
#include "fsdp/train/unit_optimizers.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/status_macros.h"
#include "fsdp/optim/adamw.h"
#include "fsdp/optim/sgd.h"

namespace fsdp {
namespace {

// Holds one optimizer of type `Opt` (AdamW or Sgd) per unit. Both count
// their own steps; a mismatch with the trainer's count means a unit was
// skipped or stepped twice, which would silently desynchronize AdamW's bias
// correction across units.
template <typename Opt, typename Options>
class PerUnit : public UnitOptimizer {
 public:
  explicit PerUnit(Options options) : options_(options) {}

  absl::Status AddUnit(int unit, int64_t numel, MemoryTracker& tracker) override {
    if (unit != static_cast<int>(per_unit_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer units must be added in order 0, 1, ...; got unit ", unit, " after ",
          per_unit_.size()));
    }
    FSDP_ASSIGN_OR_RETURN(Opt opt, Opt::Create(options_, numel, &tracker));
    per_unit_.push_back(std::move(opt));
    return absl::OkStatus();
  }

  absl::Status StepUnit(int unit, absl::Span<float> params, absl::Span<const float> grads,
                        float lr, int step) override {
    if (unit < 0 || unit >= static_cast<int>(per_unit_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer has no unit ", unit));
    }
    Opt& opt = per_unit_[unit];
    if (opt.step() + 1 != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "unit ", unit, "'s optimizer is at step ", opt.step(), " but is asked for step ", step,
          "; every unit must be stepped exactly once per optimizer step"));
    }
    return opt.Step(lr, params, grads);
  }

 private:
  Options options_;
  std::vector<Opt> per_unit_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<UnitOptimizer>> MakeUnitOptimizer(OptimizerKind kind,
                                                                 float weight_decay) {
  if (kind == OptimizerKind::kAdamW) {
    AdamWOptions options;
    options.weight_decay = weight_decay;
    FSDP_RETURN_IF_ERROR(ValidateAdamWOptions(options));
    return std::unique_ptr<UnitOptimizer>(new PerUnit<AdamW, AdamWOptions>(options));
  }
  SgdOptions options;
  options.weight_decay = weight_decay;
  FSDP_RETURN_IF_ERROR(ValidateSgdOptions(options));
  return std::unique_ptr<UnitOptimizer>(new PerUnit<Sgd, SgdOptions>(options));
}

}  // namespace fsdp
