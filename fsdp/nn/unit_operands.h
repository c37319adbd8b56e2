// File: fsdp/nn/unit_operands.h
//
// A unit's parameters and gradients as a model's kernels read and write
// them, for a model written once over its compute dtype
// (fsdp/nn/dtype_layers.h): the parameters in the compute dtype (the
// products' operands) and the 1-D ones (norm weights, biases) in fp32; the
// gradients in fp32, with the weight gradients of the products written
// straight in bf16 when the unit's gradients are bf16 ([Note: bf16
// gradients] in fsdp/train/unit_state.h). The conversions go into
// workspace the model owns (and counts): one unit's parameters in bf16, or
// one unit's 1-D parameters in fp32.
//
//   FSDP_ASSIGN_OR_RETURN(UnitOperands p, PrepareUnitOperands(spec, params, param_dtype,
//                                                             compute_dtype, workspace));
//   LinearForward(out, inp, p.W(kQ, 3), nullptr, n, C, width);   // q, k, v stacked
#ifndef FSDP_NN_UNIT_OPERANDS_H_
#define FSDP_NN_UNIT_OPERANDS_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/dtype.h"
#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

// Where the conversions go: `params_bf16` (>= the unit's numel) when fp32
// parameters feed bf16 products, `small_fp32` (>= the unit's 1-D numel)
// when bf16 parameters are read; empty otherwise.
struct OperandWorkspace {
  absl::Span<uint16_t> params_bf16;
  absl::Span<float> small_fp32;
};

struct UnitOperands {
  ConstDtypeSpan compute;           // the whole unit in the compute dtype
  std::vector<int64_t> offset;      // per parameter, into compute
  std::vector<const float*> fp32;   // per parameter; set for the 1-D ones at least

  // Parameters [k, k + count) as one operand (they lie next to each other).
  ConstDtypeSpan W(int k, int count = 1) const {
    return compute.subspan(offset[k], offset[k + count] - offset[k]);
  }
  const float* F(int k) const { return fp32[k]; }
};

// FailedPrecondition unless `params` are `param_dtype`; InvalidArgument
// unless they have the unit's size.
absl::StatusOr<UnitOperands> PrepareUnitOperands(const UnitSpec& spec, ConstDtypeSpan params,
                                                 comm::Dtype param_dtype,
                                                 comm::Dtype compute_dtype,
                                                 const OperandWorkspace& workspace);

struct UnitGradTargets {
  absl::Span<float> fp32;       // the caller's fp32 gradients, or the scratch for bf16 ones
  absl::Span<uint16_t> bf16;    // empty unless the gradients are bf16
  // Exact (int64) gradients: the sums, and fp32 is the scratch one
  // sequence's gradients go through (fsdp/nn/exact_grads.h); empty otherwise.
  absl::Span<int64_t> exact_sums;
  ExactGradSums exact;
  std::vector<int64_t> offset;  // per parameter, and the unit's numel at the end

  float* F(int k) const { return fp32.data() + offset[k]; }
  int64_t numel(int k, int count = 1) const { return offset[k + count] - offset[k]; }
  // Where a product writes the weight gradient of parameters [k, k + count):
  // bf16 straight from its accumulator when the gradients are bf16.
  DtypeSpan Product(int k, int count = 1) const;
  // With bf16 gradients: rounds every parameter's fp32 gradient into bf16
  // but those in `written` (their products wrote bf16 already).
  void RoundAllExcept(std::initializer_list<int> written) const;
  // Zeroes the fp32 gradients of the parameters in `added` (those whose
  // layers add into them: the kOverwrite contract of Model::BackwardUnit).
  void Zero(std::initializer_list<int> added) const;
};

// InvalidArgument for gradients of another size than the unit's, or bf16
// gradients without bf16 compute (only bf16 products write them). Exact
// (int64) gradients are taken as they come: the model checks that it
// computes per sequence.
absl::StatusOr<UnitGradTargets> PrepareUnitGradTargets(const UnitSpec& spec,
                                                       const UnitGrads& grads,
                                                       comm::Dtype compute_dtype);

}  // namespace fsdp

#endif  // FSDP_NN_UNIT_OPERANDS_H_
