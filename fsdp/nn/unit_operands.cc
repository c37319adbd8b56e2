// File: fsdp/nn/unit_operands.cc
#include "fsdp/nn/unit_operands.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/bf16_convert.h"
#include "base/status_macros.h"
#include "fsdp/nn/decoder_steps.h"

namespace fsdp {
namespace {

std::vector<int64_t> Offsets(const UnitSpec& spec) {
  std::vector<int64_t> offset(spec.params.size() + 1, 0);
  for (size_t k = 0; k < spec.params.size(); ++k) {
    offset[k + 1] = offset[k] + spec.params[k].numel();
  }
  return offset;
}

}  // namespace

absl::StatusOr<UnitOperands> PrepareUnitOperands(const UnitSpec& spec, ConstDtypeSpan params,
                                                 comm::Dtype param_dtype,
                                                 comm::Dtype compute_dtype,
                                                 const OperandWorkspace& workspace) {
  FSDP_RETURN_IF_ERROR(CheckUnitParams(params, param_dtype, spec));
  UnitOperands m;
  m.offset = Offsets(spec);
  m.fp32.assign(spec.params.size(), nullptr);
  m.compute = params;
  if (params.dtype() == comm::Dtype::kFloat32) {
    const float* fp32 = params.as<float>().data();
    for (size_t k = 0; k < spec.params.size(); ++k) m.fp32[k] = fp32 + m.offset[k];
    if (compute_dtype == comm::Dtype::kBFloat16) {
      FSDP_CHECK(static_cast<int64_t>(workspace.params_bf16.size()) >= spec.numel());
      base::ToBf16(workspace.params_bf16.data(), fp32, spec.numel());
      m.compute = absl::MakeConstSpan(workspace.params_bf16.data(), spec.numel());
    }
    return m;
  }
  const uint16_t* bf16 = params.as<uint16_t>().data();
  float* small = workspace.small_fp32.data();
  for (size_t k = 0; k < spec.params.size(); ++k) {
    if (spec.params[k].shape.size() != 1) continue;
    const int64_t numel = spec.params[k].numel();
    FSDP_CHECK(small + numel <= workspace.small_fp32.data() + workspace.small_fp32.size());
    base::FromBf16(small, bf16 + m.offset[k], numel);
    m.fp32[k] = small;
    small += numel;
  }
  return m;
}

DtypeSpan UnitGradTargets::Product(int k, int count) const {
  if (bf16.empty()) return DtypeSpan(fp32.subspan(offset[k], numel(k, count)));
  return DtypeSpan(bf16.subspan(offset[k], numel(k, count)));
}

void UnitGradTargets::RoundAllExcept(std::initializer_list<int> written) const {
  if (bf16.empty()) return;
  for (int k = 0; k + 1 < static_cast<int>(offset.size()); ++k) {
    if (std::find(written.begin(), written.end(), k) != written.end()) continue;
    base::ToBf16(bf16.data() + offset[k], fp32.data() + offset[k], numel(k));
  }
}

void UnitGradTargets::Zero(std::initializer_list<int> added) const {
  for (int k : added) std::fill(F(k), F(k) + numel(k), 0.0f);
}

absl::StatusOr<UnitGradTargets> PrepareUnitGradTargets(const UnitSpec& spec,
                                                       const UnitGrads& grads,
                                                       comm::Dtype compute_dtype) {
  const std::string what = absl::StrCat(spec.name, " gradients");
  FSDP_RETURN_IF_ERROR(
      CheckUnitGrads(grads, GradWrite::kOverwrite, what, static_cast<int>(spec.params.size())));
  if (grads.values.size() != spec.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", grads.values.size(),
                                                   " values for a unit of ", spec.numel()));
  }
  UnitGradTargets g;
  g.offset = Offsets(spec);
  if (grads.values.dtype() == comm::Dtype::kFloat32) {
    g.fp32 = grads.values.as<float>();
  } else if (grads.values.dtype() == comm::Dtype::kInt64) {
    g.fp32 = grads.fp32_scratch;
    g.exact_sums = grads.values.as<int64_t>();
    g.exact = grads.exact;
  } else {
    if (compute_dtype != comm::Dtype::kBFloat16) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bf16 gradients need bf16 compute"));
    }
    g.fp32 = grads.fp32_scratch;
    g.bf16 = grads.values.as<uint16_t>();
  }
  return g;
}

}  // namespace fsdp
