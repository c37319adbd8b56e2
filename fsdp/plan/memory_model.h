// File: fsdp/plan/memory_model.h
//
// Predicts one rank's memory, by category, from a shard plan: the model state
// (parameters, gradients, fp32 master parameters, optimizer state) and the
// working buffers the strategy implies (gathered parameters, unsharded
// gradients, communication scratch). Activations come from the model
// (GptActivationBytes in fsdp/nn/gpt_spec.h) and are passed in.
//
// Every rank allocates whole padded shards, so the prediction is the same for
// all ranks of a plan. Each field is that category's PEAK over a step; the
// total is the sum of the peaks, an upper bound on the peak of the total.
//
// Model state per rank (P = total padded numel, S = total shard numel =
// P / N where N = shard group size; b = bytes of the parameter dtype, bf16 = 2
// when mixed_precision, fp32 = 4 otherwise; g = bytes of the gradient dtype,
// b unless fp32_gradients (the runtime's --precision=bf16: 2-byte parameters,
// 4-byte gradients) makes it 4; k = optimizer states per param, 2 for Adam,
// 1 for SGD with momentum, 0 for plain SGD):
//
//   strategy          parameters  gradients  master (mixed only)  optimizer
//   no_shard          b P         g P        4 P                  4 k P
//   shard_optimizer   b P         g P        4 S                  4 k S
//   shard_grad_op     b P         g S        4 S                  4 k S
//   full_shard        b S         g S        4 S                  4 k S
//   hybrid_shard      as full_shard with N = G
//
// which is the ZeRO paper's (Rajbhandari et al. 2019) baseline, P_os, P_os+g
// and P_os+g+p with Psi = P, N_d = N and K = 4 + 4k = 12 for mixed-precision
// Adam. shard_grad_op keeps parameters gathered (after the optimizer step each
// rank all-gathers its updated shard into the full buffer), as ZeRO-2 does.
//
// Working buffers (extra to the model state above):
//   gathered parameters   full_shard, hybrid: the largest sum of padded_numel
//                         over (1 + prefetch_depth) consecutive units, x b
//                         (the unit computing and the ones prefetched, in
//                         forward or backward order); others: 0, their
//                         parameter buffers are already whole. Not capped
//                         by max_gathers_in_flight: a finished prefetch
//                         still holds its buffer.
//   unsharded gradients   gradient-sharding strategies: the largest sum of
//                         padded_numel over 2 consecutive units, x g (the
//                         unit in backward and the previous one still being
//                         reduce-scattered); with accumulation (accum_steps
//                         > 1) every unit's, P x g, held until the last
//                         micro-batch's reductions; others: 0, they reduce
//                         in place.
//   communication scratch no_shard, shard_optimizer: the reduce-scatter's
//                         output shards, S x g (none with 2-byte gradients:
//                         they reduce in place); plus the loss and norm
//                         exchange buffer.
//   gradient workspace    2-byte gradients (mixed_precision without
//                         fp32_gradients: the runtime's --precision=bf16
//                         --reduce_dtype=bf16): one fp32 buffer of the
//                         largest unit's padded_numel, which the backward
//                         writes and the norm and optimizer read widened
//                         gradients from ([Note: bf16 gradients] in
//                         fsdp/train/unit_state.h).
//
// Mapping to fsdp/memory/memory_tracker.h categories: parameters =
// parameter + master + gathered; gradients = gradient + unsharded gradient
// + gradient workspace;
// optimizer_state; comm_buffers = communication scratch; activations and
// workspace = the inputs.
//
//   MemoryModelInputs inputs;
//   inputs.optimizer = OptimizerKind::kAdam;
//   inputs.activation_bytes = GptActivationBytes(config, micro_batch);
//   RankMemoryPrediction memory = PredictRankMemory(plan, inputs);
//   std::cout << RankMemoryPredictionToText(memory);
//
// For a huge model and world, PredictRankMemoryFromUnits plans without the
// per-rank ranges (O(params + units)), so it is instant even for 7.5e9
// parameters over 16384 ranks.
#ifndef FSDP_PLAN_MEMORY_MODEL_H_
#define FSDP_PLAN_MEMORY_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/nn/param_spec.h"
#include "fsdp/plan/shard_planner.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

enum class OptimizerKind {
  kAdam,         // two states per parameter (first and second moment)
  kSgdMomentum,  // one state per parameter
  kSgd,          // none
};

// Optimizer states per parameter: 2, 1 or 0.
int OptimizerStatesPerParam(OptimizerKind optimizer);

// What the plan does not know.
struct MemoryModelInputs {
  OptimizerKind optimizer = OptimizerKind::kAdam;
  // The model's peak saved activations on this rank for one micro-batch, and
  // its backward workspace, in bytes (e.g. GptActivationBytesByUnit(...)
  // .peak_bytes() and .workspace_bytes). 0 = predict model state only.
  int64_t activation_bytes = 0;
  int64_t workspace_bytes = 0;
  // --buddy_every (fsdp/checkpoint/memory_snapshots.h): two generations of
  // the rank's shard of the fp32 parameters and optimizer state, and, when
  // each shard has one holder, of the previous rank's.
  bool memory_snapshots = false;
  // Micro-batches per optimizer step. A gradient-sharding strategy
  // reduce-scatters only after the last one ([Note: accumulation] in
  // fsdp/train/train_step.cc): with more than one, every unit's unsharded
  // gradients are held from its first backward to the step's end.
  int accum_steps = 1;
};

// One rank's predicted peak bytes, by category.
// The trainer's one small communication buffer (fsdp/train/train_step.cc):
// the loss all-reduce uses 4 bytes of it, the gradient-norm exchange one
// 16-byte slot per shard-group rank (an exact 128-bit sum of squares from
// each; [Note: exact sum of squares] in fsdp/optim/grad_clip.h).
inline constexpr int64_t kNormExchangeBytesPerRank = 16;
inline constexpr int64_t NormExchangeBytes(int shard_group_size) {
  return kNormExchangeBytesPerRank * shard_group_size;
}

// --exact's exchange buffer (fsdp/train/exact_sums.h): every rank's largest
// contribution to each of the model's `param_tensors` gradients and to the
// loss, 4 bytes each, gathered from all `world_size` ranks; and the loss's
// 8-byte integer sum.
inline constexpr int64_t ExactExchangeBytes(int world_size, int64_t param_tensors) {
  return 4 * int64_t{world_size} * (param_tensors + 1) + 8;
}

// Bytes of one element of `dtype`.
int64_t DtypeBytes(proto::PlanDtype dtype);

// The parameter tensors the plan lays out (every unit's params).
int64_t ParamTensorCount(const proto::ShardPlan& plan);

struct RankMemoryPrediction {
  // Model state.
  int64_t parameter_bytes = 0;         // parameters in the compute dtype kept by the rank
  int64_t gradient_bytes = 0;          // gradients kept for the optimizer (full or shard)
  int64_t master_parameter_bytes = 0;  // fp32 master copy (mixed precision only)
  int64_t optimizer_state_bytes = 0;   // optimizer moments, in the optimizer-state dtype
  // Working buffers.
  int64_t gathered_parameter_bytes = 0;    // unsharded units beyond parameter_bytes
  int64_t unsharded_gradient_bytes = 0;    // unsharded unit gradients beyond gradient_bytes
  int64_t communication_scratch_bytes = 0; // reduce-scatter outputs + the loss/norm scalar
  int64_t gradient_workspace_bytes = 0;    // 2-byte gradients: one unit's fp32 gradients
  int64_t snapshot_bytes = 0;              // memory snapshots, held for the run
  // Inputs, copied from MemoryModelInputs.
  int64_t activation_bytes = 0;
  int64_t workspace_bytes = 0;

  // The ZeRO paper's "model states": parameters + gradients + optimizer
  // states (the latter including the fp32 master copy).
  int64_t model_state_bytes() const {
    return parameter_bytes + gradient_bytes + master_parameter_bytes + optimizer_state_bytes;
  }
  int64_t working_buffer_bytes() const {
    return gathered_parameter_bytes + unsharded_gradient_bytes + communication_scratch_bytes +
           gradient_workspace_bytes;
  }
  int64_t total_bytes() const {
    return model_state_bytes() + working_buffer_bytes() + activation_bytes + workspace_bytes +
           snapshot_bytes;
  }
};

// The bytes of --buddy_every's memory snapshots on the rank holding the
// largest shard (rank 0 of its shard group): two generations of its shard
// of the fp32 parameters and every optimizer state, and with one holder per
// shard (shard_group_size == world_size > 1) the same again for the buddy
// copy. fsdp/checkpoint/memory_snapshots.h allocates exactly this.
int64_t MemorySnapshotBytes(const proto::ShardPlan& plan, OptimizerKind optimizer);

// Predicts from the plan's unit-level fields (padded_numel, shard_numel), so
// a summary plan (include_rank_ranges = false) is enough.
RankMemoryPrediction PredictRankMemory(const proto::ShardPlan& plan,
                                       const MemoryModelInputs& inputs);

// Builds a summary plan for `units` (options.include_rank_ranges is ignored
// and taken as false) and predicts from it. Errors are BuildShardPlan's.
absl::StatusOr<RankMemoryPrediction> PredictRankMemoryFromUnits(
    const std::vector<UnitSpec>& units, const PlannerOptions& options,
    const MemoryModelInputs& inputs);

// One line per category with bytes and GiB, then the totals.
std::string RankMemoryPredictionToText(const RankMemoryPrediction& memory);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_MEMORY_MODEL_H_
