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
#include "fsdp/train/dtype_kernels.h"

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
    case GradState::kSummedExactly:
      return "kSummedExactly";
  }
  return "unknown";
}

UnitRuntime UnitRuntime::For(Strategy strategy, int world_size, int world_rank,
                             int shard_group_size, const PrecisionPolicy& precision) {
  UnitRuntime r;
  r.strategy = strategy;
  r.shard_params = strategy == Strategy::kFullShard || strategy == Strategy::kHybridShard;
  r.shard_grads = r.shard_params || strategy == Strategy::kShardGradOp;
  r.shard_optimizer = strategy != Strategy::kNoShard;
  r.precision = precision;
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
  FSDP_RETURN_IF_ERROR(ValidatePrecisionPolicy(runtime.precision));
  std::unique_ptr<ShardedUnit> unit(new ShardedUnit(plan, runtime, tracker));
  const std::string label = unit->Label();
  if (runtime.grads_through_workspace()) {
    if (static_cast<int64_t>(grad_workspace.size()) < plan.padded_numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": ", comm::DtypeName(runtime.precision.reduce_dtype),
          " gradients need an fp32 gradient workspace of at least the unit's ",
          plan.padded_numel(), " padded elements; got ", grad_workspace.size()));
    }
    unit->grad_workspace_ = grad_workspace.subspan(0, plan.padded_numel());
  }
  FSDP_RETURN_IF_ERROR(unit->CreateParams(init));
  const comm::Dtype grad_dtype = runtime.precision.reduce_dtype;
  if (!runtime.shard_grads) {
    FSDP_ASSIGN_OR_RETURN(unit->grads_, DtypeBuffer::Allocate(
                                            tracker, MemoryCategory::kGradients, grad_dtype,
                                            plan.padded_numel(),
                                            absl::StrCat(label, " unsharded grads")));
  }
  // Where the reduce-scatter leaves this rank's sum, for good: the gradient
  // shard (sharded gradients: their home), else a staging shard, or (in
  // place, [Note: bf16 gradients]) this rank's chunk of the whole gradients.
  if (runtime.shard_grads || !runtime.grads_through_workspace()) {
    FSDP_ASSIGN_OR_RETURN(
        unit->grad_shard_,
        DtypeBuffer::Allocate(
            tracker,
            runtime.shard_grads ? MemoryCategory::kGradients : MemoryCategory::kCommBuffers,
            grad_dtype, plan.shard_numel(), absl::StrCat(label, " grad shard")));
    unit->reduced_shard_ = unit->grad_shard_.span();
  } else {
    unit->reduced_shard_ = unit->grads_.span().subspan(
        int64_t{runtime.shard_rank} * plan.shard_numel(), plan.shard_numel());
  }
  FSDP_RETURN_IF_ERROR(optimizer.AddUnit(
      plan.index(), runtime.shard_optimizer ? plan.shard_numel() : plan.flat_numel(), tracker));
  return unit;
}

// [Note: bf16 parameter layout] The fp32 values are initialized once; a
// separate master holds them and the parameters are derived from it
// (ParamsOfMaster), here and after every optimizer step or checkpoint load.
absl::Status ShardedUnit::CreateParams(const std::function<void(absl::Span<float>)>& init) {
  const std::string label = Label();
  const int64_t padded = plan_.padded_numel();
  const comm::Dtype param_dtype = runtime_.precision.param_dtype;
  FloatBuffer staging;
  absl::Span<float> values;  // the whole unit's fp32 values
  if (!runtime_.own_master()) {
    // The parameters are their own master: initialized in place.
    FSDP_ASSIGN_OR_RETURN(params_, DtypeBuffer::Allocate(tracker_, MemoryCategory::kParameters,
                                                         param_dtype, padded,
                                                         absl::StrCat(label, " unsharded params")));
    values = params_.span().as<float>();
  } else if (!runtime_.shard_optimizer) {
    // no_shard: the master is the whole unit; initialized in place.
    FSDP_ASSIGN_OR_RETURN(master_, tracker_.Allocate<float>(MemoryCategory::kParameters, padded,
                                                           absl::StrCat(label, " fp32 master")));
    values = master_.span();
  } else if (runtime_.grads_through_workspace()) {
    // The gradient workspace, free until the first backward.
    values = grad_workspace_;
    std::fill(values.begin(), values.end(), 0.0f);
  } else {
    FSDP_ASSIGN_OR_RETURN(
        staging, tracker_.Allocate<float>(MemoryCategory::kGradients, padded,
                                          absl::StrCat(label, " initialization staging (gradient "
                                                              "memory, unused before the first "
                                                              "backward)")));
    values = staging.span();
  }
  init(values);
  if (runtime_.own_master() && runtime_.shard_optimizer) {
    FSDP_ASSIGN_OR_RETURN(master_,
                          tracker_.Allocate<float>(MemoryCategory::kParameters, plan_.shard_numel(),
                                                   absl::StrCat(label, " fp32 param shard")));
    auto slice = values.subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                                plan_.shard_numel());
    std::copy(slice.begin(), slice.end(), master_.span().begin());
  }
  if (runtime_.shard_params) {
    kept_shard_ = master_.span();
    if (runtime_.precision.separate_master()) {
      FSDP_ASSIGN_OR_RETURN(param_shard_, DtypeBuffer::Allocate(
                                              tracker_, MemoryCategory::kParameters, param_dtype,
                                              plan_.shard_numel(),
                                              absl::StrCat(label, " kept param shard")));
      kept_shard_ = param_shard_.span();
    }
  } else if (runtime_.own_master()) {
    FSDP_ASSIGN_OR_RETURN(params_, DtypeBuffer::Allocate(tracker_, MemoryCategory::kParameters,
                                                         param_dtype, padded,
                                                         absl::StrCat(label, " unsharded params")));
  }
  master_values_ = LocateMasterValues();
  params_of_master_ = LocateParamsOfMaster();
  if (runtime_.shard_params) {
    StoreFloats(params_of_master_, master_values_);
    param_state_ = ParamState::kSharded;
    return absl::OkStatus();
  }
  // Whole from the start (kUnsharded): every rank initialized the same
  // values, so every slot is what a gather would bring.
  StoreFloats(params_.span(), values);
  return absl::OkStatus();
}

absl::Span<float> ShardedUnit::LocateMasterValues() {
  if (runtime_.own_master()) return master_.span();
  const absl::Span<float> params = params_.span().as<float>();
  if (!runtime_.shard_optimizer) return params;
  return params.subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(), plan_.shard_numel());
}

DtypeSpan ShardedUnit::LocateParamsOfMaster() {
  if (runtime_.shard_params) return kept_shard_;
  const int64_t n = static_cast<int64_t>(master_values_.size());
  if (!runtime_.shard_optimizer) return params_.span().subspan(0, n);
  return params_.span().subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(), n);
}

std::string ShardedUnit::Label() const {
  return absl::StrCat("unit ", plan_.index(), " (", plan_.name(), ")");
}

absl::Status ShardedUnit::Fail(const char* call, const char* needed, const char* current) const {
  return absl::FailedPreconditionError(absl::StrCat(Label(), ": ", call, " needs ", needed,
                                                    " but the unit is in ", current));
}

absl::Span<float> ShardedUnit::MutableParamShard() {
  const absl::Span<float> master = master_values_;
  // no_shard's values are the whole unit.
  if (!runtime_.shard_optimizer) {
    return master.subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(), plan_.shard_numel());
  }
  return master;
}

absl::Span<const float> ShardedUnit::ParamShard() const {
  return const_cast<ShardedUnit*>(this)->MutableParamShard();
}

// ---------------------------------------------------------------------------
// Parameter transitions.

absl::Status ShardedUnit::Unshard(const UnitComms& comms) {
  if (param_state_ != ParamState::kSharded) return absl::OkStatus();  // done or pending
  // full_shard / hybrid: the kept shard into a fresh gathered buffer;
  // shard_optimizer / shard_grad_op: in place, this rank's slot refreshed
  // by the optimizer step.
  DtypeSpan shard;
  if (runtime_.shard_params) {
    FSDP_ASSIGN_OR_RETURN(params_, DtypeBuffer::Allocate(tracker_, MemoryCategory::kParameters,
                                                         runtime_.precision.param_dtype,
                                                         plan_.padded_numel(),
                                                         absl::StrCat(Label(), " gathered params")));
    shard = kept_shard_;
  } else {
    shard = params_.span().subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                                   plan_.shard_numel());
  }
  FSDP_ASSIGN_OR_RETURN(param_gather_,
                        PostAllGather(*comms.shard_group, shard, params_.span(),
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
  if (runtime_.shard_params) params_.Reset();
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
  // The first backward of the step writes every element.
  if (grads_.empty() && plan_.padded_numel() > 0) {
    FSDP_ASSIGN_OR_RETURN(grads_, DtypeBuffer::AllocateUninitialized(
                                      tracker_, MemoryCategory::kGradients,
                                      runtime_.precision.reduce_dtype, plan_.padded_numel(),
                                      absl::StrCat(Label(), " unsharded grads")));
  }
  // The first backward of the step overwrites what it writes; the rest is
  // zeroed here. The workspace is scratch, written fresh by every backward.
  if (grad_state_ == GradState::kIdle) {
    ZeroUnwrittenGrads(grads_.span());
    return BackwardGrads{grads_.span(), GradWrite::kOverwrite, grad_workspace_};
  }
  return BackwardGrads{grads_.span(), GradWrite::kAdd, grad_workspace_};
}

void ShardedUnit::ZeroUnwrittenGrads(DtypeSpan grads) const {
  int64_t written_end = 0;
  for (const proto::SourceUnit& source : plan_.source_units()) {
    ZeroElements(grads.subspan(written_end, source.offset() - written_end));
    written_end = source.offset() + source.numel();
  }
  ZeroElements(grads.subspan(written_end));
}

absl::Status ShardedUnit::MarkBackwardDone() {
  if (grad_state_ != GradState::kIdle && grad_state_ != GradState::kAccumulated) {
    return Fail("MarkBackwardDone", "gradient state kIdle or kAccumulated",
                GradStateName(grad_state_));
  }
  grad_state_ = GradState::kAccumulated;
  return absl::OkStatus();
}

absl::Status ShardedUnit::StartReduction(const UnitComms& comms) {
  if (grad_state_ != GradState::kAccumulated) {
    return Fail("StartReduction", "gradient state kAccumulated", GradStateName(grad_state_));
  }
  FSDP_ASSIGN_OR_RETURN(grad_reduction_,
                        PostReduceScatterSum(*comms.shard_group, grads_.span(), reduced_shard_,
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
  if (runtime_.shard_grads) grads_.Reset();  // the shard is their home now
  if (runtime_.strategy == Strategy::kNoShard) {
    // [Note: why sum then scale] in docs/data-parallel.md: the same scale of
    // the same shard as every sharded strategy, then back to full.
    if (!exact()) Average(reduced_shard_);
    FSDP_ASSIGN_OR_RETURN(grad_reduction_,
                          PostAllGather(*comms.shard_group, reduced_shard_, grads_.span(),
                                        absl::StrCat(Label(), " gradient all-gather")));
    grad_state_ = GradState::kAllGathering;
  } else if (runtime_.replica_group_count > 1) {
    FSDP_ASSIGN_OR_RETURN(grad_reduction_, PostAllReduceSum(*comms.replica_group, reduced_shard_));
    grad_state_ = GradState::kAllReducingAcrossGroups;
  } else {
    if (!exact()) Average(reduced_shard_);
    grad_state_ = Summed();
  }
  return absl::OkStatus();
}

// One rank has nothing to average: x * 1 is x, and x's bf16 rounding is x.
void ShardedUnit::Average(DtypeSpan shard) const {
  if (runtime_.world_size == 1) return;
  ScaleElements(shard, 1.0f / static_cast<float>(runtime_.world_size));
}

absl::Status ShardedUnit::FinishReduction(absl::Duration timeout, CommWaitClock& clock) {
  switch (grad_state_) {
    case GradState::kReduced:
    case GradState::kSummedExactly:
      return absl::OkStatus();
    case GradState::kAllGathering:
      FSDP_RETURN_IF_ERROR(grad_reduction_.Finish(
          timeout, clock, absl::StrCat(Label(), " gradient all-gather")));
      break;
    case GradState::kAllReducingAcrossGroups: {
      FSDP_RETURN_IF_ERROR(grad_reduction_.Finish(
          timeout, clock, absl::StrCat(Label(), " cross-group gradient all-reduce")));
      if (!exact()) Average(reduced_shard_);
      break;
    }
    default:
      return Fail("FinishReduction",
                  "gradient state kAllGathering, kAllReducingAcrossGroups, kReduced or "
                  "kSummedExactly",
                  GradStateName(grad_state_));
  }
  grad_state_ = Summed();
  return absl::OkStatus();
}

absl::Status ShardedUnit::ConvertExactSums(absl::Span<const ExactSegment> segments,
                                           int64_t divisor) {
  if (grad_state_ != GradState::kSummedExactly) {
    return Fail("ConvertExactSums", "gradient state kSummedExactly", GradStateName(grad_state_));
  }
  // The region this rank holds, in flat coordinates: no_shard the whole
  // unit, every other strategy its shard.
  const bool whole = runtime_.strategy == Strategy::kNoShard;
  const DtypeSpan region = whole ? grads_.span() : reduced_shard_;
  const int64_t first = whole ? 0 : int64_t{runtime_.shard_rank} * plan_.shard_numel();
  const int64_t last = first + region.size();
  std::vector<ExactSegment> local;
  for (const ExactSegment& s : segments) {
    const int64_t begin = std::max(s.begin, first), end = std::min(s.end, last);
    if (begin >= end) continue;
    local.push_back({begin - first, end - first, s.exponent, s.max_abs});
  }
  FSDP_RETURN_IF_ERROR(ExactSumsToFloatsInPlace(region.as<int64_t>(), local, divisor));
  exact_floats_ = absl::MakeSpan(reinterpret_cast<float*>(region.data()), region.size());
  grad_state_ = GradState::kReduced;
  return absl::OkStatus();
}

DtypeSpan ShardedUnit::OptimizerGrads(bool whole) {
  const bool no_shard = runtime_.strategy == Strategy::kNoShard;
  if (!exact()) return whole ? grads_.span() : reduced_shard_;
  // no_shard converted its whole unit: its shard is a slice of the floats.
  if (whole || !no_shard) return DtypeSpan(exact_floats_);
  return DtypeSpan(exact_floats_.subspan(int64_t{runtime_.shard_rank} * plan_.shard_numel(),
                                         plan_.shard_numel()));
}

absl::Status ShardedUnit::ClearGrads() {
  if (grad_state_ != GradState::kReduced && grad_state_ != GradState::kIdle &&
      grad_state_ != GradState::kSummedExactly) {
    return Fail("ClearGrads", "gradient state kReduced, kSummedExactly or kIdle",
                GradStateName(grad_state_));
  }
  exact_floats_ = {};
  // No zeroing pass: the next step's first backward writes every element
  // (GradWrite::kOverwrite), and the collectives write their outputs whole.
  pending_grad_scale_ = 1.0f;
  grad_state_ = GradState::kIdle;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Optimizer.

absl::StatusOr<ConstDtypeSpan> ShardedUnit::OwnedReducedGrads() {
  if (grad_state_ != GradState::kReduced) {
    return Fail("OwnedReducedGrads", "gradient state kReduced", GradStateName(grad_state_));
  }
  return ConstDtypeSpan(OptimizerGrads(/*whole=*/false));
}

absl::StatusOr<ConstDtypeSpan> ShardedUnit::LocalGrads() const {
  if (grad_state_ != GradState::kAccumulated) {
    return Fail("LocalGrads", "gradient state kAccumulated", GradStateName(grad_state_));
  }
  return ConstDtypeSpan(grads_.span());
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
    const int64_t n = plan_.flat_numel();
    return optimizer.Step(unit_index, master_values_.subspan(0, n),
                          OptimizerGrads(/*whole=*/true).subspan(0, n), pending_grad_scale_,
                          params_of_master_.subspan(0, n), lr, step);
  }
  const ParamState needed = runtime_.shard_params ? ParamState::kSharded : ParamState::kUnsharded;
  if (param_state_ != needed) {
    return Fail("StepOptimizer",
                runtime_.shard_params ? "parameter state kSharded (Reshard after backward)"
                                      : "parameter state kUnsharded",
                ParamStateName(param_state_));
  }
  FSDP_RETURN_IF_ERROR(optimizer.Step(unit_index, master_values_,
                                      OptimizerGrads(/*whole=*/false), pending_grad_scale_,
                                      params_of_master_, lr, step));
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
  regions.push_back({"param", model_offset, master_values_.subspan(0, plan_.flat_numel())});
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
    const absl::Span<float> whole = master_values_;
    std::fill(whole.begin() + plan_.flat_numel(), whole.end(), 0.0f);
  }
  StoreFloats(params_of_master_, master_values_);  // nothing when they are the master
  FSDP_RETURN_IF_ERROR(optimizer.SetUnitStep(plan_.index(), optimizer_step));
  // Only the shard is current: shard_optimizer / shard_grad_op gather the
  // rest at the next forward, as after any optimizer step.
  if (runtime_.shard_optimizer && !runtime_.shard_params) param_state_ = ParamState::kSharded;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Views.

absl::StatusOr<ConstDtypeSpan> ShardedUnit::UnshardedParams() const {
  if (param_state_ != ParamState::kUnsharded) {
    return Fail("UnshardedParams", "parameter state kUnsharded", ParamStateName(param_state_));
  }
  return params_.span().subspan(0, plan_.flat_numel());
}

int64_t ShardedUnit::gathered_param_numel() const {
  return runtime_.shard_params ? params_.size() : 0;
}

int64_t ShardedUnit::unsharded_grad_numel() const {
  return runtime_.shard_grads ? grads_.size() : 0;
}

}  // namespace fsdp
