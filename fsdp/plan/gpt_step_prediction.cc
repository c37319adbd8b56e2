// File: fsdp/plan/gpt_step_prediction.cc
#include "fsdp/plan/gpt_step_prediction.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fsdp/plan/gpt_work.h"
#include "fsdp/plan/hardware_description.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"

namespace fsdp {
namespace plan {
namespace {

// The forward and backward products per micro-batch the hardware runs,
// recomputed forwards included.
double HardwareFlops(const std::vector<UnitWork>& units) {
  double flops = 0;
  for (const UnitWork& unit : units) {
    for (const auto* list : {&unit.forward_products, &unit.backward_products}) {
      for (const ProductShape& p : *list) flops += 2.0 * p.m * p.n * p.k * p.count;
    }
  }
  return flops;
}

}  // namespace

GptConfig GptDimensions(int layers, int d_model, int heads, int vocab, int seq_len) {
  GptConfig c;
  c.layers = layers;
  c.d_model = d_model;
  c.heads = heads;
  c.vocab = vocab;
  c.seq_len = seq_len;
  return c;
}

absl::StatusOr<GptStepPrediction> PredictGptStep(const GptRun& run,
                                                 const proto::HardwareDescription& hw) {
  PlannerOptions planner;
  FSDP_ASSIGN_OR_RETURN(planner.sharding.strategy, StrategyOfPlan(run.strategy));
  planner.world_size = run.ranks;
  planner.sharding.group_size = run.group_size;
  planner.sharding.prefetch_depth = run.prefetch_depth;
  planner.sharding.max_gathers_in_flight = run.max_gathers_in_flight;
  if (run.bf16) {  // bf16 parameters and gradients
    planner.sharding.precision.param_dtype = comm::Dtype::kBFloat16;
    planner.sharding.precision.reduce_dtype = comm::Dtype::kBFloat16;
  }
  planner.include_rank_ranges = false;
  FSDP_ASSIGN_OR_RETURN(proto::ShardPlan plan, BuildShardPlan(GptUnitSpecs(run.config), planner));

  StepModelInputs in;
  FrameworkWork framework;
  framework.options.software = run.kernels;
  framework.options.activation_bytes = run.bf16 ? 2 : 4;
  framework.options.flash_attention = run.config.flash_attention;
  framework.options.dropout = run.dropout;
  framework.block = run.framework_block.width > 0
                        ? run.framework_block
                        : GptBlockDimensions(run.config.d_model, run.config.heads);
  in.units = GptUnitWork(run.config, run.micro_batch, plan, framework);
  in.strategy = run.strategy;
  in.world_size = run.ranks;
  in.group_size = run.group_size;
  in.product_dtype = run.bf16 ? ProductDtype::kBf16 : ProductDtype::kFp32;
  in.param_bytes = run.bf16 ? 2 : 4;
  in.grad_bytes = run.bf16 && !run.reduce_in_fp32 ? 2 : 4;
  in.accum_steps = run.accum;
  in.prefetch_depth = run.prefetch_depth;
  in.max_gathers_in_flight = run.max_gathers_in_flight;
  in.grad_clip = run.grad_clip;
  GptStepPrediction p;
  FSDP_ASSIGN_OR_RETURN(p.step, PredictStepTime(in, hw));

  const double tokens = static_cast<double>(run.micro_batch) * run.config.seq_len * run.accum;
  p.tokens_per_s = tokens * run.ranks / p.step.step_s;
  p.model_flops_per_s = GptFlopsPerMicroBatch(run.config, run.micro_batch) * run.accum /
                        p.step.step_s;
  p.hardware_flops_per_s = HardwareFlops(in.units) * run.accum / p.step.step_s;
  // A rank with several threads is measured against the processors they use.
  p.mfu = p.model_flops_per_s /
          (PeakProductRate(hw, in.product_dtype) * p.step.rank_share * p.step.rank_threads);
  return p;
}

const std::vector<GptPreset>& GptPresets() {
  static const auto* presets = new std::vector<GptPreset>{
      {"gpt3-175b", GptDimensions(96, 12288, 96, 50257, 2048),
       "Brown et al. 2020, \"Language Models are Few-Shot Learners\", Table 2.1 (GPT-3 175B: "
       "96 layers, d_model 12288, 96 heads, context 2048; the GPT-2 vocabulary of 50257)",
       "", GptBlockDimensions(12288, 96)},
      // Llama: block parameters 2 C^2 + 2 C kv (attention with kv = C x
      // kv_heads / heads) + 3 C F (SwiGLU of width F); the GPT block has 12 C'^2.
      //   8B:   C 4096,  F 14336, kv 1024: 13.0 C^2   -> C' 4263 -> 4256 (32 heads)
      //   70B:  C 8192,  F 28672, kv 1024: 12.75 C^2  -> C' 8444 -> 8448 (64 heads)
      //   405B: C 16384, F 53248, kv 1024: 11.875 C^2 -> C' 16298 -> 16256 (128 heads)
      {"llama3-8b", GptDimensions(32, 4256, 32, 128256, 8192),
       "Dubey et al. 2024, \"The Llama 3 Herd of Models\", Table 3 (8B: 32 layers, width "
       "4096, FFN 14336, 32 heads, 8 key/value heads, vocabulary 128256; 8192-token sequences)",
       "width 4256 for Llama's 4096: the GPT block's 12 C^2 parameters equal Llama's 13.0 x "
       "4096^2 (SwiGLU FFN 14336 wide, grouped-query attention with 8 K/V heads)",
       {BlockFamily::kLlama, 4096, 14336, 32, 8}},
      {"llama3-70b", GptDimensions(80, 8448, 64, 128256, 8192),
       "Dubey et al. 2024, Table 3 (70B: 80 layers, width 8192, FFN 28672, 64 heads, 8 "
       "key/value heads, vocabulary 128256)",
       "width 8448 for Llama's 8192: 12 C^2 equal to Llama's 12.75 x 8192^2 (SwiGLU FFN 28672, "
       "8 K/V heads)",
       {BlockFamily::kLlama, 8192, 28672, 64, 8}},
      {"llama3-405b", GptDimensions(126, 16256, 128, 128256, 8192),
       "Dubey et al. 2024, Table 3 (405B: 126 layers, width 16384, FFN 53248, 128 heads, 8 "
       "key/value heads, vocabulary 128256)",
       "width 16256 for Llama's 16384: 12 C^2 equal to Llama's 11.875 x 16384^2 (SwiGLU FFN "
       "53248, 8 K/V heads)",
       {BlockFamily::kLlama, 16384, 53248, 128, 8}},
  };
  return *presets;
}

absl::StatusOr<GptPreset> FindGptPreset(absl::string_view name) {
  std::vector<std::string> names;
  for (const GptPreset& preset : GptPresets()) {
    if (preset.name == name) return preset;
    names.push_back(preset.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("no model preset \"", name, "\"; presets are ",
                                                 absl::StrJoin(names, ", ")));
}

}  // namespace plan
}  // namespace fsdp
