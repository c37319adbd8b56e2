// File: fsdp/models/llama.cc
//
// The Llama (fsdp/nn/llama_model.h) in the run's model registry as
// "llama", shaped by the train_gpt flags: --layers, --d_model, --heads,
// --vocab, --seq_len as the GPT's, and its own --kv_heads, --ffn_hidden
// (--ffn_multiple_of), --rope_theta, --norm_eps, --tie_embeddings (see
// TrainOptions).
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/llama_model.h"
#include "fsdp/nn/llama_spec.h"
#include "fsdp/run/model_registry.h"
#include "fsdp/run/train_options.h"

namespace fsdp {
namespace {

// Before validation the sizes may be anything: LlamaDefaultFfnHidden only
// for a positive multiple.
LlamaConfig LlamaConfigOf(const TrainOptions& o) {
  LlamaConfig c;
  c.layers = o.layers;
  c.d_model = o.d_model;
  c.heads = o.heads;
  c.kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads;
  c.ffn_hidden = o.ffn_hidden > 0          ? o.ffn_hidden
                 : o.ffn_multiple_of > 0 ? LlamaDefaultFfnHidden(o.d_model, o.ffn_multiple_of)
                                         : 0;
  c.vocab = o.vocab;
  c.seq_len = o.seq_len;
  c.rope_theta = o.rope_theta > 0.0f ? o.rope_theta : LlamaConfig().rope_theta;
  c.norm_eps = o.norm_eps > 0.0f ? o.norm_eps : LlamaConfig().norm_eps;
  c.compute_dtype = o.precision.param_dtype;
  c.param_dtype = o.precision.param_dtype;  // [Note: bf16 parameter layout]
  c.activation_checkpoint_every =
      ParseActivationCheckpointing(o.activation_checkpointing, o.layers).value_or(0);
  c.flash_attention = o.attention == Attention::kFlash;
  return c;
}

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
  if (o.tie_embeddings) {
    return absl::InvalidArgumentError(
        "--tie_embeddings is not supported yet: the head would read the embedding unit's "
        "weight, which every strategy but no_shard frees after the embedding's forward; "
        "train with an untied head (as Llama 3 8B)");
  }
  if (o.sample_tokens > 0 || !o.val_data.empty()) {
    return absl::InvalidArgumentError(
        "--sample_tokens and --val_data are not supported yet with --model=llama (sampling and "
        "validation run the GPT's inference forward); drop them");
  }
  absl::Status valid = ValidateLlamaConfig(LlamaConfigOf(o));
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--model=llama: ", valid.message()));
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

const bool kRegistered =
    RegisterModel("llama", {&LlamaUnitSpecsOf, &CreateLlama, &ValidateLlamaOptions});

}  // namespace
}  // namespace fsdp
