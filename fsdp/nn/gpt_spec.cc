// File: fsdp/nn/gpt_spec.cc
#include "fsdp/nn/gpt_spec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "fsdp/nn/attention_layout.h"
#include "fsdp/nn/flash_attention_layout.h"

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
  if (c.activation_checkpoint_every < 0 || c.activation_checkpoint_every > c.layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT config: activation_checkpoint_every must be 0 (none) to layers (", c.layers, "), got ",
        c.activation_checkpoint_every));
  }
  if (c.param_dtype == comm::Dtype::kBFloat16 && c.compute_dtype != comm::Dtype::kBFloat16) {
    return absl::InvalidArgumentError(
        "GPT config: param_dtype bf16 (parameters given in bf16) needs compute_dtype bf16");
  }
  return absl::OkStatus();
}

bool IsCheckpointedBlock(const GptConfig& config, int layer) {
  return config.activation_checkpoint_every > 0 && layer % config.activation_checkpoint_every == 0;
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

int64_t SmallParamNumel(const UnitSpec& unit) {
  int64_t n = 0;
  for (const ParamSpec& p : unit.params) n += p.shape.size() == 1 ? p.numel() : 0;
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
  const int64_t kBf16 = 2;
  const bool bf16_compute = config.compute_dtype == comm::Dtype::kBFloat16;
  // What attention saves per block and the scratch its backward needs.
  const int64_t attention_saved = config.flash_attention ? B * H * T : B * H * T * T;
  const int head_size = config.d_model / config.heads;
  const AttentionScratch attention = AttentionScratchOf(
      config.flash_attention, bf16_compute, config.seq_len, head_size, config.compute_threads);
  GptActivationBreakdown r;
  r.layers = config.layers;
  r.embedding_bytes = kFloat * B * T * C + kInt32 * B * T;
  if (!bf16_compute) {
    r.block_bytes = kFloat * (16 * B * T * C + 4 * B * T + attention_saved);
    r.head_bytes = kFloat * (B * T * C + 2 * B * T + B * T * V) + kInt32 * B * T;
    r.workspace_bytes = kFloat * (10 * B * T * C + attention.floats);
  } else {
    // Of the block's 16 BTC: ln1, att, ln2 (1 each), qkv (3) and gelu (4) in
    // bf16, the head's ln_f output too; the standard attention's
    // probabilities in bf16, flash attention's log-sum-exp in fp32.
    const int64_t fp32_attention = config.flash_attention ? attention_saved : 0;
    const int64_t bf16_attention = config.flash_attention ? 0 : attention_saved;
    r.block_bytes = kFloat * (6 * B * T * C + 4 * B * T + fp32_attention) +
                    kBf16 * (10 * B * T * C + bf16_attention);
    r.head_bytes = kFloat * (2 * B * T + B * T * V) + kBf16 * B * T * C + kInt32 * B * T;
    int64_t max_unit = 0, max_small = 0;
    for (const UnitSpec& u : GptUnitSpecs(config)) {
      max_unit = std::max(max_unit, u.numel());
      max_small = std::max(max_small, SmallParamNumel(u));
    }
    // bf16 copies: one unit's parameters (unless they come in bf16; then an
    // fp32 copy of its 1-D ones), an output gradient, and one head's
    // probabilities and dense q, k, v, output gradient (standard) or one
    // block pair's (flash).
    const int64_t params_copy =
      config.param_dtype == comm::Dtype::kBFloat16 ? kFloat * max_small : kBf16 * max_unit;
    // fp32: d_residual, d_narrow (1 BTC each) and d_wide1 (4); no d_wide2,
    // GELU's backward rounds its gradient block by block.
    r.workspace_bytes = kFloat * (6 * B * T * C + attention.floats) + params_copy +
                        kBf16 * (4 * B * T * C + attention.bf16_elements);
  }
  // A checkpointed block keeps its fp32 output (either precision).
  r.checkpointed_block_bytes = kFloat * B * T * C;
  r.recompute_bytes = r.block_bytes - r.checkpointed_block_bytes;
  r.checkpointed.resize(config.layers);
  for (int l = 0; l < config.layers; ++l) r.checkpointed[l] = IsCheckpointedBlock(config, l);
  return r;
}

int64_t GptActivationBreakdown::block_saved_bytes(int layer) const {
  return checkpointed[layer] ? checkpointed_block_bytes : block_bytes;
}

int64_t GptActivationBreakdown::unit_saved_bytes(int unit) const {
  if (unit == 0) return embedding_bytes;
  if (unit == layers + 1) return head_bytes;
  return block_saved_bytes(unit - 1);
}

int64_t GptActivationBreakdown::unit_transient_bytes(int unit) const {
  const bool block = unit >= 1 && unit <= layers;
  return block && checkpointed[unit - 1] ? recompute_bytes : 0;
}

int64_t GptActivationBreakdown::saved_bytes() const {
  int64_t bytes = embedding_bytes + head_bytes;
  for (int l = 0; l < layers; ++l) bytes += block_saved_bytes(l);
  return bytes;
}

int64_t GptActivationBreakdown::peak_bytes() const {
  // A checkpointed block's forward holds its output and the transient over
  // the units before it; its backward holds the same set (the head and the
  // blocks after it are freed by then), so one pass covers both.
  int64_t peak = saved_bytes();
  int64_t live = embedding_bytes;
  for (int l = 0; l < layers; ++l) {
    live += block_saved_bytes(l);
    if (checkpointed[l]) peak = std::max(peak, live + recompute_bytes);
  }
  return peak;
}

int64_t GptActivationBytes(const GptConfig& config, int micro_batch) {
  return GptActivationBytesByUnit(config, micro_batch).total_bytes();
}

}  // namespace fsdp
