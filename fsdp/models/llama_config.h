// File: fsdp/models/llama_config.h
//
// The Llama (fsdp/nn/llama_spec.h) a training run's options describe, as
// gpt_config.h is the GPT's: its shape from --layers, --d_model, --heads,
// --kv_heads, --ffn_hidden (--ffn_multiple_of), --vocab, --seq_len,
// --rope_theta, --norm_eps (0 = the Llama's defaults) and --tie_embeddings, its precision from
// the run's precision policy, and its activation modes. The memory report
// predicts the model from it (fsdp/report/budget.h), and the "llama"
// registration (fsdp/models/llama.cc) builds the model from it.
//
//   EstimateRankMemory(point) with point.llama = LlamaConfigOf(options)
#ifndef FSDP_MODELS_LLAMA_CONFIG_H_
#define FSDP_MODELS_LLAMA_CONFIG_H_

#include "fsdp/nn/llama_spec.h"
#include "fsdp/run/train_options.h"

namespace fsdp {

// The model these options describe. Before validation the sizes may be
// anything: the default ffn_hidden is computed only for a positive
// ffn_multiple_of (0 otherwise, which ValidateLlamaConfig refuses).
LlamaConfig LlamaConfigOf(const TrainOptions& options);

}  // namespace fsdp

#endif  // FSDP_MODELS_LLAMA_CONFIG_H_
