// File: fsdp/checkpoint/gpt_safetensors.h
//
// The GPT that a safetensors file written by train_gpt --export or
// export_checkpoint holds (model_export.h): its configuration from the
// file's __metadata__, believed only as far as the file's own tensors back
// it. The metadata are a few strings anyone can write ("layers" =
// "2000000000"); sizing buffers or unit lists from them before checking
// would let a small file demand any amount of memory (issue #39). So the
// numbers are checked, before anything is sized by them, against the tensor
// list the header parser already bounded: 12 tensors per block plus 5,
// embedding.wte of [vocab, d_model], embedding.wpe of [seq_len, d_model],
// then every tensor's shape. After that each parameter the caller allocates
// is one the file holds.
//
//   FSDP_ASSIGN_OR_RETURN(auto reader, SafetensorsReader::Open(path));
//   FSDP_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromSafetensors(*reader));
#ifndef FSDP_CHECKPOINT_GPT_SAFETENSORS_H_
#define FSDP_CHECKPOINT_GPT_SAFETENSORS_H_

#include "absl/status/statusor.h"
#include "fsdp/checkpoint/safetensors.h"
#include "fsdp/nn/gpt_spec.h"

namespace fsdp {
namespace checkpoint {

// InvalidArgument naming the file and the first thing wrong: a missing or
// non-integer __metadata__ entry, a config ValidateGptConfig refuses, a
// d_model above kMaxSafetensorsDModel, or tensors that are not exactly
// those of that config (CheckSafetensorsFitsModel's message).
absl::StatusOr<GptConfig> GptConfigFromSafetensors(const SafetensorsReader& reader);

// A fixed bound that keeps every parameter count of GptUnitSpecs (4 C^2)
// far from overflowing; the largest published GPTs use 12288 to 25600.
inline constexpr int kMaxSafetensorsDModel = 1 << 16;

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_GPT_SAFETENSORS_H_
