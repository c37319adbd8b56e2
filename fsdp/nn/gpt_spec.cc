// File: fsdp/nn/gpt_spec.cc
#include "fsdp/nn/gpt_spec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fsdp {

absl::Status ValidateGptConfig(const GptConfig& c) {
  const struct { const char* name; int value; } fields[] = {
      {"layers", c.layers}, {"d_model", c.d_model}, {"heads", c.heads},
      {"vocab", c.vocab},   {"seq_len", c.seq_len},
  };
  for (const auto& f : fields) {
    if (f.value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT config: ", f.name, " must be positive, got ", f.value));
    }
  }
  if (c.d_model % c.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT config: heads (", c.heads, ") must divide d_model (", c.d_model,
        "); pick d_model as a multiple of heads, e.g. ", c.heads * (c.d_model / c.heads + 1)));
  }
  return absl::OkStatus();
}

std::string GptConfigToString(const GptConfig& c) {
  return absl::StrCat("layers=", c.layers, " d_model=", c.d_model, " heads=", c.heads,
                      " vocab=", c.vocab, " seq_len=", c.seq_len);
}

std::vector<UnitSpec> GptUnitSpecs(const GptConfig& config) {
  const int64_t C = config.d_model;
  const int64_t V = config.vocab;
  const int64_t T = config.seq_len;
  std::vector<UnitSpec> units;
  units.reserve(config.layers + 2);
  units.push_back({"embedding", {{"embedding.wte", {V, C}}, {"embedding.wpe", {T, C}}}});
  for (int l = 0; l < config.layers; ++l) {
    const std::string b = absl::StrCat("block", l);
    units.push_back({b,
                     {
                         {b + ".ln1.weight", {C}},
                         {b + ".ln1.bias", {C}},
                         {b + ".attn.qkv.weight", {3 * C, C}},
                         {b + ".attn.qkv.bias", {3 * C}},
                         {b + ".attn.proj.weight", {C, C}},
                         {b + ".attn.proj.bias", {C}},
                         {b + ".ln2.weight", {C}},
                         {b + ".ln2.bias", {C}},
                         {b + ".mlp.fc.weight", {4 * C, C}},
                         {b + ".mlp.fc.bias", {4 * C}},
                         {b + ".mlp.proj.weight", {C, 4 * C}},
                         {b + ".mlp.proj.bias", {C}},
                     }});
  }
  units.push_back({"head",
                   {{"head.ln_f.weight", {C}}, {"head.ln_f.bias", {C}},
                    {"head.lm_head.weight", {V, C}}}});
  return units;
}

int64_t GptNumParams(const GptConfig& config) {
  int64_t n = 0;
  for (const UnitSpec& u : GptUnitSpecs(config)) n += u.numel();
  return n;
}

GptActivationBreakdown GptActivationBytesByUnit(const GptConfig& config, int micro_batch) {
  const int64_t B = micro_batch;
  const int64_t T = config.seq_len;
  const int64_t C = config.d_model;
  const int64_t H = config.heads;
  const int64_t V = config.vocab;
  const int64_t kFloat = 4;
  const int64_t kInt32 = 4;
  GptActivationBreakdown r;
  r.layers = config.layers;
  r.embedding_bytes = kFloat * B * T * C + kInt32 * B * T;
  if (!config.bf16_compute) {
    r.block_bytes = kFloat * (16 * B * T * C + 4 * B * T + B * H * T * T);
    r.head_bytes = kFloat * (B * T * C + 2 * B * T + B * T * V) + kInt32 * B * T;
    r.workspace_bytes = kFloat * (10 * B * T * C + T * T);
    return r;
  }
  // Of the block's 16 BTC: ln1, att, ln2 (1 each), qkv (3) and gelu (4) in
  // bf16, the head's ln_f output too.
  const int64_t kBf16 = 2;
  r.block_bytes = kFloat * (6 * B * T * C + 4 * B * T + B * H * T * T) + kBf16 * 10 * B * T * C;
  r.head_bytes = kFloat * (2 * B * T + B * T * V) + kBf16 * B * T * C + kInt32 * B * T;
  int64_t max_unit = 0;
  for (const UnitSpec& u : GptUnitSpecs(config)) max_unit = std::max(max_unit, u.numel());
  r.workspace_bytes =
      kFloat * (10 * B * T * C + T * T) + kBf16 * (max_unit + 4 * B * T * C + T * T);
  return r;
}

int64_t GptActivationBytes(const GptConfig& config, int micro_batch) {
  return GptActivationBytesByUnit(config, micro_batch).total_bytes();
}

}  // namespace fsdp
