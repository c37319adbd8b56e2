// File: fsdp/models/gpt.cc
//
// The GPT (fsdp/nn/gpt_model.h) in the run's model registry as "gpt", the
// shape and precision taken from the train_gpt flags (GptConfigOf).
#include <memory>
#include <vector>

#include "fsdp/nn/gpt_model.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/run/model_registry.h"
#include "fsdp/run/train_options.h"

namespace fsdp {
namespace {

std::vector<UnitSpec> GptUnitSpecsOf(const TrainOptions& options) {
  return GptUnitSpecs(GptConfigOf(options));
}

absl::StatusOr<std::unique_ptr<Model>> CreateGpt(const TrainOptions& options,
                                                 MemoryTracker* tracker) {
  absl::StatusOr<std::unique_ptr<GptModel>> model =
      GptModel::Create(GptConfigOf(options), options.micro_batch, tracker);
  if (!model.ok()) return model.status();
  return std::unique_ptr<Model>(std::move(*model));
}

// The other families' flags mean nothing to the GPT: refused, not ignored.
absl::Status ValidateGptOptions(const TrainOptions& o) {
  const TrainOptions defaults;
  if (o.kv_heads != defaults.kv_heads || o.ffn_hidden != defaults.ffn_hidden ||
      o.ffn_multiple_of != defaults.ffn_multiple_of || o.rope_theta != defaults.rope_theta ||
      o.norm_eps != defaults.norm_eps || o.tie_embeddings != defaults.tie_embeddings) {
    return absl::InvalidArgumentError(
        "--kv_heads, --ffn_hidden, --ffn_multiple_of, --rope_theta, --norm_eps and "
        "--tie_embeddings shape a Llama (--model=llama); the GPT (4 d_model MLP, learned "
        "positions, LayerNorm) takes none of them");
  }
  return absl::OkStatus();
}

const bool kRegistered =
    RegisterModel("gpt", {&GptUnitSpecsOf, &CreateGpt, &ValidateGptOptions});

}  // namespace
}  // namespace fsdp
