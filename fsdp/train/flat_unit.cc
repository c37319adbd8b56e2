// File: fsdp/train/flat_unit.cc
//
// The gradient state machine of one unit; see [Note: gradient state machine]
// in flat_unit.h. The collectives themselves are in grad_collectives.cc.
#include "fsdp/train/flat_unit.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/status_macros.h"
#include "fsdp/train/grad_collectives.h"

namespace fsdp {

absl::StatusOr<FlatUnitLayout> MakeFlatUnitLayout(const UnitSpec& spec, int unit_index,
                                                  int world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size must be at least 1, got ", world_size));
  }
  FlatUnitLayout layout;
  layout.unit_index = unit_index;
  layout.name = spec.name;
  layout.numel = spec.numel();
  layout.world_size = world_size;
  if (layout.numel <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unit ", unit_index, " (", spec.name, ") has no parameters; a unit must hold at "
        "least one parameter element"));
  }
  layout.shard_numel = (layout.numel + world_size - 1) / world_size;
  layout.padded_numel = layout.shard_numel * world_size;
  return layout;
}

const char* GradStateName(GradState state) {
  switch (state) {
    case GradState::kIdle:
      return "kIdle";
    case GradState::kAccumulated:
      return "kAccumulated";
    case GradState::kReduceScattering:
      return "kReduceScattering";
    case GradState::kAllGathering:
      return "kAllGathering";
    case GradState::kReduced:
      return "kReduced";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<FlatUnit>> FlatUnit::Create(const FlatUnitLayout& layout,
                                                           MemoryTracker& tracker) {
  const std::string label = absl::StrCat("unit ", layout.unit_index, " (", layout.name, ")");
  FSDP_ASSIGN_OR_RETURN(
      FloatBuffer params,
      tracker.Allocate<float>(MemoryCategory::kParameters, layout.padded_numel,
                              absl::StrCat(label, " flat params")));
  FSDP_ASSIGN_OR_RETURN(
      FloatBuffer grads,
      tracker.Allocate<float>(MemoryCategory::kGradients, layout.padded_numel,
                              absl::StrCat(label, " flat grads")));
  FSDP_ASSIGN_OR_RETURN(
      FloatBuffer grad_shard,
      tracker.Allocate<float>(MemoryCategory::kCommBuffers, layout.shard_numel,
                              absl::StrCat(label, " grad shard")));
  return std::unique_ptr<FlatUnit>(
      new FlatUnit(layout, std::move(params), std::move(grads), std::move(grad_shard)));
}

FlatUnit::FlatUnit(FlatUnitLayout layout, FloatBuffer params, FloatBuffer grads,
                   FloatBuffer grad_shard)
    : layout_(std::move(layout)),
      params_(std::move(params)),
      grads_(std::move(grads)),
      grad_shard_(std::move(grad_shard)) {}

FlatUnit::~FlatUnit() {
  // A failed collective reports its error at once; a stuck one (peer gone)
  // gets a bounded drain, after which the process is expected to exit.
  if (pending_ != nullptr) pending_->Wait(kDrainTimeout).IgnoreError();
}

absl::Span<const float> FlatUnit::params() const {
  return params_.span().subspan(0, layout_.numel);
}
absl::Span<float> FlatUnit::mutable_params() {
  return params_.span().subspan(0, layout_.numel);
}
absl::Span<const float> FlatUnit::grads() const {
  return grads_.span().subspan(0, layout_.numel);
}
absl::Span<float> FlatUnit::mutable_grads() {
  return grads_.span().subspan(0, layout_.numel);
}

absl::Status FlatUnit::CheckState(const char* call, GradState expected) const {
  if (grad_state_ == expected) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "unit ", layout_.unit_index, " (", layout_.name, "): ", call, " needs gradient state ",
      GradStateName(expected), " but the unit is in ", GradStateName(grad_state_)));
}

absl::Status FlatUnit::MarkBackwardDone() {
  if (grad_state_ != GradState::kIdle && grad_state_ != GradState::kAccumulated) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unit ", layout_.unit_index, " (", layout_.name,
        "): MarkBackwardDone needs gradient state kIdle or kAccumulated but the unit is in ",
        GradStateName(grad_state_), " (a backward ran while its reduction was in flight)"));
  }
  grad_state_ = GradState::kAccumulated;
  return absl::OkStatus();
}

absl::Status FlatUnit::StartReduction(comm::Communicator& comm) {
  FSDP_RETURN_IF_ERROR(CheckState("StartReduction", GradState::kAccumulated));
  FSDP_ASSIGN_OR_RETURN(pending_,
                        PostGradReduceScatter(comm, grads_.span(), grad_shard_.span()));
  grad_state_ = GradState::kReduceScattering;
  return absl::OkStatus();
}

absl::Status FlatUnit::FinishReduceScatter(comm::Communicator& comm, float shard_scale,
                                           absl::Duration timeout, CommWaitClock& clock) {
  FSDP_RETURN_IF_ERROR(CheckState("FinishReduceScatter", GradState::kReduceScattering));
  FSDP_RETURN_IF_ERROR(clock.Wait(
      *pending_, timeout,
      absl::StrCat("unit ", layout_.unit_index, " (", layout_.name, ") gradient reduce-scatter")));
  pending_.reset();
  ScaleGradShard(grad_shard_.span(), shard_scale);
  FSDP_ASSIGN_OR_RETURN(pending_, PostGradAllGather(comm, grad_shard_.span(), grads_.span()));
  grad_state_ = GradState::kAllGathering;
  return absl::OkStatus();
}

absl::Status FlatUnit::FinishAllGather(absl::Duration timeout, CommWaitClock& clock) {
  FSDP_RETURN_IF_ERROR(CheckState("FinishAllGather", GradState::kAllGathering));
  FSDP_RETURN_IF_ERROR(clock.Wait(
      *pending_, timeout,
      absl::StrCat("unit ", layout_.unit_index, " (", layout_.name, ") gradient all-gather")));
  pending_.reset();
  grad_state_ = GradState::kReduced;
  return absl::OkStatus();
}

absl::Status FlatUnit::ZeroGrads() {
  if (grad_state_ != GradState::kReduced && grad_state_ != GradState::kIdle) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unit ", layout_.unit_index, " (", layout_.name,
        "): ZeroGrads needs gradient state kReduced or kIdle but the unit is in ",
        GradStateName(grad_state_)));
  }
  std::fill(grads_.span().begin(), grads_.span().end(), 0.0f);
  grad_state_ = GradState::kIdle;
  return absl::OkStatus();
}

}  // namespace fsdp
