// File: fsdp/report/memory_estimate.h
//
// One rank's predicted peak memory for a GPT or Llama training job, by
// category: the shard planner's model state, working buffers and
// communication buffers (fsdp/plan/memory_model.h) plus the model's
// activations and workspace (fsdp/nn/gpt_spec.h, fsdp/nn/llama_spec.h), with
// the peak of the total found by replaying the runtime's step
// (step_schedule.h). The model family only chooses the units and the
// activation bytes; the rest is the same arithmetic for both.
// docs/memory.md derives every term and its agreement with the ZeRO paper.
//
//   MemoryPoint point;
//   point.config = {/*layers=*/4, /*d_model=*/128, /*heads=*/2, /*vocab=*/2048,
//                   /*seq_len=*/128};
//   point.strategy = proto::FULL_SHARD;
//   point.ranks = 8;
//   point.precision = Precision::kMixed;
//   FSDP_ASSIGN_OR_RETURN(RankMemoryEstimate e, EstimateRankMemory(point));
//   e.total_bytes();                                   // sum of category peaks
//   e.tracker_bytes(MemoryCategory::kOptimizerState);  // what MemoryTracker sees
//
//   point.family = ModelFamily::kLlama;  // now point.llama is the model
//   point.llama.layers = 32; ...
//
// For a model known only by its parameter count Psi, ZeroModelStateBytes is
// the ZeRO paper's per-device formula itself (no units, no padding).
#ifndef FSDP_REPORT_MEMORY_ESTIMATE_H_
#define FSDP_REPORT_MEMORY_ESTIMATE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/llama_spec.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/plan/precision_policy.h"
#include "fsdp/plan/sharding_options.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace report {

enum class Precision {
  kFp32,   // 4-byte parameters, gradients, Adam moments (K = 8: 4 + 4 + 8 bytes/param)
  // bf16 parameters and gradients, fp32 master + Adam state (K = 12), as in
  // ZeRO: what the runtime's --precision=bf16 does with its default
  // --reduce_dtype=bf16 ([Note: bf16 gradients] in fsdp/train/unit_state.h):
  // 2 + 2 + 4 + 8 = 16 bytes per parameter, plus one unit's fp32 gradient
  // workspace. The GPT computes in bf16.
  kMixed,
  // What the runtime's --precision=bf16 --reduce_dtype=fp32 does ([Note:
  // bf16 parameter layout] in fsdp/train/unit_state.h): bf16 parameters
  // (kept and gathered) and matrix products, an fp32 master for every
  // strategy, fp32 gradients reduced in fp32, fp32 Adam state: 2 + 4 + 4 + 8
  // = 18 bytes per parameter. The GPT computes in bf16 (config.compute_dtype
  // and param_dtype are bf16), as under kMixed.
  kBf16,
};
const char* PrecisionName(Precision precision);  // "fp32", "mixed", "bf16"
// "fp32", "mixed" or "bf16"; InvalidArgument naming them otherwise (and
// saying what became of "bf16_wire").
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);

// The runtime's precision policy of each (fsdp/plan/precision_policy.h), and
// back: fp32 everything (kFp32), bf16 parameters with bf16 (kMixed) or fp32
// (kBf16) gradients.
PrecisionPolicy PrecisionPolicyOf(Precision precision);
Precision PrecisionOf(const PrecisionPolicy& policy);

// The decoder a point trains, named as train_gpt's --model names it.
enum class ModelFamily {
  kGpt,    // GptConfig: fsdp/nn/gpt_spec.h
  kLlama,  // LlamaConfig: fsdp/nn/llama_spec.h
};
const char* ModelFamilyName(ModelFamily family);  // "gpt", "llama"
// "gpt" or "llama"; InvalidArgument naming them otherwise.
absl::StatusOr<ModelFamily> ParseModelFamily(absl::string_view name);

// One training configuration, per rank.
struct MemoryPoint {
  // The model: the GPT of `config`, or with family kLlama the Llama of
  // `llama`; the other family's config is not read. Either config's dtypes
  // are set from `precision`.
  ModelFamily family = ModelFamily::kGpt;
  GptConfig config;
  LlamaConfig llama;
  int micro_batch = 4;  // sequences of config.seq_len tokens per rank per micro-batch
  // Micro-batches per optimizer step: above 1, a gradient-sharding strategy
  // holds every unit's unsharded gradients until the step's reductions.
  int accum = 1;
  proto::ShardingStrategy strategy = proto::NO_SHARD;
  int ranks = 1;
  int group_size = 0;  // hybrid_shard only: ranks per shard group (divides ranks)
  Precision precision = Precision::kFp32;
  plan::OptimizerKind optimizer = plan::OptimizerKind::kAdam;
  int prefetch_depth = 1;  // units all-gathered ahead (sharded parameters only)
  int64_t min_unit_numel = 0;  // the planner merges smaller model units (0 = off)
  // --exact (docs/exact.md): int64 gradient sums (8 bytes where the
  // precision keeps its gradients in 4 or 2), one unit's fp32 gradient
  // workspace, and the exchange of the per-tensor maxima.
  bool exact = false;
  // --buddy_every: memory snapshots of the state (plan::MemorySnapshotBytes).
  bool memory_snapshots = false;
};

// The point's sharding settings, as the planner and the runtime take them.
// InvalidArgument for an unspecified strategy.
absl::StatusOr<ShardingOptions> ShardingOptionsOf(const MemoryPoint& point);

// The point's model in one line: GptConfigToString(config) for the GPT,
// "llama " + LlamaConfigToString(llama) for the Llama.
std::string PointModelToString(const MemoryPoint& point);

// The point's sequence length (seq_len of its family's config), and setting it.
int PointSeqLen(const MemoryPoint& point);
void SetPointSeqLen(MemoryPoint& point, int seq_len);

// The point's model's parameters (GptNumParams or LlamaNumParams), without
// the planner's padding. Assumes a valid config.
int64_t PointNumParams(const MemoryPoint& point);

// "full_shard mixed ranks=8 layers=4 d_model=128 ... micro_batch=4" (the
// model as PointModelToString), then the activation mode when it is not
// none/standard.
std::string MemoryPointToString(const MemoryPoint& point);

// One rank's predicted peak bytes by category. Each field is that
// category's peak over a step. Their sum bounds the peak of the total, but
// the working buffers peak during backward while the activations are being
// freed, so the total's peak is computed from the runtime's schedule: see
// [Note: peak of the total] in memory_estimate.cc.
struct RankMemoryEstimate {
  int64_t num_params = 0;  // real parameters (unpadded), Psi
  // Model state.
  int64_t parameter_bytes = 0;         // kept between steps: whole or one shard, compute dtype
  int64_t gradient_bytes = 0;          // kept for the optimizer: whole or one shard
  int64_t master_parameter_bytes = 0;  // fp32 master copy, mixed precision only
  int64_t optimizer_state_bytes = 0;   // Adam moments (fp32)
  // Working buffers.
  int64_t gathered_bytes = 0;      // units in flight: gathered parameters and unsharded
                                   // gradients beyond the kept state above
  int64_t comm_buffer_bytes = 0;   // collectives' buffers held for the run
  int64_t grad_workspace_bytes = 0;  // mixed: one unit's fp32 gradients, held for the run
  // Model-dependent.
  int64_t activation_bytes = 0;    // peak of one micro-batch's activations (saved, and a
                                   // checkpointed block's recomputation on top)
  int64_t workspace_bytes = 0;     // backward scratch
  int64_t snapshot_bytes = 0;      // --buddy_every's memory copies, held for the run

  // Detail of gathered_bytes, for the tracker mapping.
  int64_t gathered_parameter_bytes = 0;
  int64_t unsharded_gradient_bytes = 0;

  // The ZeRO paper's model states: parameters + gradients + optimizer states
  // (the latter counting the fp32 master copy, so K = 12 for mixed Adam).
  int64_t model_state_bytes() const {
    return parameter_bytes + gradient_bytes + master_parameter_bytes + optimizer_state_bytes;
  }
  // The sum of the category peaks (an upper bound on the total's peak).
  int64_t sum_of_parts_bytes() const {
    return model_state_bytes() + gathered_bytes + comm_buffer_bytes + grad_workspace_bytes +
           activation_bytes + workspace_bytes + snapshot_bytes;
  }
  // The predicted peak of the total: what the tracker's peak_total_bytes
  // measures, and what budgets are checked against.
  int64_t peak_total_bytes = 0;
  int64_t total_bytes() const { return peak_total_bytes; }
  // The same bytes as MemoryTracker counts them (the planner's mapping):
  // kParameters = parameters + master + gathered parameters, kGradients =
  // gradients + unsharded gradients + gradient workspace, and the rest one
  // to one.
  int64_t tracker_bytes(MemoryCategory category) const;
};

// The estimate's parts in report order, with the names the CSV and the
// budget messages use: parameters, gradients, master_parameters,
// optimizer_state, gathered, comm_buffers, grad_workspace,
// activations, workspace, snapshots.
struct NamedBytes {
  const char* name;
  int64_t bytes;
};
std::vector<NamedBytes> EstimateParts(const RankMemoryEstimate& estimate);

// Validates the point (its family's config, ranks >= 1, micro_batch >= 1,
// the planner's strategy/group rules; exact only for the GPT, the one model
// with per-sequence products) and predicts. InvalidArgument saying what to
// change otherwise.
absl::StatusOr<RankMemoryEstimate> EstimateRankMemory(const MemoryPoint& point);

// The ZeRO paper's per-device model states for Psi parameters (Rajbhandari
// et al. 2019, Figure 1 and Section 5): with b = 2 (mixed) or 4 (fp32) bytes
// per parameter and gradient, K = 4 * (master ? 1 : 0) + 4 * states, N = the
// shard group (ranks, or group_size for hybrid_shard):
//   no_shard        b Psi + b Psi + K Psi
//   shard_optimizer b Psi + b Psi + K Psi / N
//   shard_grad_op   b Psi + (b + K) Psi / N
//   full_shard      (b + b + K) Psi / N
// Divisions round up (whole elements per rank). bf16 (4-byte gradients)
// takes b = 2 for the parameters and 4 for the gradients.
struct ModelStateBytes {
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_state_bytes = 0;  // including the fp32 master copy
  int64_t total_bytes() const { return parameter_bytes + gradient_bytes + optimizer_state_bytes; }
};
absl::StatusOr<ModelStateBytes> ZeroModelStateBytes(int64_t num_params,
                                                    proto::ShardingStrategy strategy, int ranks,
                                                    int group_size, Precision precision,
                                                    plan::OptimizerKind optimizer);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_MEMORY_ESTIMATE_H_
