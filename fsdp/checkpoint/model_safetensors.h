// File: fsdp/checkpoint/model_safetensors.h
//
// The model that a safetensors file written by train_gpt --export or
// export_checkpoint holds (model_export.h): its family and configuration
// from the file's __metadata__, believed only as far as the file's own
// tensors back it. The metadata are a few strings anyone can write
// ("layers" = "2000000000"); sizing buffers or unit lists from them before
// checking would let a small file demand any amount of memory (issue #39).
// So the numbers are checked, before anything is sized by them, against the
// tensor list the header parser already bounded: the family's tensors per
// block and outside them, the embedding's [vocab, d_model] (and the GPT's
// positions, [seq_len, d_model]), the Llama's k_proj and gate_proj shapes,
// then every tensor's shape. After that each parameter the caller allocates
// is one the file holds.
//
//   FSDP_ASSIGN_OR_RETURN(auto reader, SafetensorsReader::Open(path));
//   if (SafetensorsFamily(*reader) == "llama")
//     FSDP_ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfigFromSafetensors(*reader));
//   else
//     FSDP_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromSafetensors(*reader));
#ifndef FSDP_CHECKPOINT_MODEL_SAFETENSORS_H_
#define FSDP_CHECKPOINT_MODEL_SAFETENSORS_H_

#include <string>

#include "absl/status/statusor.h"
#include "fsdp/checkpoint/safetensors.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/llama_spec.h"

namespace fsdp {
namespace checkpoint {

// The __metadata__ "family" ("gpt", "llama", ...); "gpt" when absent (the
// files written before a second family existed).
std::string SafetensorsFamily(const SafetensorsReader& reader);

// InvalidArgument naming the file and the first thing wrong: a missing or
// non-integer __metadata__ entry, a config ValidateGptConfig refuses, a
// d_model above kMaxSafetensorsDModel, or tensors that are not exactly
// those of that config (CheckSafetensorsFitsModel's message).
absl::StatusOr<GptConfig> GptConfigFromSafetensors(const SafetensorsReader& reader);

// The same for a Llama: its __metadata__ also holds kv_heads, ffn_hidden,
// rope_theta, norm_eps and (optionally; absent is false) tie_embeddings; ValidateLlamaConfig's
// refusals, and d_model and ffn_hidden above kMaxSafetensorsDModel, are named.
absl::StatusOr<LlamaConfig> LlamaConfigFromSafetensors(const SafetensorsReader& reader);

// A fixed bound that keeps every parameter count of the unit lists (4 C^2,
// 3 C F) far from overflowing; the largest published models use 12288 to
// 25600 (widths) and 53248 (Llama 3 405B's SwiGLU).
inline constexpr int kMaxSafetensorsDModel = 1 << 16;

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_MODEL_SAFETENSORS_H_
