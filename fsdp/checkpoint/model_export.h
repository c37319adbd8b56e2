// File: fsdp/checkpoint/model_export.h
//
// The model's fp32 weights as one safetensors file (safetensors.h), in and
// out, never holding more than one unit or one piece of the model:
//   - a live run exports after its last step: the trainer gathers one unit
//     at a time (DataParallelTrainer::ForEachGatheredUnit) and rank 0
//     appends it (AppendUnit);
//   - ConvertCheckpoint turns a sharded checkpoint into one file offline,
//     streaming each tensor through a fixed-size buffer;
//   - InitFromSafetensors fills a fresh trainer's parameters: every rank
//     reads only the parameter regions its plan keeps.
// Tensor names and shapes are the model's (docs/model.md: embedding.wte,
// block0.attn.qkv.weight, ..., head.lm_head.weight; PyTorch layout, out x
// in), dtype F32, in model order; __metadata__ holds the model config.
#ifndef FSDP_CHECKPOINT_MODEL_EXPORT_H_
#define FSDP_CHECKPOINT_MODEL_EXPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "fsdp/checkpoint/checkpointable_state.h"
#include "fsdp/checkpoint/safetensors.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {
namespace checkpoint {

// The writer's tensor list for `tensors` (ModelTensors order).
std::vector<SafetensorsTensorSpec> ExportSpecs(const std::vector<proto::TensorEntry>& tensors);

// __metadata__: "format" = "pt" and the model config ("family", "layers",
// "d_model", "heads", "vocab", "seq_len"; a Llama's also "kv_heads",
// "ffn_hidden", "rope_theta", "norm_eps", "tie_embeddings"). Nothing about the run (no step,
// no time), so the same weights always give the same bytes: an import
// followed by an export is a bitwise round trip.
std::map<std::string, std::string> ExportMetadata(const proto::ModelConfig& model);

// Appends plan unit `unit`'s real parameters (its flat buffer, model order)
// to `writer`, split at tensor boundaries.
absl::Status AppendUnit(SafetensorsWriter& writer, const proto::UnitPlan& unit,
                        absl::Span<const float> flat);

struct ConvertStats {
  int64_t tensors = 0;
  int64_t bytes = 0;          // of tensor data written
  int64_t buffer_numel = 0;   // the streaming buffer's size
};

// Writes checkpoint `checkpoint_path`'s parameters to `out_path`, reading
// at most `piece_numel` elements at a time (plus one verified chunk).
absl::StatusOr<ConvertStats> ConvertCheckpoint(const std::string& checkpoint_path,
                                               const std::string& out_path,
                                               int64_t piece_numel = int64_t{1} << 20);

// OK if the file holds exactly the model's tensors, each F32 with the
// model's shape; otherwise InvalidArgument naming the first tensor that is
// missing, extra, of another shape or of another dtype.
absl::Status CheckSafetensorsFitsModel(const SafetensorsReader& reader,
                                       const std::vector<proto::TensorEntry>& tensors);

// Collective: every rank opens `path`, checks it, and reads the parameter
// regions its plan keeps into the freshly created `trainer` (optimizer
// state stays zero: a new run from these weights). Every rank returns the
// same status.
absl::Status InitFromSafetensors(comm::Communicator& world, CheckpointableState& trainer,
                                 const std::string& path, absl::Duration timeout);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_MODEL_EXPORT_H_
