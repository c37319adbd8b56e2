// File: fsdp/checkpoint/gpt_safetensors.cc
#include "fsdp/checkpoint/gpt_safetensors.h"

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
constexpr int64_t kTensorsPerBlock = 12;
constexpr int64_t kTensorsOutsideBlocks = 5;

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
  if (config.d_model > kMaxSafetensorsDModel) {
    return absl::InvalidArgumentError(absl::StrCat(reader.path(), ": its __metadata__ d_model ",
                                                   config.d_model, " is above the limit of ",
                                                   kMaxSafetensorsDModel));
  }
  const int64_t tensors = static_cast<int64_t>(reader.tensors().size());
  if (tensors != kTensorsPerBlock * config.layers + kTensorsOutsideBlocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), ": its __metadata__ layers ", config.layers, " calls for ",
        kTensorsPerBlock * config.layers + kTensorsOutsideBlocks, " tensors (", kTensorsPerBlock,
        " per block and ", kTensorsOutsideBlocks, " more), but the file holds ", tensors));
  }
  const uint64_t d_model = static_cast<uint64_t>(config.d_model);
  FSDP_RETURN_IF_ERROR(CheckShape(reader, "embedding.wte",
                                  {static_cast<uint64_t>(config.vocab), d_model},
                                  absl::StrCat("vocab ", config.vocab, ", d_model ", d_model)));
  FSDP_RETURN_IF_ERROR(CheckShape(reader, "embedding.wpe",
                                  {static_cast<uint64_t>(config.seq_len), d_model},
                                  absl::StrCat("seq_len ", config.seq_len, ", d_model ", d_model)));
  // The sizes are now the file's; the full list is as long as the file's.
  std::vector<proto::TensorEntry> entries;
  for (const UnitSpec& unit : GptUnitSpecs(config)) {
    for (const ParamSpec& p : unit.params) {
      proto::TensorEntry& entry = entries.emplace_back();
      entry.set_name(p.name);
      for (int64_t d : p.shape) entry.add_shape(d);
      entry.set_numel(p.numel());
    }
  }
  FSDP_RETURN_IF_ERROR(CheckSafetensorsFitsModel(reader, entries));
  return config;
}

}  // namespace checkpoint
}  // namespace fsdp
