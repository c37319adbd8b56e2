// File: fsdp/plan/gpt_step_prediction.h
//
// One configuration of a GPT run, predicted: builds the summary shard plan,
// the units' work (gpt_work.h) and replays the step (step_time_model.h),
// then turns the step time into tokens per second and MFU. What
// examples/plan_report prints per row and what the published-results test
// (tests/fsdp/plan/published_results_test.cc) checks, from one function.
//
//   GptRun run;  run.config = ...;  run.micro_batch = 1;  run.bf16 = true;
//   run.strategy = proto::FULL_SHARD;  run.ranks = 64;
//   FSDP_ASSIGN_OR_RETURN(GptStepPrediction p, PredictGptStep(run, hw));
//   p.tokens_per_s / run.ranks   // per rank
//
// Model presets: the dimensions of well-known models in this GPT family
// (fsdp/nn/gpt_spec.h: LayerNorm, a 4C GELU MLP, one K and V per head, an
// untied head). Where a model differs (Llama's SwiGLU MLP of three
// matrices, grouped-query attention, RMSNorm, rotary positions), the preset
// keeps the layers, heads, vocabulary and sequence length and picks the
// width whose 12 C^2 block parameters equal the original block's, rounded
// to a multiple of the heads: the products' FLOPs per token match to about
// 1%; attention's, which grow with the width, are a few percent high.
#ifndef FSDP_PLAN_GPT_STEP_PREDICTION_H_
#define FSDP_PLAN_GPT_STEP_PREDICTION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/framework_kernels.h"
#include "fsdp/plan/step_time_model.h"
#include "proto/hardware.pb.h"
#include "proto/shard_plan.pb.h"

namespace fsdp {
namespace plan {

struct GptRun {
  GptConfig config;
  int micro_batch = 1;  // sequences per rank per micro-batch
  int accum = 1;        // micro-batches per step
  bool bf16 = false;    // train_gpt's --precision=bf16 (bf16 params and reductions)
  // With bf16: gradients reduced (and handed to the optimizer) in fp32, as
  // FSDP2's MixedPrecisionPolicy(reduce_dtype=float32) does (torchtitan's
  // default). Not this runtime's: its bf16 reduces in bf16.
  bool reduce_in_fp32 = false;
  proto::ShardingStrategy strategy = proto::FULL_SHARD;
  int ranks = 1;
  int group_size = 0;  // hybrid_shard's G, else 0
  int prefetch_depth = 1;
  int max_gathers_in_flight = 2;
  bool grad_clip = true;
  // The software whose element-wise kernels the run pays
  // (fsdp/plan/framework_kernels.h): this runtime's by default. Another's
  // runs `framework_block` (a width of 0: the GPT of `config`) with
  // activations of bf16 ? 2 : 4 bytes, config.flash_attention and `dropout`.
  KernelSoftware kernels = KernelSoftware::kThisRuntime;
  BlockDimensions framework_block;
  bool dropout = false;
};

struct GptStepPrediction {
  StepTimePrediction step;
  double tokens_per_s = 0;           // over all ranks
  double model_flops_per_s = 0;      // per rank, recomputation left out
  double hardware_flops_per_s = 0;   // per rank, recomputed forwards included
  double mfu = 0;                    // model_flops_per_s / the rank's peak
};

// InvalidArgument from the planner or the step model, naming the input.
absl::StatusOr<GptStepPrediction> PredictGptStep(const GptRun& run,
                                                 const proto::HardwareDescription& hw);

// A preset's dimensions and where they come from.
struct GptPreset {
  std::string name;       // "gpt3-175b", "llama3-8b", ...
  GptConfig config;       // layers, d_model, heads, vocab, seq_len
  std::string source;     // the publication of the original dimensions
  std::string approximation;  // how this GPT differs; empty when it does not
  BlockDimensions block;      // the original's block, for its framework's kernels
};

const std::vector<GptPreset>& GptPresets();

// A GptConfig with these dimensions and every other field at its default.
GptConfig GptDimensions(int layers, int d_model, int heads, int vocab, int seq_len);

// The preset called `name`, or InvalidArgument listing the names.
absl::StatusOr<GptPreset> FindGptPreset(absl::string_view name);

}  // namespace plan
}  // namespace fsdp

#endif  // FSDP_PLAN_GPT_STEP_PREDICTION_H_
