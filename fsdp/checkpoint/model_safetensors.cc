// File: fsdp/checkpoint/model_safetensors.cc
#include "fsdp/checkpoint/model_safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/model_export.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {
namespace checkpoint {
namespace {

// Tensors of a GPT with `layers` blocks (GptUnitSpecs): wte, wpe; 12 per
// block; ln_f weight and bias, lm_head.
constexpr int64_t kGptTensorsPerBlock = 12;
constexpr int64_t kGptTensorsOutsideBlocks = 5;
// Of a Llama (LlamaUnitSpecs): embed_tokens; 9 per block; norm, lm_head
// (none when the head is tied to embed_tokens).
constexpr int64_t kLlamaTensorsPerBlock = 9;
constexpr int64_t kLlamaTensorsOutsideBlocks = 3;

absl::StatusOr<int> MetadataInt(const SafetensorsReader& reader, const std::string& key) {
  auto it = reader.metadata().find(key);
  int value = 0;
  if (it == reader.metadata().end() || !absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), " has no integer __metadata__ \"", key,
        "\"; generate reads files written by train_gpt --export or export_checkpoint"));
  }
  return value;
}

absl::StatusOr<float> MetadataFloat(const SafetensorsReader& reader, const std::string& key) {
  auto it = reader.metadata().find(key);
  float value = 0;
  if (it == reader.metadata().end() || !absl::SimpleAtof(it->second, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), " has no numeric __metadata__ \"", key,
        "\"; generate reads files written by train_gpt --export or export_checkpoint"));
  }
  return value;
}

// OK if the file holds `per_block` tensors per block and `outside` more.
absl::Status CheckTensorCount(const SafetensorsReader& reader, int layers, int64_t per_block,
                              int64_t outside) {
  const int64_t tensors = static_cast<int64_t>(reader.tensors().size());
  if (tensors != per_block * layers + outside) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.path(), ": its __metadata__ layers ", layers, " calls for ",
                     per_block * layers + outside, " tensors (", per_block, " per block and ",
                     outside, " more), but the file holds ", tensors));
  }
  return absl::OkStatus();
}

absl::Status CheckWidth(const SafetensorsReader& reader, const char* key, int value) {
  if (value > kMaxSafetensorsDModel) {
    return absl::InvalidArgumentError(absl::StrCat(reader.path(), ": its __metadata__ ", key, " ",
                                                   value, " is above the limit of ",
                                                   kMaxSafetensorsDModel));
  }
  return absl::OkStatus();
}

// Every tensor of `units`, by name and shape, against the file's.
absl::Status CheckUnits(const SafetensorsReader& reader, const std::vector<UnitSpec>& units) {
  std::vector<proto::TensorEntry> entries;
  for (const UnitSpec& unit : units) {
    for (const ParamSpec& p : unit.params) {
      proto::TensorEntry& entry = entries.emplace_back();
      entry.set_name(p.name);
      for (int64_t d : p.shape) entry.add_shape(d);
      entry.set_numel(p.numel());
    }
  }
  return CheckSafetensorsFitsModel(reader, entries);
}

// OK if tensor `name` has exactly `shape`; compared before GptUnitSpecs so
// that the config's sizes are the file's.
absl::Status CheckShape(const SafetensorsReader& reader, const std::string& name,
                        const std::vector<uint64_t>& shape, absl::string_view keys) {
  const SafetensorsTensorInfo* found = reader.Find(name);
  if (found == nullptr || found->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), ": its __metadata__ (", keys, ") calls for a tensor ", name, " of shape [",
        absl::StrJoin(shape, ", "), "], but the file ",
        found == nullptr
            ? std::string("has none")
            : absl::StrCat("holds one of shape [", absl::StrJoin(found->shape, ", "), "]")));
  }
  return absl::OkStatus();
}

}  // namespace

std::string SafetensorsFamily(const SafetensorsReader& reader) {
  auto it = reader.metadata().find("family");
  return it == reader.metadata().end() ? "gpt" : it->second;
}

absl::StatusOr<GptConfig> GptConfigFromSafetensors(const SafetensorsReader& reader) {
  GptConfig config;
  FSDP_ASSIGN_OR_RETURN(config.layers, MetadataInt(reader, "layers"));
  FSDP_ASSIGN_OR_RETURN(config.d_model, MetadataInt(reader, "d_model"));
  FSDP_ASSIGN_OR_RETURN(config.heads, MetadataInt(reader, "heads"));
  FSDP_ASSIGN_OR_RETURN(config.vocab, MetadataInt(reader, "vocab"));
  FSDP_ASSIGN_OR_RETURN(config.seq_len, MetadataInt(reader, "seq_len"));
  absl::Status valid = ValidateGptConfig(config);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.path(), ": its __metadata__ ", valid.message()));
  }
  FSDP_RETURN_IF_ERROR(CheckWidth(reader, "d_model", config.d_model));
  FSDP_RETURN_IF_ERROR(
      CheckTensorCount(reader, config.layers, kGptTensorsPerBlock, kGptTensorsOutsideBlocks));
  const uint64_t d_model = static_cast<uint64_t>(config.d_model);
  FSDP_RETURN_IF_ERROR(CheckShape(reader, "embedding.wte",
                                  {static_cast<uint64_t>(config.vocab), d_model},
                                  absl::StrCat("vocab ", config.vocab, ", d_model ", d_model)));
  FSDP_RETURN_IF_ERROR(CheckShape(reader, "embedding.wpe",
                                  {static_cast<uint64_t>(config.seq_len), d_model},
                                  absl::StrCat("seq_len ", config.seq_len, ", d_model ", d_model)));
  // The sizes are now the file's; the full list is as long as the file's.
  FSDP_RETURN_IF_ERROR(CheckUnits(reader, GptUnitSpecs(config)));
  return config;
}

absl::StatusOr<LlamaConfig> LlamaConfigFromSafetensors(const SafetensorsReader& reader) {
  LlamaConfig config;
  FSDP_ASSIGN_OR_RETURN(config.layers, MetadataInt(reader, "layers"));
  FSDP_ASSIGN_OR_RETURN(config.d_model, MetadataInt(reader, "d_model"));
  FSDP_ASSIGN_OR_RETURN(config.heads, MetadataInt(reader, "heads"));
  FSDP_ASSIGN_OR_RETURN(config.kv_heads, MetadataInt(reader, "kv_heads"));
  FSDP_ASSIGN_OR_RETURN(config.ffn_hidden, MetadataInt(reader, "ffn_hidden"));
  FSDP_ASSIGN_OR_RETURN(config.vocab, MetadataInt(reader, "vocab"));
  FSDP_ASSIGN_OR_RETURN(config.seq_len, MetadataInt(reader, "seq_len"));
  FSDP_ASSIGN_OR_RETURN(config.rope_theta, MetadataFloat(reader, "rope_theta"));
  FSDP_ASSIGN_OR_RETURN(config.norm_eps, MetadataFloat(reader, "norm_eps"));
  if (auto tied = reader.metadata().find("tie_embeddings"); tied != reader.metadata().end()) {
    if (tied->second != "true" && tied->second != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat(reader.path(), ": its __metadata__ \"tie_embeddings\" is \"", tied->second,
                       "\", not \"true\" or \"false\""));
    }
    config.tie_embeddings = tied->second == "true";
  }
  absl::Status valid = ValidateLlamaConfig(config);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.path(), ": its __metadata__ ", valid.message()));
  }
  FSDP_RETURN_IF_ERROR(CheckWidth(reader, "d_model", config.d_model));
  FSDP_RETURN_IF_ERROR(CheckWidth(reader, "ffn_hidden", config.ffn_hidden));
  FSDP_RETURN_IF_ERROR(
      CheckTensorCount(reader, config.layers, kLlamaTensorsPerBlock,
                       kLlamaTensorsOutsideBlocks - (config.tie_embeddings ? 1 : 0)));
  const uint64_t d_model = static_cast<uint64_t>(config.d_model);
  FSDP_RETURN_IF_ERROR(CheckShape(reader, "model.embed_tokens.weight",
                                  {static_cast<uint64_t>(config.vocab), d_model},
                                  absl::StrCat("vocab ", config.vocab, ", d_model ", d_model)));
  // No tensor holds seq_len, yet it sizes the rotary table (seq_len x head
  // size floats): a table larger than the embedding the file does hold is
  // more than the file can justify.
  const int64_t table = int64_t{config.seq_len} * (config.d_model / config.heads);
  if (table > int64_t{config.vocab} * config.d_model) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), ": its __metadata__ seq_len ", config.seq_len,
        " calls for a rotary table of ", table, " floats, more than the file's own embedding (",
        config.vocab, " x ", config.d_model, "); the file cannot be a model train_gpt wrote"));
  }
  FSDP_RETURN_IF_ERROR(CheckUnits(reader, LlamaUnitSpecs(config)));
  return config;
}

}  // namespace checkpoint
}  // namespace fsdp
