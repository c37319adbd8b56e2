// File: fsdp/nn/llama_spec.cc
#include "fsdp/nn/llama_spec.h"

#include "absl/strings/str_cat.h"

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
        "d_model ", c.heads * 2 * (c.d_model / (2 * c.heads) + 1)));
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
                      " seq_len=", c.seq_len);
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
  units.push_back({"head", {{"model.norm.weight", {C}}, {"lm_head.weight", {V, C}}}});
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

}  // namespace fsdp
