// File: fsdp/nn/llama_spec.cc
#include "fsdp/nn/llama_spec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "fsdp/nn/attention_layout.h"
#include "fsdp/nn/flash_attention_layout.h"

namespace fsdp {

int LlamaDefaultFfnHidden(int d_model, int multiple_of) {
  const int64_t hidden = int64_t{8} * d_model / 3;
  return static_cast<int>((hidden + multiple_of - 1) / multiple_of * multiple_of);
}

absl::Status ValidateLlamaConfig(const LlamaConfig& c) {
  const struct { const char* name; int value; } fields[] = {
      {"layers", c.layers},         {"d_model", c.d_model}, {"heads", c.heads},
      {"kv_heads", c.kv_heads},     {"ffn_hidden", c.ffn_hidden},
      {"vocab", c.vocab},           {"seq_len", c.seq_len},
  };
  for (const auto& f : fields) {
    if (f.value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Llama config: ", f.name, " must be positive, got ", f.value));
    }
  }
  if (c.d_model % c.heads != 0 || (c.d_model / c.heads) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Llama config: heads (", c.heads, ") must divide d_model (", c.d_model,
        ") into an even head size (rotary positions pair the two halves of a head); e.g. "
        "d_model ",
        int64_t{c.heads} * 2 * (c.d_model / (int64_t{2} * c.heads) + 1)));
  }
  if (c.heads % c.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Llama config: kv_heads (", c.kv_heads, ") must divide heads (", c.heads,
        "); kv_heads equal to heads is multi-head attention"));
  }
  if (!(c.rope_theta > 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Llama config: rope_theta must be greater than 1, got ", c.rope_theta,
                     " (Llama 2 uses 10000, Llama 3 500000)"));
  }
  if (!(c.norm_eps > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Llama config: norm_eps must be positive, got ", c.norm_eps));
  }
  for (const comm::Dtype dtype : {c.compute_dtype, c.param_dtype}) {
    if (dtype != comm::Dtype::kFloat32 && dtype != comm::Dtype::kBFloat16) {
      return absl::InvalidArgumentError(
          absl::StrCat("Llama config: dtypes must be fp32 or bf16, got ", comm::DtypeName(dtype)));
    }
  }
  if (c.param_dtype == comm::Dtype::kBFloat16 && c.compute_dtype != comm::Dtype::kBFloat16) {
    return absl::InvalidArgumentError("Llama config: bf16 parameters need bf16 compute");
  }
  if (c.per_sequence_products && c.tie_embeddings) {
    return absl::InvalidArgumentError(
        "Llama config: exact gradients (per-sequence products, --exact) with tied embeddings are "
        "not supported yet; untie the head or drop --exact");
  }
  if (c.activation_checkpoint_every < 0 || c.activation_checkpoint_every > c.layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Llama config: activation_checkpoint_every must be 0 (none) to layers (", c.layers,
        "), got ", c.activation_checkpoint_every));
  }
  return absl::OkStatus();
}

std::string LlamaConfigToString(const LlamaConfig& c) {
  return absl::StrCat("layers=", c.layers, " d_model=", c.d_model, " heads=", c.heads,
                      " kv_heads=", c.kv_heads, " ffn_hidden=", c.ffn_hidden, " vocab=", c.vocab,
                      " seq_len=", c.seq_len, c.tie_embeddings ? " tied" : "");
}

std::vector<UnitSpec> LlamaUnitSpecs(const LlamaConfig& c) {
  const int64_t C = c.d_model, V = c.vocab, F = c.ffn_hidden;
  const int64_t kv_width = int64_t{c.kv_heads} * (c.d_model / c.heads);
  std::vector<UnitSpec> units;
  units.reserve(c.layers + 2);
  units.push_back({"embedding", {{"model.embed_tokens.weight", {V, C}}}});
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    units.push_back({absl::StrCat("block", l),
                     {
                         {p + "input_layernorm.weight", {C}},
                         {p + "self_attn.q_proj.weight", {C, C}},
                         {p + "self_attn.k_proj.weight", {kv_width, C}},
                         {p + "self_attn.v_proj.weight", {kv_width, C}},
                         {p + "self_attn.o_proj.weight", {C, C}},
                         {p + "post_attention_layernorm.weight", {C}},
                         {p + "mlp.gate_proj.weight", {F, C}},
                         {p + "mlp.up_proj.weight", {F, C}},
                         {p + "mlp.down_proj.weight", {C, F}},
                     }});
  }
  if (c.tie_embeddings) {
    units.push_back({"head", {{"model.norm.weight", {C}}}});
  } else {
    units.push_back({"head", {{"model.norm.weight", {C}}, {"lm_head.weight", {V, C}}}});
  }
  return units;
}

int64_t LlamaNumParams(const LlamaConfig& config) {
  int64_t n = 0;
  for (const UnitSpec& u : LlamaUnitSpecs(config)) n += u.numel();
  return n;
}

bool IsCheckpointedLlamaBlock(const LlamaConfig& config, int layer) {
  return config.activation_checkpoint_every > 0 && layer % config.activation_checkpoint_every == 0;
}

GptActivationBreakdown LlamaActivationBytesByUnit(const LlamaConfig& c, int micro_batch) {
  const int64_t B = micro_batch, T = c.seq_len, n = B * T, C = c.d_model, H = c.heads;
  const int64_t F = c.ffn_hidden, V = c.vocab;
  const int hs = c.d_model / c.heads;
  const int64_t W = int64_t{c.heads + 2 * c.kv_heads} * hs;
  const int64_t X = std::max(2 * F, 3 * C);
  const bool bf16 = c.compute_dtype == comm::Dtype::kBFloat16;
  const int64_t s = bf16 ? 2 : 4;
  const int64_t kFloat = 4, kInt32 = 4, kBf16 = 2;
  const int64_t attention_saved =
      c.flash_attention ? kFloat * B * H * T : s * B * H * T * T;
  const AttentionScratch attention =
      AttentionScratchOf(c.flash_attention, bf16, c.seq_len, hs, c.compute_threads);
  GptActivationBreakdown r;
  r.layers = c.layers;
  r.embedding_bytes = kFloat * n * C + kInt32 * n;
  r.block_bytes = s * (6 * n * C + n * F) + kFloat * (2 * n * C + 2 * n + 2 * n * F) +
                  attention_saved;
  r.head_bytes = s * n * C + kFloat * (n + n * V) + kInt32 * n;
  r.workspace_bytes = kFloat * (T * hs + 2 * n * C + n * F + n * X + n * W + attention.floats);
  if (bf16) {
    int64_t max_unit = 0, max_small = 0;
    for (const UnitSpec& u : LlamaUnitSpecs(c)) {
      max_unit = std::max(max_unit, u.numel());
      max_small = std::max(max_small, SmallParamNumel(u));
    }
    r.workspace_bytes +=
        kBf16 * (n * X + attention.bf16_elements) +
        (c.param_dtype == comm::Dtype::kBFloat16 ? kFloat * max_small : kBf16 * max_unit);
  }
  if (c.tie_embeddings) r.workspace_bytes += (s + kFloat) * V * C;
  r.checkpointed_block_bytes = kFloat * n * C;
  r.recompute_bytes = r.block_bytes - r.checkpointed_block_bytes;
  r.checkpointed.resize(c.layers);
  for (int l = 0; l < c.layers; ++l) r.checkpointed[l] = IsCheckpointedLlamaBlock(c, l);
  return r;
}

}  // namespace fsdp
