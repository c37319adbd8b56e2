// File: fsdp/nn/unit_order.h
//
// The order in which a Model's units may run within one step, as an explicit
// state machine shared by the models:
//
//   kIdle --Forward(0)--> kForward --Forward(1..n-1)--> kForwardDone
//   kForwardDone --Backward(n-1)--> kBackward --Backward(..0)--> kIdle
//
// Forward(0) is accepted in any state: it starts a new step and discards what
// an unfinished one saved (e.g. after a forward-only evaluation). Every other
// call out of order is FailedPrecondition naming the expected call.
#ifndef FSDP_NN_UNIT_ORDER_H_
#define FSDP_NN_UNIT_ORDER_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fsdp {

class UnitOrder {
 public:
  enum class Phase { kIdle, kForward, kForwardDone, kBackward };

  explicit UnitOrder(int num_units) : num_units_(num_units) {}

  int num_units() const { return num_units_; }

  absl::Status CheckForward(int unit) const {
    if (unit < 0 || unit >= num_units_) return OutOfRange("ForwardUnit", unit);
    if (unit == 0) return absl::OkStatus();
    if (phase_ != Phase::kForward || unit != next_unit_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ForwardUnit(", unit, ") called out of order; expected ", Expected()));
    }
    return absl::OkStatus();
  }
  void ForwardDone(int unit) {
    next_unit_ = unit + 1;
    phase_ = next_unit_ == num_units_ ? Phase::kForwardDone : Phase::kForward;
    if (phase_ == Phase::kForwardDone) next_unit_ = num_units_ - 1;
  }

  absl::Status CheckBackward(int unit) const {
    if (unit < 0 || unit >= num_units_) return OutOfRange("BackwardUnit", unit);
    const bool ok = (phase_ == Phase::kForwardDone || phase_ == Phase::kBackward) &&
                    unit == next_unit_;
    if (!ok) {
      return absl::FailedPreconditionError(absl::StrCat(
          "BackwardUnit(", unit, ") called out of order; expected ", Expected()));
    }
    return absl::OkStatus();
  }
  void BackwardDone(int unit) {
    next_unit_ = unit - 1;
    phase_ = unit == 0 ? Phase::kIdle : Phase::kBackward;
    if (phase_ == Phase::kIdle) next_unit_ = 0;
  }

  Phase phase() const { return phase_; }
  bool forward_done() const { return phase_ == Phase::kForwardDone; }

 private:
  absl::Status OutOfRange(const char* call, int unit) const {
    return absl::OutOfRangeError(
        absl::StrCat(call, "(", unit, "): the model has units 0..", num_units_ - 1));
  }
  std::string Expected() const {
    switch (phase_) {
      case Phase::kIdle: return "ForwardUnit(0) to start a step";
      case Phase::kForward:
        return absl::StrCat("ForwardUnit(", next_unit_, ") or ForwardUnit(0)");
      case Phase::kForwardDone:
      case Phase::kBackward:
        return absl::StrCat("BackwardUnit(", next_unit_, ") or ForwardUnit(0)");
    }
    return "";
  }

  int num_units_;
  Phase phase_ = Phase::kIdle;
  int next_unit_ = 0;
};

}  // namespace fsdp

#endif  // FSDP_NN_UNIT_ORDER_H_
