// File: fsdp/models/gpt_config.h
//
// The GPT (fsdp/nn/gpt_spec.h) a training run's options describe: its shape
// from --layers, --d_model, --heads, --vocab and --seq_len, its precision
// from the run's precision policy, and its activation modes. The "gpt"
// registration (fsdp/models/gpt.cc) builds the model from it, and the memory
// report predicts the same model from it; the run layer itself names no
// model (fsdp/run/model_registry.h).
//
//   GptModel::Create(GptConfigOf(options), options.micro_batch, &tracker);
#ifndef FSDP_MODELS_GPT_CONFIG_H_
#define FSDP_MODELS_GPT_CONFIG_H_

#include "fsdp/nn/gpt_spec.h"
#include "fsdp/run/train_options.h"

namespace fsdp {

// The model these options describe (shape, compute precision, activation
// checkpointing and attention). Assumes options ValidateTrainOptions accepts.
GptConfig GptConfigOf(const TrainOptions& options);

}  // namespace fsdp

#endif  // FSDP_MODELS_GPT_CONFIG_H_
