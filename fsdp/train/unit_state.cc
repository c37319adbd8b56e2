// File: fsdp/train/unit_state.cc
//
// The parameter and gradient state machines of one unit, side by side; see
// [Note: parameter state machine] and [Note: gradient state machine] in
// unit_state.h. What each collective sends is in unit_collectives.cc.
#include "fsdp/train/unit_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/dtype.h"
#include "fsdp/nn/bf16_convert.h"
#include "fsdp/optim/grad_clip.h"

namespace fsdp {

const char* ParamStateName(ParamState state) {
  switch (state) {
    case ParamState::kSharded:
      return "kSharded";
    case ParamState::kGathering:
      return "kGathering";
    case ParamState::kUnsharded:
      return "kUnsharded";
  }
  return "unknown";
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
    case GradState::kAllReducingAcrossGroups:
      return "kAllReducingAcrossGroups";
    case GradState::kReduced:
      return "kReduced";
  }
  return "unknown";
}

UnitRuntime UnitRuntime::For(Strategy strategy, int world_size, int world_rank,
                             int shard_group_size, bool bf16_params, bool bf16_grads) {
  UnitRuntime r;
  r.strategy = strategy;
  r.shard_params = strategy == Strategy::kFullShard || strategy == Strategy::kHybridShard;
  r.shard_grads = r.shard_params || strategy == Strategy::kShardGradOp;
  r.shard_optimizer = strategy != Strategy::kNoShard;
  r.bf16_params = bf16_params;
  r.bf16_grads = bf16_params && bf16_grads;
  r.master_shard = r.shard_params || bf16_params;
  r.world_size = world_size;
  r.shard_group_size = shard_group_size;
  r.shard_rank = world_rank % shard_group_size;
  r.replica_group_count = world_size / shard_group_size;
  return r;
}

absl::StatusOr<std::unique_ptr<ShardedUnit>> ShardedUnit::Create(
    const proto::UnitPlan& plan, const UnitRuntime& runtime, MemoryTracker& tracker,
    UnitOptimizer& optimizer, const std::function<void(absl::Span<float>)>& init,
    absl::Span<float> grad_workspace) {
  std::unique_ptr<ShardedUnit> unit(new ShardedUnit(plan, runtime, tracker));
  const std::string label = unit->Label();
  if (runtime.bf16_grads) {
    if (static_cast<int64_t>(grad_workspace.size()) < plan.padded_numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": bf16 gradients need an fp32 gradient workspace of at least the unit's ",
          plan.padded_numel(), " padded elements; got ", grad_workspace.size()));
    }
    unit->grad_workspace_ = grad_workspace;
  }
  if (runtime.bf16_params) {
    FSDP_RETURN_IF_ERROR(unit->CreateBf16Params(init));
  } else {
    FSDP_RETURN_IF_ERROR(unit->CreateFp32Params(init));
  }
  if (runtime.bf16_grads) {
    // [Note: bf16 gradients] The reduced shard is bf16 too: its own home
    // when gradients are sharded, else this rank's slot of the whole ones.
    if (runtime.shard_grads) {
      FSDP_ASSIGN_OR_RETURN(unit->grad_shard16_, tracker.Allocate<uint16_t>(
                                                     MemoryCategory::kGradients,
                                                     plan.shard_numel(),
                                                     absl::StrCat(label, " bf16 grad shard")));
    } else {
      FSDP_ASSIGN_OR_RETURN(unit->grads16_, tracker.Allocate<uint16_t>(
                                                MemoryCategory::kGradients, plan.padded_numel(),
                                                absl::StrCat(label, " bf16 unsharded grads")));
    }
    FSDP_RETURN_IF_ERROR(unit->ClearGrads());
    FSDP_RETURN_IF_ERROR(optimizer.AddUnit(
        plan.index(), runtime.shard_optimizer ? plan.shard_numel() : plan.flat_numel(), tracker));
    return unit;
  }
  if (!runtime.shard_grads) {
    FSDP_ASSIGN_OR_RETURN(unit->grads_,
                          tracker.Allocate<float>(MemoryCategory::kGradients, plan.padded_numel(),
                                                  absl::StrCat(label, " unsharded grads")));
  }
  FSDP_ASSIGN_OR_RETURN(
      unit->grad_shard_,
      tracker.Allocate<float>(
          runtime.shard_grads ? MemoryCategory::kGradients : MemoryCategory::kCommBuffers,
          plan.shard_numel(), absl::StrCat(label, " grad shard")));
  FSDP_RETURN_IF_ERROR(optimizer.AddUnit(
      plan.index(), runtime.shard_optimizer ? plan.shard_numel() : plan.flat_numel(), tracker));
  return unit;
}

absl::Status ShardedUnit::CreateFp32Params(const std::function<void(absl::Span<float>)>& init) {
  const std::string label = Label();
  FSDP_ASSIGN_OR_RETURN(params_,
                        tracker_.Allocate<float>(MemoryCategory::kParameters, plan_.padded_numel(),
                                                 absl::StrCat(label, " unsharded params")));
  init(params_.span());
  if (runtime_.master_shard) {
    FSDP_ASSIGN_OR_RETURN(master_,
                          tracker_.Allocate<float>(MemoryCategory::kParameters, plan_.shard_numel(),
                                                   absl::StrCat(label, " fp32 param shard")));
    auto slice = params_.span().subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                                        plan_.shard_numel());
    std::copy(slice.begin(), slice.end(), master_.span().begin());
  }
  if (runtime_.shard_params) {
    params_.Reset();
    param_state_ = ParamState::kSharded;
  }
  return absl::OkStatus();
}

// [Note: bf16 parameter layout] The master holds the fp32 values; the bf16
// buffers are derived from it (RefreshBf16Params), here and after every
// optimizer step or checkpoint load.
absl::Status ShardedUnit::CreateBf16Params(const std::function<void(absl::Span<float>)>& init) {
  const std::string label = Label();
  const int64_t padded = plan_.padded_numel();
  FloatBuffer staging;  // the whole unit's fp32 values when the master is a shard
  absl::Span<const float> whole;  // the whole unit's fp32 values
  if (!runtime_.shard_optimizer) {
    // no_shard: the master is the whole unit; initialize it in place.
    FSDP_ASSIGN_OR_RETURN(master_, tracker_.Allocate<float>(MemoryCategory::kParameters, padded,
                                                           absl::StrCat(label, " fp32 master")));
    init(master_.span());
    whole = master_.span();
  } else {
    absl::Span<float> values;
    if (runtime_.bf16_grads) {
      // The gradient workspace, free until the first backward.
      values = grad_workspace_.subspan(0, padded);
      std::fill(values.begin(), values.end(), 0.0f);
    } else {
      FSDP_ASSIGN_OR_RETURN(
          staging,
          tracker_.Allocate<float>(MemoryCategory::kGradients, padded,
                                   absl::StrCat(label, " initialization staging (gradient "
                                                       "memory, unused before the first "
                                                       "backward)")));
      values = staging.span();
    }
    init(values);
    FSDP_ASSIGN_OR_RETURN(master_,
                          tracker_.Allocate<float>(MemoryCategory::kParameters, plan_.shard_numel(),
                                                   absl::StrCat(label, " fp32 param shard")));
    auto slice = values.subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                                plan_.shard_numel());
    std::copy(slice.begin(), slice.end(), master_.span().begin());
    whole = values;
  }
  if (runtime_.shard_params) {
    FSDP_ASSIGN_OR_RETURN(shard16_, tracker_.Allocate<uint16_t>(
                                        MemoryCategory::kParameters, plan_.shard_numel(),
                                        absl::StrCat(label, " bf16 param shard")));
    RefreshBf16Params();
    param_state_ = ParamState::kSharded;
    return absl::OkStatus();
  }
  FSDP_ASSIGN_OR_RETURN(params16_,
                        tracker_.Allocate<uint16_t>(MemoryCategory::kParameters, padded,
                                                    absl::StrCat(label, " bf16 params")));
  // Whole from the start (kUnsharded), as in the fp32 layout: every rank
  // initialized the same values, so every slot is what a gather would bring.
  ToBf16(params16_.data(), whole.data(), padded);
  return absl::OkStatus();
}

absl::Span<uint16_t> ShardedUnit::Bf16OfMaster() {
  const int64_t n = static_cast<int64_t>(master_.size());
  if (runtime_.shard_params) return shard16_.span().subspan(0, n);
  if (!runtime_.shard_optimizer) return params16_.span().subspan(0, n);
  return params16_.span().subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(), n);
}

void ShardedUnit::RefreshBf16Params() {
  ToBf16(Bf16OfMaster().data(), master_.data(), static_cast<int64_t>(master_.size()));
}

std::string ShardedUnit::Label() const {
  return absl::StrCat("unit ", plan_.index(), " (", plan_.name(), ")");
}

absl::Status ShardedUnit::Fail(const char* call, const char* needed, const char* current) const {
  return absl::FailedPreconditionError(absl::StrCat(Label(), ": ", call, " needs ", needed,
                                                    " but the unit is in ", current));
}

absl::Span<float> ShardedUnit::MutableParamShard() {
  const int64_t begin = int64_t{runtime_.shard_rank} * plan_.shard_numel();
  if (!runtime_.master_shard) return params_.span().subspan(begin, plan_.shard_numel());
  // no_shard's master (bf16_params) is the whole unit.
  if (!runtime_.shard_optimizer) return master_.span().subspan(begin, plan_.shard_numel());
  return master_.span();
}

absl::Span<const float> ShardedUnit::ParamShard() const {
  return const_cast<ShardedUnit*>(this)->MutableParamShard();
}

// ---------------------------------------------------------------------------
// Parameter transitions.

absl::Status ShardedUnit::Unshard(const UnitComms& comms) {
  if (param_state_ != ParamState::kSharded) return absl::OkStatus();  // done or pending
  if (runtime_.bf16_params) {
    // full_shard / hybrid: the kept bf16 shard into a fresh gathered buffer;
    // shard_optimizer / shard_grad_op: in place, this rank's slot refreshed
    // by the optimizer step.
    absl::Span<const uint16_t> shard;
    if (runtime_.shard_params) {
      FSDP_ASSIGN_OR_RETURN(params16_, tracker_.Allocate<uint16_t>(
                                           MemoryCategory::kParameters, plan_.padded_numel(),
                                           absl::StrCat(Label(), " gathered bf16 params")));
      shard = shard16_.span();
    } else {
      shard = absl::Span<const uint16_t>(params16_.span())
                  .subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                           plan_.shard_numel());
    }
    FSDP_ASSIGN_OR_RETURN(param_gather_,
                          PostAllGatherBf16(*comms.shard_group, shard, params16_.span(),
                                            absl::StrCat(Label(), " parameter all-gather")));
    param_state_ = ParamState::kGathering;
    return absl::OkStatus();
  }
  if (runtime_.shard_params) {
    FSDP_ASSIGN_OR_RETURN(params_, tracker_.Allocate<float>(
                                       MemoryCategory::kParameters, plan_.padded_numel(),
                                       absl::StrCat(Label(), " gathered params")));
  }
  FSDP_ASSIGN_OR_RETURN(param_gather_,
                        PostAllGather(*comms.shard_group, MutableParamShard(), params_.span(),
                                      absl::StrCat(Label(), " parameter all-gather")));
  param_state_ = ParamState::kGathering;
  return absl::OkStatus();
}

absl::Status ShardedUnit::WaitForUnshard(absl::Duration timeout, CommWaitClock& clock) {
  if (param_state_ == ParamState::kUnsharded) return absl::OkStatus();
  if (param_state_ != ParamState::kGathering) {
    return Fail("WaitForUnshard", "parameter state kGathering or kUnsharded (call Unshard first)",
                ParamStateName(param_state_));
  }
  FSDP_RETURN_IF_ERROR(
      param_gather_.Finish(timeout, clock, absl::StrCat(Label(), " parameter all-gather")));
  param_state_ = ParamState::kUnsharded;
  return absl::OkStatus();
}

absl::Status ShardedUnit::Reshard() {
  if (param_state_ != ParamState::kUnsharded) {
    return Fail("Reshard", "parameter state kUnsharded", ParamStateName(param_state_));
  }
  if (runtime_.shard_params) {
    params_.Reset();
    params16_.Reset();
  }
  param_state_ = ParamState::kSharded;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Gradient transitions.

absl::StatusOr<BackwardGrads> ShardedUnit::GradsForBackward() {
  if (grad_state_ != GradState::kIdle && grad_state_ != GradState::kAccumulated) {
    return Fail("GradsForBackward", "gradient state kIdle or kAccumulated (a backward ran while "
                "the unit's reduction was in flight)", GradStateName(grad_state_));
  }
  if (runtime_.bf16_grads) {
    // The first MarkBackwardDone of the step writes every element.
    if (grads16_.empty() && plan_.padded_numel() > 0) {
      FSDP_ASSIGN_OR_RETURN(grads16_, tracker_.AllocateUninitialized<uint16_t>(
                                          MemoryCategory::kGradients, plan_.padded_numel(),
                                          absl::StrCat(Label(), " bf16 unsharded grads")));
    }
    // The workspace holds one micro-batch of one unit: always written fresh.
    const absl::Span<float> workspace = grad_workspace_.subspan(0, plan_.padded_numel());
    if (grad_state_ == GradState::kIdle) {
      // The model writes the bf16 gradients; the workspace is its scratch.
      ZeroUnwrittenGrads(grads16_.span());
      return BackwardGrads{workspace, GradWrite::kOverwrite, grads16_.span()};
    }
    ZeroUnwrittenGrads(workspace);
    return BackwardGrads{workspace, GradWrite::kOverwrite};
  }
  if (grads_.empty() && plan_.padded_numel() > 0) {
    FSDP_ASSIGN_OR_RETURN(grads_, tracker_.AllocateUninitialized<float>(
                                      MemoryCategory::kGradients, plan_.padded_numel(),
                                      absl::StrCat(Label(), " unsharded grads")));
  }
  if (grad_state_ == GradState::kAccumulated) {
    return BackwardGrads{grads_.span(), GradWrite::kAdd};
  }
  ZeroUnwrittenGrads(grads_.span());
  return BackwardGrads{grads_.span(), GradWrite::kOverwrite};
}

template <typename T>
void ShardedUnit::ZeroUnwrittenGrads(absl::Span<T> grads) const {
  int64_t written_end = 0;
  for (const proto::SourceUnit& source : plan_.source_units()) {
    std::fill(grads.begin() + written_end, grads.begin() + source.offset(), T{0});
    written_end = source.offset() + source.numel();
  }
  std::fill(grads.begin() + written_end, grads.end(), T{0});
}

absl::Status ShardedUnit::MarkBackwardDone() {
  if (grad_state_ != GradState::kIdle && grad_state_ != GradState::kAccumulated) {
    return Fail("MarkBackwardDone", "gradient state kIdle or kAccumulated",
                GradStateName(grad_state_));
  }
  if (runtime_.bf16_grads && grad_state_ == GradState::kAccumulated) {
    // [Note: bf16 gradients] A later micro-batch's fp32 gradients added
    // into the bf16 ones in fp32 and rounded (the first wrote them itself).
    AccumulateToBf16(grads16_.data(), grad_workspace_.data(), plan_.padded_numel());
  }
  grad_state_ = GradState::kAccumulated;
  return absl::OkStatus();
}

absl::Status ShardedUnit::StartReduction(const UnitComms& comms) {
  if (grad_state_ != GradState::kAccumulated) {
    return Fail("StartReduction", "gradient state kAccumulated", GradStateName(grad_state_));
  }
  if (runtime_.bf16_grads) {
    FSDP_ASSIGN_OR_RETURN(grad_reduction_, PostReduceScatterSumBf16InPlace(
                                               *comms.shard_group, grads16_.span(),
                                               absl::StrCat(Label(), " gradient reduce-scatter")));
    grad_state_ = GradState::kReduceScattering;
    return absl::OkStatus();
  }
  FSDP_ASSIGN_OR_RETURN(grad_reduction_,
                        PostReduceScatterSum(*comms.shard_group, grads_.span(),
                                             grad_shard_.span(),
                                             absl::StrCat(Label(), " gradient reduce-scatter")));
  grad_state_ = GradState::kReduceScattering;
  return absl::OkStatus();
}

absl::Status ShardedUnit::FinishReduceScatter(const UnitComms& comms, absl::Duration timeout,
                                              CommWaitClock& clock) {
  if (grad_state_ != GradState::kReduceScattering) {
    return Fail("FinishReduceScatter", "gradient state kReduceScattering",
                GradStateName(grad_state_));
  }
  FSDP_RETURN_IF_ERROR(grad_reduction_.Finish(
      timeout, clock, absl::StrCat(Label(), " gradient reduce-scatter")));
  if (runtime_.bf16_grads) return FinishReduceScatterBf16(comms);
  if (runtime_.shard_grads) grads_.Reset();  // the shard is their home now
  if (runtime_.strategy == Strategy::kNoShard) {
    // [Note: why sum then scale] in docs/data-parallel.md: the same scale of
    // the same shard as every sharded strategy, then back to full.
    Average(grad_shard_.span());
    FSDP_ASSIGN_OR_RETURN(grad_reduction_,
                          PostAllGather(*comms.shard_group, grad_shard_.span(), grads_.span(),
                                        absl::StrCat(Label(), " gradient all-gather")));
    grad_state_ = GradState::kAllGathering;
  } else if (runtime_.replica_group_count > 1) {
    FSDP_ASSIGN_OR_RETURN(grad_reduction_,
                          PostAllReduceSum(*comms.replica_group, grad_shard_.span()));
    grad_state_ = GradState::kAllReducingAcrossGroups;
  } else {
    Average(grad_shard_.span());
    grad_state_ = GradState::kReduced;
  }
  return absl::OkStatus();
}

// [Note: bf16 gradients] This rank's chunk of grads16_ holds its sum.
absl::Status ShardedUnit::FinishReduceScatterBf16(const UnitComms& comms) {
  const absl::Span<uint16_t> own = grads16_.span().subspan(
      int64_t{runtime_.shard_rank} * plan_.shard_numel(), plan_.shard_numel());
  if (runtime_.shard_grads) {
    std::copy(own.begin(), own.end(), grad_shard16_.span().begin());
    grads16_.Reset();  // the shard is their home now
  }
  if (runtime_.strategy == Strategy::kNoShard) {
    AverageBf16(own);
    FSDP_ASSIGN_OR_RETURN(grad_reduction_,
                          PostAllGatherBf16(*comms.shard_group, own, grads16_.span(),
                                            absl::StrCat(Label(), " gradient all-gather")));
    grad_state_ = GradState::kAllGathering;
  } else if (runtime_.replica_group_count > 1) {
    FSDP_ASSIGN_OR_RETURN(grad_reduction_,
                          PostAllReduceSumBf16(*comms.replica_group, grad_shard16_.span()));
    grad_state_ = GradState::kAllReducingAcrossGroups;
  } else {
    AverageBf16(ReducedShardBf16());
    grad_state_ = GradState::kReduced;
  }
  return absl::OkStatus();
}

absl::Span<uint16_t> ShardedUnit::ReducedShardBf16() {
  if (runtime_.shard_grads) return grad_shard16_.span();
  return grads16_.span().subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                                 plan_.shard_numel());
}

// One rank has nothing to average: x * 1 is x, and x's bf16 rounding is x.
void ShardedUnit::Average(absl::Span<float> shard) const {
  if (runtime_.world_size == 1) return;
  ScaleInPlace(shard, 1.0f / static_cast<float>(runtime_.world_size));
}

void ShardedUnit::AverageBf16(absl::Span<uint16_t> shard) const {
  if (runtime_.world_size == 1) return;
  const float average = 1.0f / static_cast<float>(runtime_.world_size);
  ScaleBf16InPlace(shard.data(), static_cast<int64_t>(shard.size()), average);
}

absl::Status ShardedUnit::FinishReduction(absl::Duration timeout, CommWaitClock& clock) {
  switch (grad_state_) {
    case GradState::kReduced:
      return absl::OkStatus();
    case GradState::kAllGathering:
      FSDP_RETURN_IF_ERROR(grad_reduction_.Finish(
          timeout, clock, absl::StrCat(Label(), " gradient all-gather")));
      break;
    case GradState::kAllReducingAcrossGroups: {
      FSDP_RETURN_IF_ERROR(grad_reduction_.Finish(
          timeout, clock, absl::StrCat(Label(), " cross-group gradient all-reduce")));
      if (runtime_.bf16_grads) {
        AverageBf16(grad_shard16_.span());
        break;
      }
      Average(grad_shard_.span());
      break;
    }
    default:
      return Fail("FinishReduction",
                  "gradient state kAllGathering, kAllReducingAcrossGroups or kReduced",
                  GradStateName(grad_state_));
  }
  grad_state_ = GradState::kReduced;
  return absl::OkStatus();
}

absl::Status ShardedUnit::ClearGrads() {
  if (grad_state_ != GradState::kReduced && grad_state_ != GradState::kIdle) {
    return Fail("ClearGrads", "gradient state kReduced or kIdle", GradStateName(grad_state_));
  }
  // No zeroing pass: the next step's first backward writes every element
  // (GradWrite::kOverwrite), and the collectives write their outputs whole.
  pending_grad_scale_ = 1.0f;
  grad_state_ = GradState::kIdle;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Optimizer.

absl::StatusOr<OwnedGrads> ShardedUnit::OwnedReducedGrads() {
  if (grad_state_ != GradState::kReduced) {
    return Fail("OwnedReducedGrads", "gradient state kReduced", GradStateName(grad_state_));
  }
  OwnedGrads owned;
  if (runtime_.bf16_grads) {
    owned.is_bf16 = true;
    owned.bf16 = ReducedShardBf16();
  } else if (runtime_.strategy == Strategy::kNoShard) {
    owned.fp32 = grads_.span().subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                                       plan_.shard_numel());
  } else {
    owned.fp32 = grad_shard_.span();
  }
  return owned;
}

absl::Status ShardedUnit::ScaleReducedGrads(float scale) {
  if (grad_state_ != GradState::kReduced) {
    return Fail("ScaleReducedGrads", "gradient state kReduced", GradStateName(grad_state_));
  }
  // Applied by the optimizer as it reads each gradient: no pass of its own.
  pending_grad_scale_ = scale;
  return absl::OkStatus();
}

absl::Status ShardedUnit::StepOptimizer(UnitOptimizer& optimizer, int unit_index, float lr,
                                        int step) {
  if (grad_state_ != GradState::kReduced) {
    return Fail("StepOptimizer", "gradient state kReduced", GradStateName(grad_state_));
  }
  if (!runtime_.shard_optimizer) {
    if (param_state_ != ParamState::kUnsharded) {
      return Fail("StepOptimizer", "parameter state kUnsharded", ParamStateName(param_state_));
    }
    if (!runtime_.bf16_params) {
      return optimizer.StepUnit(unit_index, params_.span().subspan(0, plan_.flat_numel()),
                                grads_.span().subspan(0, plan_.flat_numel()),
                                pending_grad_scale_, lr, step);
    }
    const absl::Span<float> master = master_.span().subspan(0, plan_.flat_numel());
    if (runtime_.bf16_grads) {
      return optimizer.StepUnitBf16(
          unit_index, master,
          absl::Span<const uint16_t>(grads16_.span()).subspan(0, plan_.flat_numel()),
          pending_grad_scale_, Bf16OfMaster().subspan(0, plan_.flat_numel()), lr, step);
    }
    FSDP_RETURN_IF_ERROR(optimizer.StepUnit(unit_index, master,
                                            grads_.span().subspan(0, plan_.flat_numel()),
                                            pending_grad_scale_, lr, step));
    RefreshBf16Params();
    return absl::OkStatus();
  }
  const ParamState needed = runtime_.shard_params ? ParamState::kSharded : ParamState::kUnsharded;
  if (param_state_ != needed) {
    return Fail("StepOptimizer",
                runtime_.shard_params ? "parameter state kSharded (Reshard after backward)"
                                      : "parameter state kUnsharded",
                ParamStateName(param_state_));
  }
  if (runtime_.bf16_grads) {
    FSDP_RETURN_IF_ERROR(optimizer.StepUnitBf16(unit_index, MutableParamShard(),
                                                ReducedShardBf16(), pending_grad_scale_,
                                                Bf16OfMaster(), lr, step));
  } else {
    FSDP_RETURN_IF_ERROR(optimizer.StepUnit(unit_index, MutableParamShard(), grad_shard_.span(),
                                            pending_grad_scale_, lr, step));
    if (runtime_.bf16_params) RefreshBf16Params();
  }
  // shard_optimizer / shard_grad_op: the unsharded copy is stale outside this
  // rank's shard until the all-gather of the updated shards.
  param_state_ = ParamState::kSharded;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Checkpoints.

int64_t ShardedUnit::owned_flat_begin() const {
  return std::min(int64_t{runtime_.shard_rank} * plan_.shard_numel(), plan_.flat_numel());
}

int64_t ShardedUnit::owned_numel() const {
  return std::min(owned_flat_begin() + plan_.shard_numel(), plan_.flat_numel()) -
         owned_flat_begin();
}

absl::StatusOr<std::vector<StateRegion>> ShardedUnit::SaveRegions(UnitOptimizer& optimizer,
                                                                  int64_t model_offset) {
  if (param_state_ == ParamState::kGathering) {
    return Fail("SaveRegions", "parameter state kSharded or kUnsharded", "kGathering");
  }
  const int64_t begin = owned_flat_begin();
  const int64_t n = owned_numel();
  std::vector<StateRegion> regions;
  regions.push_back({"param", model_offset + begin, MutableParamShard().subspan(0, n)});
  FSDP_ASSIGN_OR_RETURN(std::vector<absl::Span<float>> state,
                        optimizer.MutableUnitState(plan_.index()));
  const std::vector<std::string> names = optimizer.StateNames();
  for (size_t i = 0; i < state.size(); ++i) {
    // A sharded optimizer's state covers the shard; no_shard's the unit.
    absl::Span<float> owned =
        runtime_.shard_optimizer ? state[i].subspan(0, n) : state[i].subspan(begin, n);
    regions.push_back({names[i], model_offset + begin, owned});
  }
  return regions;
}

absl::StatusOr<std::vector<StateRegion>> ShardedUnit::LoadRegions(UnitOptimizer& optimizer,
                                                                  int64_t model_offset) {
  if (runtime_.shard_optimizer) return SaveRegions(optimizer, model_offset);
  // no_shard: every rank holds the whole unit.
  std::vector<StateRegion> regions;
  FloatBuffer& whole = runtime_.bf16_params ? master_ : params_;
  regions.push_back({"param", model_offset, whole.span().subspan(0, plan_.flat_numel())});
  FSDP_ASSIGN_OR_RETURN(std::vector<absl::Span<float>> state,
                        optimizer.MutableUnitState(plan_.index()));
  const std::vector<std::string> names = optimizer.StateNames();
  for (size_t i = 0; i < state.size(); ++i) regions.push_back({names[i], model_offset, state[i]});
  return regions;
}

absl::Status ShardedUnit::FinishLoad(UnitOptimizer& optimizer, int64_t optimizer_step) {
  if (param_state_ == ParamState::kGathering) {
    return Fail("FinishLoad", "parameter state kSharded or kUnsharded", "kGathering");
  }
  // Padding is zero in every buffer of an uninterrupted run (its gradients
  // are zero, so its moments and values stay zero).
  const int64_t n = owned_numel();
  if (runtime_.shard_optimizer) {
    absl::Span<float> shard = MutableParamShard();
    std::fill(shard.begin() + n, shard.end(), 0.0f);
    FSDP_ASSIGN_OR_RETURN(std::vector<absl::Span<float>> state,
                          optimizer.MutableUnitState(plan_.index()));
    for (absl::Span<float> s : state) std::fill(s.begin() + n, s.end(), 0.0f);
  } else {
    FloatBuffer& whole = runtime_.bf16_params ? master_ : params_;
    std::fill(whole.span().begin() + plan_.flat_numel(), whole.span().end(), 0.0f);
  }
  if (runtime_.bf16_params) RefreshBf16Params();
  FSDP_RETURN_IF_ERROR(optimizer.SetUnitStep(plan_.index(), optimizer_step));
  // Only the shard is current: shard_optimizer / shard_grad_op gather the
  // rest at the next forward, as after any optimizer step.
  if (runtime_.shard_optimizer && !runtime_.shard_params) param_state_ = ParamState::kSharded;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Views.

absl::StatusOr<absl::Span<const float>> ShardedUnit::UnshardedParams() const {
  if (param_state_ != ParamState::kUnsharded) {
    return Fail("UnshardedParams", "parameter state kUnsharded", ParamStateName(param_state_));
  }
  if (runtime_.bf16_params) {
    return absl::FailedPreconditionError(
        absl::StrCat(Label(), ": UnshardedParams: the parameters are bf16 (bf16_params); use "
                              "UnshardedParamsBf16"));
  }
  return absl::Span<const float>(params_.span()).subspan(0, plan_.flat_numel());
}

absl::StatusOr<absl::Span<const uint16_t>> ShardedUnit::UnshardedParamsBf16() const {
  if (param_state_ != ParamState::kUnsharded) {
    return Fail("UnshardedParamsBf16", "parameter state kUnsharded",
                ParamStateName(param_state_));
  }
  if (!runtime_.bf16_params) {
    return absl::FailedPreconditionError(absl::StrCat(
        Label(), ": UnshardedParamsBf16: the parameters are fp32; use UnshardedParams"));
  }
  return absl::Span<const uint16_t>(params16_.span()).subspan(0, plan_.flat_numel());
}

int64_t ShardedUnit::gathered_param_numel() const {
  if (!runtime_.shard_params) return 0;
  return runtime_.bf16_params ? params16_.size() : params_.size();
}

int64_t ShardedUnit::unsharded_grad_numel() const {
  if (!runtime_.shard_grads) return 0;
  return runtime_.bf16_grads ? grads16_.size() : grads_.size();
}

}  // namespace fsdp
