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

absl::StatusOr<std::unique_ptr<InferenceModel>> CreateGptInference(const TrainOptions& options,
                                                                   int max_batch,
                                                                   MemoryTracker* tracker) {
  absl::StatusOr<std::unique_ptr<GptInference>> forward =
      GptInference::Create(GptConfigOf(options), max_batch, tracker);
  if (!forward.ok()) return forward.status();
  return std::unique_ptr<InferenceModel>(std::move(*forward));
}

const bool kRegistered =
    RegisterModel("gpt", {&GptUnitSpecsOf, &CreateGpt, &CreateGptInference});

}  // namespace
}  // namespace fsdp
