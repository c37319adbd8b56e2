// File: tests/fsdp/plan/test_units.cc
#include "tests/fsdp/plan/test_units.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace plan {
namespace testing {

std::vector<UnitSpec> GptLikeUnits(const GptLikeShape& shape) {
  const int64_t C = shape.d_model, V = shape.vocab, T = shape.seq_len;
  std::vector<UnitSpec> units;
  units.push_back({"embedding", {{"embedding.wte", {V, C}}, {"embedding.wpe", {T, C}}}});
  for (int l = 0; l < shape.layers; ++l) {
    const std::string block = absl::StrCat("block", l);
    const std::string p = block + ".";
    units.push_back({block,
                     {{p + "ln1.weight", {C}},
                      {p + "ln1.bias", {C}},
                      {p + "attn.qkv.weight", {3 * C, C}},
                      {p + "attn.qkv.bias", {3 * C}},
                      {p + "attn.proj.weight", {C, C}},
                      {p + "attn.proj.bias", {C}},
                      {p + "ln2.weight", {C}},
                      {p + "ln2.bias", {C}},
                      {p + "mlp.fc.weight", {4 * C, C}},
                      {p + "mlp.fc.bias", {4 * C}},
                      {p + "mlp.proj.weight", {C, 4 * C}},
                      {p + "mlp.proj.bias", {C}}}});
  }
  units.push_back({"head",
                   {{"head.ln_f.weight", {C}},
                    {"head.ln_f.bias", {C}},
                    {"head.lm_head.weight", {V, C}}}});
  return units;
}

int64_t GptLikeNumParams(const GptLikeShape& shape) {
  const int64_t C = shape.d_model, V = shape.vocab, T = shape.seq_len;
  return 2 * V * C + T * C + 2 * C + shape.layers * (12 * C * C + 13 * C);
}

std::vector<UnitSpec> UnitsWithParamNumels(
    const std::vector<std::vector<int64_t>>& param_numels) {
  std::vector<UnitSpec> units;
  for (size_t i = 0; i < param_numels.size(); ++i) {
    UnitSpec unit;
    unit.name = absl::StrCat("u", i);
    for (size_t j = 0; j < param_numels[i].size(); ++j) {
      unit.params.push_back({absl::StrCat("u", i, ".p", j), {param_numels[i][j]}});
    }
    units.push_back(unit);
  }
  return units;
}

}  // namespace testing
}  // namespace plan
}  // namespace fsdp
