// File: fsdp/plan/gpt_work.h
//
// The work of the GPT (fsdp/nn/gpt_spec.h) per plan unit and micro-batch,
// for the step-time model: its matrix products, as GptModel issues them,
// and its element-wise memory traffic. B = micro_batch, T = seq_len,
// C = d_model, H = heads, h = C / H, V = vocab, M = B T tokens:
//
//   block forward   qkv M x 3C x C, proj M x C x C, fc M x 4C x C,
//                   mlp proj M x C x 4C; attention per (sequence, head)
//                   Q K^T T x T x h and P V T x h x T, each half done
//                   (causal: the blocks above the diagonal are skipped)
//   block backward  per Linear m x n x k: the input gradient m x k x n and
//                   the weight gradient n x k x m; attention four products
//                   of the forward's sizes (dP, dV, dQ, dK), each half done
//   head            forward M x V x C; backward M x C x V and V x C x M
//   embedding       no products
//   checkpointed    (config.activation_checkpoint_every) the block's forward
//   block           again at the start of its backward: its forward
//                   products and traffic are added to the backward's
//
// Element-wise traffic, fp32 activations (4 bytes an element), per token:
//   block forward   2 LayerNorms 2 x 8C, residuals 2 x 12C, GELU 32C, the
//                   softmax's read and write of H T / 2 scores, 8 bytes each
//                   (none with flash attention, which keeps them in blocks)
//   block backward  twice the forward
//   head            LayerNorm 8C, the softmax and cross-entropy over V: 8V,
//                   twice that backward
//   embedding       12C forward and backward (gather, add position, write)
// These are estimates of what the kernels touch, not counts of it; element-
// wise work is a small share of a step here (docs/planning.md). No kernel
// count: this runtime's fixed costs are in its measured rates.
//
// A published run's framework (torchtitan, minGPT, Megatron-LM) is planned
// with its own element-wise work instead, per token from the block it ran
// (fsdp/plan/framework_kernels.h), and its kernel count; the products stay
// this GPT's.
#ifndef FSDP_PLAN_GPT_WORK_H_
#define FSDP_PLAN_GPT_WORK_H_

#include <vector>

#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/framework_kernels.h"
#include "fsdp/plan/step_time_model.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

// One UnitWork per plan unit of `plan` (a plan of GptUnitSpecs(config),
// summary or full), the work of its model units summed.
std::vector<UnitWork> GptUnitWork(const GptConfig& config, int micro_batch,
                                  const proto::ShardPlan& plan);

// The software whose element-wise kernels a run pays, and the block it ran.
struct FrameworkWork {
  KernelOptions options;  // software kThisRuntime: this runtime's count above
  BlockDimensions block;  // the run's block (framework_kernels.h)
};

// As above, with `framework`'s element-wise bytes and kernels in every unit
// (a checkpointed block's backward adds its forward's); kThisRuntime gives
// exactly the above.
std::vector<UnitWork> GptUnitWork(const GptConfig& config, int micro_batch,
                                  const proto::ShardPlan& plan, const FrameworkWork& framework);

// The model FLOPs of one micro-batch's forward and backward (every product
// above, recomputation left out), for MFU: what the model needs, not what
// the hardware runs.
double GptFlopsPerMicroBatch(const GptConfig& config, int micro_batch);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_GPT_WORK_H_
