// File: fsdp/models/llama.cc
//
// The Llama (fsdp/nn/llama_model.h) in the run's model registry as
// "llama", shaped by the train_gpt flags: --layers, --d_model, --heads,
// --vocab, --seq_len as the GPT's, and its own --kv_heads, --ffn_hidden
// (--ffn_multiple_of), --rope_theta, --norm_eps, --tie_embeddings (see
// TrainOptions), with its forward pass alone (fsdp/nn/llama_inference.h)
// for validation and samples.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/models/llama_config.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/llama_inference.h"
#include "fsdp/nn/llama_model.h"
#include "fsdp/nn/llama_spec.h"
#include "fsdp/run/model_registry.h"
#include "fsdp/run/train_options.h"
#include "nlohmann/json.hpp"

namespace fsdp {
namespace {

absl::Status ValidateLlamaOptions(const TrainOptions& o) {
  if (o.kv_heads < 0 || o.ffn_hidden < 0 || o.rope_theta < 0.0f || o.norm_eps < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv_heads=", o.kv_heads, ", --ffn_hidden=", o.ffn_hidden, ", --rope_theta=",
        o.rope_theta, " and --norm_eps=", o.norm_eps,
        " must not be negative (0 = the Llama's default)"));
  }
  if (o.ffn_multiple_of < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ffn_multiple_of=", o.ffn_multiple_of,
        " must be positive (--ffn_hidden=0 rounds 8/3 d_model up to a multiple of it)"));
  }
  absl::Status valid = ValidateLlamaConfig(LlamaConfigOf(o));
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--model=llama: ", valid.message()));
  }
  return absl::OkStatus();
}

// Hugging Face's LlamaConfig keys for these options (fp32 weights).
std::string LlamaHfConfigJson(const TrainOptions& options) {
  const LlamaConfig c = LlamaConfigOf(options);
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.ffn_hidden;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["num_key_value_heads"] = c.kv_heads;
  j["head_dim"] = c.d_model / c.heads;
  j["vocab_size"] = c.vocab;
  j["max_position_embeddings"] = c.seq_len;
  // The flags' decimal values (1e-05, not the float's 9.99999974e-06).
  j["rope_theta"] = std::stod(absl::StrCat(c.rope_theta));
  j["rms_norm_eps"] = std::stod(absl::StrCat(c.norm_eps));
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["torch_dtype"] = "float32";
  return j.dump(2) + "\n";
}

// A config.json's keys against the options: each key present must agree
// (num_key_value_heads absent means num_attention_heads, as Hugging Face
// reads it; tie_word_embeddings absent means false, as Llama 3 8B's file
// has it); a non-Llama config is refused.
absl::Status CheckLlamaHfConfig(const TrainOptions& options, absl::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  if (j.contains("model_type") && j["model_type"] != "llama") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model_type is ", j["model_type"].dump(), ", not \"llama\" (--model=llama)"));
  }
  const LlamaConfig c = LlamaConfigOf(options);
  if (j.contains("tie_word_embeddings") &&
      (!j["tie_word_embeddings"].is_boolean() ||
       j["tie_word_embeddings"].get<bool>() != c.tie_embeddings)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tie_word_embeddings is ", j["tie_word_embeddings"].dump(),
                     " but --tie_embeddings=", c.tie_embeddings ? "true" : "false"));
  }
  const struct { const char* key; const char* flag; int value; } ints[] = {
      {"hidden_size", "--d_model", c.d_model},
      {"intermediate_size", "--ffn_hidden", c.ffn_hidden},
      {"num_hidden_layers", "--layers", c.layers},
      {"num_attention_heads", "--heads", c.heads},
      {"num_key_value_heads", "--kv_heads", c.kv_heads},
      {"vocab_size", "--vocab", c.vocab},
  };
  for (const auto& f : ints) {
    nlohmann::json value = j.contains(f.key) ? j[f.key] : nlohmann::json();
    if (value.is_null() && std::string(f.key) == "num_key_value_heads") {
      value = j.contains("num_attention_heads") ? j["num_attention_heads"] : nlohmann::json();
    }
    if (value.is_null()) continue;
    if (!value.is_number_integer() || value.get<int64_t>() != f.value) {
      return absl::InvalidArgumentError(absl::StrCat(f.key, " is ", value.dump(), " but ",
                                                     f.flag, "=", f.value));
    }
  }
  const struct { const char* key; const char* flag; float value; } floats[] = {
      {"rope_theta", "--rope_theta", c.rope_theta},
      {"rms_norm_eps", "--norm_eps", c.norm_eps},
  };
  for (const auto& f : floats) {
    if (!j.contains(f.key)) continue;
    const nlohmann::json& value = j[f.key];
    if (!value.is_number() ||
        std::fabs(value.get<double>() - f.value) > 1e-6 * std::fabs(double{f.value})) {
      return absl::InvalidArgumentError(absl::StrCat(f.key, " is ", value.dump(), " but ",
                                                     f.flag, "=", f.value));
    }
  }
  return absl::OkStatus();
}

std::vector<UnitSpec> LlamaUnitSpecsOf(const TrainOptions& options) {
  return LlamaUnitSpecs(LlamaConfigOf(options));
}

absl::StatusOr<std::unique_ptr<Model>> CreateLlama(const TrainOptions& options,
                                                   MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateLlamaOptions(options));
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Create(LlamaConfigOf(options), options.micro_batch, tracker);
  if (!model.ok()) return model.status();
  return std::unique_ptr<Model>(std::move(*model));
}

absl::StatusOr<std::unique_ptr<InferenceModel>> CreateLlamaInference(const TrainOptions& options,
                                                                     int max_batch,
                                                                     MemoryTracker* tracker) {
  absl::StatusOr<std::unique_ptr<LlamaInference>> forward =
      LlamaInference::Create(LlamaConfigOf(options), max_batch, tracker);
  if (!forward.ok()) return forward.status();
  return std::unique_ptr<InferenceModel>(std::move(*forward));
}

// The Llama's own fields of the model record, as the model resolves them.
void DescribeLlama(const TrainOptions& options, proto::ModelConfig* record) {
  const LlamaConfig c = LlamaConfigOf(options);
  record->set_kv_heads(c.kv_heads);
  record->set_ffn_hidden(c.ffn_hidden);
  record->set_rope_theta(c.rope_theta);
  record->set_norm_eps(c.norm_eps);
  record->set_tie_embeddings(c.tie_embeddings);
}

ModelFactory LlamaFactory() {
  ModelFactory factory;
  factory.unit_specs = &LlamaUnitSpecsOf;
  factory.create = &CreateLlama;
  factory.validate = &ValidateLlamaOptions;
  factory.create_inference = &CreateLlamaInference;
  factory.hf_config_json = &LlamaHfConfigJson;
  factory.check_hf_config = &CheckLlamaHfConfig;
  factory.describe = &DescribeLlama;
  return factory;
}

const bool kRegistered = RegisterModel("llama", LlamaFactory());

}  // namespace
}  // namespace fsdp
