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

const bool kRegistered = RegisterModel("gpt", {&GptUnitSpecsOf, &CreateGpt});

}  // namespace
}  // namespace fsdp
