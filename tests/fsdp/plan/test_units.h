// File: tests/fsdp/plan/test_units.h
//
// Hand-built UnitSpecs for the planner's tests: a GPT-2-like layout (the
// same units and shapes as fsdp/nn/gpt_spec.h documents, built here so the
// planner's tests depend on nothing but fsdp/nn/param_spec.h), and units of
// arbitrary sizes.
#ifndef TESTS_FSDP_PLAN_TEST_UNITS_H_
#define TESTS_FSDP_PLAN_TEST_UNITS_H_

#include <cstdint>
#include <vector>

#include "fsdp/nn/param_spec.h"

namespace fsdp {
namespace plan {
namespace testing {

struct GptLikeShape {
  int layers = 2;
  int64_t d_model = 8;   // C
  int64_t vocab = 32;    // V
  int64_t seq_len = 16;  // T
};

// "embedding" (wte {V,C}, wpe {T,C}), "block<l>" x layers (ln1, attn.qkv,
// attn.proj, ln2, mlp.fc, mlp.proj with biases), "head" (ln_f, lm_head {V,C}).
std::vector<UnitSpec> GptLikeUnits(const GptLikeShape& shape);

// The parameter count of GptLikeUnits(shape), by formula:
// 2VC + TC + 2C + layers * (12 C^2 + 13 C).
int64_t GptLikeNumParams(const GptLikeShape& shape);

// Units "u0", "u1", ... where unit i has one 1-D param "u<i>.p<j>" per entry
// of param_numels[i] (an empty entry gives a unit without params).
std::vector<UnitSpec> UnitsWithParamNumels(const std::vector<std::vector<int64_t>>& param_numels);

}  // namespace testing
}  // namespace plan
}  // namespace fsdp

#endif  // TESTS_FSDP_PLAN_TEST_UNITS_H_
