// File: fsdp/checkpoint/model_export.cc
#include "fsdp/checkpoint/model_export.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint.h"
#include "fsdp/checkpoint/checkpoint_reader.h"
#include "fsdp/exchange/blob_exchange.h"

namespace fsdp {
namespace checkpoint {
namespace {

std::string ShapeOf(const std::vector<uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::vector<uint64_t> ShapeOf(const proto::TensorEntry& t) {
  return std::vector<uint64_t>(t.shape().begin(), t.shape().end());
}

// The shortest decimal that reads back as `value` ("500000", "1e-05").
std::string FloatText(float value) {
  std::string text = absl::StrCat(value);
  float back = 0;
  if (!absl::SimpleAtof(text, &back) || back != value) text = absl::StrFormat("%.9g", value);
  return text;
}

}  // namespace

std::vector<SafetensorsTensorSpec> ExportSpecs(const std::vector<proto::TensorEntry>& tensors) {
  std::vector<SafetensorsTensorSpec> specs;
  for (const proto::TensorEntry& t : tensors) specs.push_back({t.name(), ShapeOf(t)});
  return specs;
}

std::map<std::string, std::string> ExportMetadata(const proto::ModelConfig& model) {
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"family", model.family()},
                                                 {"layers", absl::StrCat(model.layers())},
                                                 {"d_model", absl::StrCat(model.d_model())},
                                                 {"heads", absl::StrCat(model.heads())},
                                                 {"vocab", absl::StrCat(model.vocab())},
                                                 {"seq_len", absl::StrCat(model.seq_len())}};
  if (model.family() == "llama") {
    metadata["kv_heads"] = absl::StrCat(model.kv_heads());
    metadata["ffn_hidden"] = absl::StrCat(model.ffn_hidden());
    metadata["rope_theta"] = FloatText(model.rope_theta());
    metadata["norm_eps"] = FloatText(model.norm_eps());
    metadata["tie_embeddings"] = model.tie_embeddings() ? "true" : "false";
  }
  return metadata;
}

absl::Status AppendUnit(SafetensorsWriter& writer, const proto::UnitPlan& unit,
                        absl::Span<const float> flat) {
  for (const proto::ParamLayout& param : unit.params()) {
    FSDP_RETURN_IF_ERROR(writer.Append(flat.subspan(param.offset(), param.numel())));
  }
  return absl::OkStatus();
}

absl::StatusOr<ConvertStats> ConvertCheckpoint(const std::string& checkpoint_path,
                                               const std::string& out_path,
                                               int64_t piece_numel) {
  if (piece_numel <= 0) return absl::InvalidArgumentError("piece_numel must be positive");
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                        CheckpointReader::Open(checkpoint_path));
  const proto::CheckpointManifest& m = reader->manifest();
  const std::vector<proto::TensorEntry> tensors(m.tensors().begin(), m.tensors().end());
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                        SafetensorsWriter::Create(out_path, ExportSpecs(tensors),
                                                  ExportMetadata(m.model())));
  ConvertStats stats;
  int64_t largest = 0;
  for (const proto::TensorEntry& t : tensors) largest = std::max(largest, t.numel());
  stats.buffer_numel = std::min(piece_numel, std::max<int64_t>(largest, 1));
  std::vector<float> piece(stats.buffer_numel);
  for (const proto::TensorEntry& t : tensors) {
    for (int64_t done = 0; done < t.numel(); done += stats.buffer_numel) {
      const int64_t n = std::min(stats.buffer_numel, t.numel() - done);
      absl::Span<float> part = absl::MakeSpan(piece).first(n);
      FSDP_RETURN_IF_ERROR(reader->Read("param", t.model_offset() + done, part));
      FSDP_RETURN_IF_ERROR(writer->Append(part));
    }
    ++stats.tensors;
    stats.bytes += t.numel() * 4;
  }
  FSDP_RETURN_IF_ERROR(writer->Finish());
  return stats;
}

absl::Status CheckSafetensorsFitsModel(const SafetensorsReader& reader,
                                       const std::vector<proto::TensorEntry>& tensors) {
  std::set<std::string> expected;
  for (const proto::TensorEntry& t : tensors) {
    expected.insert(t.name());
    const SafetensorsTensorInfo* found = reader.Find(t.name());
    if (found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          reader.path(), " has no tensor ", t.name(), " ", ShapeOf(ShapeOf(t)),
          ", which this model needs (check --layers/--d_model/... against the file's "
          "__metadata__)"));
    }
    if (found->dtype != SafetensorsDtype::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(
          reader.path(), ": tensor ", t.name(), " is ", SafetensorsDtypeName(found->dtype),
          "; only F32 weights can be loaded"));
    }
    if (found->shape != ShapeOf(t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          reader.path(), ": tensor ", t.name(), " has shape ", ShapeOf(found->shape),
          " but this model's is ", ShapeOf(ShapeOf(t))));
    }
  }
  for (const SafetensorsTensorInfo& info : reader.tensors()) {
    if (expected.count(info.name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          reader.path(), " has a tensor ", info.name, " ", ShapeOf(info.shape),
          " that this model does not have"));
    }
  }
  return absl::OkStatus();
}

absl::Status InitFromSafetensors(comm::Communicator& world, CheckpointableState& trainer,
                                 const std::string& path, absl::Duration timeout) {
  absl::Status loaded = [&]() -> absl::Status {
    FSDP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsReader> reader,
                          SafetensorsReader::Open(path));
    const std::vector<proto::TensorEntry> tensors = ModelTensors(trainer.plan());
    FSDP_RETURN_IF_ERROR(CheckSafetensorsFitsModel(*reader, tensors));
    FSDP_ASSIGN_OR_RETURN(std::vector<StateRegion> regions, trainer.CheckpointLoadRegions());
    for (const StateRegion& region : regions) {
      if (region.state != "param") continue;  // a new run: optimizer state stays zero
      const int64_t begin = region.model_offset;
      const int64_t end = begin + static_cast<int64_t>(region.data.size());
      // The tensors overlapping [begin, end), in model order.
      for (const proto::TensorEntry& t : tensors) {
        const int64_t lo = std::max(begin, t.model_offset());
        const int64_t hi = std::min(end, t.model_offset() + t.numel());
        if (lo >= hi) continue;
        FSDP_RETURN_IF_ERROR(reader->ReadF32Range(
            t.name(), static_cast<uint64_t>(lo - t.model_offset()),
            region.data.subspan(lo - begin, hi - lo)));
        world.KeepAlive();  // a long read is not a hang
      }
    }
    return trainer.FinishCheckpointLoad(/*steps_taken=*/0);
  }();
  if (!loaded.ok()) {
    loaded = absl::Status(loaded.code(), absl::StrCat("--init_from: ", loaded.message()));
  }
  return AgreeOnStatus(world, loaded, timeout, "init_from load");
}

}  // namespace checkpoint
}  // namespace fsdp
