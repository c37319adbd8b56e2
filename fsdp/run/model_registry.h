// File: fsdp/run/model_registry.h
//
// The models a training run can build, by name, so the run layer names no
// model: a model family registers a factory once (a static registration in
// its own library, linked into the binary that trains it), and RunTraining
// looks up TrainOptions::model.
//
//   // fsdp/models/gpt.cc
//   const bool kRegistered =
//       RegisterModel("gpt", {&GptUnitSpecsOf, &CreateGpt, &CreateGptInference});
//
//   FSDP_ASSIGN_OR_RETURN(const ModelFactory* factory, FindModel(options.model));
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, factory->create(options, &tracker));
#ifndef FSDP_RUN_MODEL_REGISTRY_H_
#define FSDP_RUN_MODEL_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/inference_model.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/param_spec.h"
#include "fsdp/run/train_options.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {

struct ModelFactory {
  // The model's units for these options, as the planner reads them; no
  // allocation (TrainingPlan, --dump_plan).
  std::vector<UnitSpec> (*unit_specs)(const TrainOptions& options) = nullptr;
  // The model for options.micro_batch sequences, its activations and
  // workspace tracked by `tracker`, which must outlive it.
  absl::StatusOr<std::unique_ptr<Model>> (*create)(const TrainOptions& options,
                                                   MemoryTracker* tracker) = nullptr;
  // The family's own checks of the options (its flags, and those of the
  // run it cannot serve yet), InvalidArgument naming the flag; null: none.
  absl::Status (*validate)(const TrainOptions& options) = nullptr;
  // Hugging Face's config.json of the model these options describe, written
  // beside an --export; and the check of a config.json found beside an
  // --init_from file against the options (InvalidArgument naming the key,
  // the file's value and the flag's). Null: the family has none.
  std::string (*hf_config_json)(const TrainOptions& options) = nullptr;
  absl::Status (*check_hf_config)(const TrainOptions& options, absl::string_view json) = nullptr;
  // Its forward pass alone, for validation and samples (fsdp/run/text_monitor.h),
  // for up to max_batch sequences; its buffers tracked by `tracker`, which
  // must outlive it. Null: the family has none yet, and its `validate`
  // refuses the flags that would need it.
  absl::StatusOr<std::unique_ptr<InferenceModel>> (*create_inference)(
      const TrainOptions& options, int max_batch, MemoryTracker* tracker) = nullptr;
  // Sets the family's own fields of the model record that checkpoints and
  // exports carry (the Llama's kv_heads, ffn_hidden, rope_theta, norm_eps,
  // resolved from the flags), so the file alone rebuilds the model. Null:
  // the shared fields (layers, d_model, heads, vocab, seq_len) say it all.
  void (*describe)(const TrainOptions& options, proto::ModelConfig* config) = nullptr;
};

// Adds `name`; returns true so a registration can initialize a constant.
// Registering a name twice, or a factory without unit_specs or create, is
// a programming error (FSDP_CHECK).
bool RegisterModel(const std::string& name, ModelFactory factory);

// The factory registered as `name`; NotFound listing the registered names
// (none: the binary links no model library) otherwise.
absl::StatusOr<const ModelFactory*> FindModel(absl::string_view name);

// FindModel(options.model), then its validate: OK, NotFound, or the
// family's InvalidArgument.
absl::Status ValidateModelOptions(const TrainOptions& options);

// "config.json" in the directory of `safetensors_path`: where Hugging Face
// keeps a model's configuration beside its weights.
std::string HfConfigPathBeside(absl::string_view safetensors_path);

// --export: the family's config.json written (atomically) beside the
// export, when the family has one. --init_from: the config.json beside the
// file, if there is one, checked against the options; a file over 1 MiB or
// one that cannot be read is InvalidArgument naming it.
absl::Status WriteHfConfigBeside(const TrainOptions& options, absl::string_view export_path);
absl::Status CheckHfConfigBeside(const TrainOptions& options, absl::string_view init_path);

}  // namespace fsdp

#endif  // FSDP_RUN_MODEL_REGISTRY_H_
