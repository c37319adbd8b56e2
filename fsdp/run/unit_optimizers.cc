// File: fsdp/run/unit_optimizers.cc
#include "fsdp/run/unit_optimizers.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/optim/adamw.h"
#include "fsdp/optim/sgd.h"

namespace fsdp {
namespace {

// Holds one optimizer of type `Opt` (AdamW or Sgd) per unit. Both count
// their own steps; a mismatch with the trainer's count means a unit was
// skipped or stepped twice, which would silently desynchronize AdamW's bias
// correction across units.
// What a checkpoint stores of each optimizer.
struct AdamWTraits {
  static constexpr char kKind[] = "adamw";
  static std::vector<std::string> StateNames(const AdamWOptions&) {
    return {"exp_avg", "exp_avg_sq"};
  }
  static std::vector<absl::Span<float>> State(AdamW& opt) {
    return {opt.mutable_first_moment(), opt.mutable_second_moment()};
  }
};
struct SgdTraits {
  static constexpr char kKind[] = "sgd";
  static std::vector<std::string> StateNames(const SgdOptions& options) {
    if (options.momentum == 0.0f) return {};
    return {"momentum"};
  }
  static std::vector<absl::Span<float>> State(Sgd& opt) {
    if (opt.options().momentum == 0.0f) return {};
    return {opt.mutable_momentum_buffer()};
  }
};

template <typename Opt, typename Options, typename Traits>
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
                        float grad_scale, float lr, int step) override {
    FSDP_ASSIGN_OR_RETURN(Opt * opt, UnitForStep(unit, step));
    return opt->Step(lr, params, grads, grad_scale);
  }

  absl::Status StepUnitBf16(int unit, absl::Span<float> params, absl::Span<const uint16_t> grads,
                            float grad_scale, absl::Span<uint16_t> params_bf16, float lr,
                            int step) override {
    FSDP_ASSIGN_OR_RETURN(Opt * opt, UnitForStep(unit, step));
    return opt->StepBf16(lr, params, grads, grad_scale, params_bf16);
  }

  std::string kind() const override { return Traits::kKind; }
  std::vector<std::string> StateNames() const override { return Traits::StateNames(options_); }
  absl::StatusOr<std::vector<absl::Span<float>>> MutableUnitState(int unit) override {
    FSDP_RETURN_IF_ERROR(CheckUnit(unit));
    return Traits::State(per_unit_[unit]);
  }
  absl::Status SetUnitStep(int unit, int64_t step) override {
    FSDP_RETURN_IF_ERROR(CheckUnit(unit));
    per_unit_[unit].set_step(step);
    return absl::OkStatus();
  }
  float weight_decay() const override { return options_.weight_decay; }

 private:
  // Unit `unit`'s optimizer, if `step` is the one it takes next.
  absl::StatusOr<Opt*> UnitForStep(int unit, int step) {
    FSDP_RETURN_IF_ERROR(CheckUnit(unit));
    Opt& opt = per_unit_[unit];
    if (opt.step() + 1 != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "unit ", unit, "'s optimizer is at step ", opt.step(), " but is asked for step ", step,
          "; every unit must be stepped exactly once per optimizer step"));
    }
    return &opt;
  }

  absl::Status CheckUnit(int unit) const {
    if (unit < 0 || unit >= static_cast<int>(per_unit_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer has no unit ", unit));
    }
    return absl::OkStatus();
  }

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
    return std::unique_ptr<UnitOptimizer>(new PerUnit<AdamW, AdamWOptions, AdamWTraits>(options));
  }
  SgdOptions options;
  options.weight_decay = weight_decay;
  FSDP_RETURN_IF_ERROR(ValidateSgdOptions(options));
  return std::unique_ptr<UnitOptimizer>(new PerUnit<Sgd, SgdOptions, SgdTraits>(options));
}

}  // namespace fsdp
