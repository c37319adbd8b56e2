// File: fsdp/models/gpt.cc
//
// The GPT (fsdp/nn/gpt_model.h) in the run's model registry as "gpt", the
// shape and precision taken from the train_gpt flags (GptConfigOf), with its
// forward pass alone (fsdp/nn/gpt_inference.h) for validation and samples.
#include <memory>
#include <vector>

#include "fsdp/models/gpt_config.h"
#include "fsdp/nn/gpt_inference.h"
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

absl::StatusOr<std::unique_ptr<InferenceModel>> CreateGptInference(const TrainOptions& options,
                                                                   int max_batch,
                                                                   MemoryTracker* tracker) {
  absl::StatusOr<std::unique_ptr<GptInference>> forward =
      GptInference::Create(GptConfigOf(options), max_batch, tracker);
  if (!forward.ok()) return forward.status();
  return std::unique_ptr<InferenceModel>(std::move(*forward));
}

ModelFactory GptFactory() {
  ModelFactory factory;
  factory.unit_specs = &GptUnitSpecsOf;
  factory.create = &CreateGpt;
  factory.validate = &ValidateGptOptions;
  factory.create_inference = &CreateGptInference;
  return factory;
}

const bool kRegistered = RegisterModel("gpt", GptFactory());

}  // namespace
}  // namespace fsdp
