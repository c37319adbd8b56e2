// File: tests/fsdp/plan/published_results_test.cc
//
// Published large-scale results against the step-time model's predictions,
// one shipped cluster description per cluster and nothing tuned per result
// (docs/planning.md, "Checked against published results"). The published
// figures are inputs typed from their sources; every prediction is computed
// here, by the code plan_report uses (fsdp/plan/gpt_step_prediction.h).
//
// A result the model reproduces within the 25% band must stay inside it. A
// result it does not reproduce carries its explanation and its present
// error; the test fails when that error moves by more than 3 points, so a
// model change that moves it is seen (and the table in docs/planning.md
// redone), not taken as a pass.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/posix_file.h"
#include "fsdp/plan/gpt_step_prediction.h"
#include "fsdp/plan/hardware_description.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace plan {
namespace {

enum class Metric {
  kTokensPerSecondPerRank,
  kHardwareTflopsPerRank,  // recomputed forwards counted (Megatron-LM's convention)
};

struct Published {
  std::string name;
  std::string source;  // where the figure is from, and how sure it is
  std::string cluster;  // fsdp/plan/clusters/<cluster>.textproto
  std::string preset;   // a GptPresets() name, or empty for `config`
  GptConfig config;     // when there is no preset
  int micro_batch = 1;
  int activation_checkpoint_every = 0;
  bool flash_attention = true;
  proto::ShardingStrategy strategy = proto::FULL_SHARD;
  int ranks = 1;
  // The element-wise kernels its stated software runs
  // (fsdp/plan/framework_kernels.h), on the preset's original block or the
  // GPT block of `config`; `software` says where that is stated.
  KernelSoftware kernels = KernelSoftware::kPyTorchEager;
  bool dropout = false;
  bool reduce_in_fp32 = false;  // FSDP2's reduce_dtype=float32
  std::string software;
  Metric metric = Metric::kTokensPerSecondPerRank;
  double published = 0;
  bool in_band = true;          // within 25%; else `known_error` and `why`
  double known_error = 0;       // (predicted - published) / published
  std::string why;
};

std::vector<Published> Results() {
  std::vector<Published> results;
  Published r;
  // pytorch/torchtitan docs/performance.md, "Llama 3 performance numbers":
  // FSDP2 on 64 A100 80GB, local batch 1, 8192-token sequences (the
  // llama3 configs' default), selective layer checkpointing (every second
  // block), bf16: 2904 tokens/s per GPU (WPS).
  r = {};
  r.name = "torchtitan Llama 3 8B, 64 A100";
  r.source = "pytorch/torchtitan docs/performance.md (typed from the file)";
  r.cluster = "a100_ib200";
  r.preset = "llama3-8b";
  r.micro_batch = 1;
  r.activation_checkpoint_every = 2;
  r.ranks = 64;
  r.software = "torchtitan train_configs/llama3_8b.toml (\"a preset for 64 A100 GPUs\"): "
               "compile = false, norm_type = \"rmsnorm\" (the eager one, not fused_rmsnorm); "
               "the model's SDPA (flash) attention; no mixed_precision_reduce, so "
               "torchtitan's default float32 reduce-scatters";
  r.reduce_in_fp32 = true;
  r.published = 2904;
  results.push_back(r);
  // Same file and table: Llama 3 70B, full checkpointing, 331 tokens/s per GPU.
  r = {};
  r.name = "torchtitan Llama 3 70B, 64 A100";
  r.source = "pytorch/torchtitan docs/performance.md (typed from the file)";
  r.cluster = "a100_ib200";
  r.preset = "llama3-70b";
  r.micro_batch = 1;
  r.activation_checkpoint_every = 1;
  r.ranks = 64;
  r.software = "torchtitan's llama3_70b.toml of the same table: eager (no compile), rmsnorm, "
               "float32 reduce-scatters";
  r.reduce_in_fp32 = true;
  r.published = 331;
  results.push_back(r);
  // Same file, "Table 1": Llama 3.1 8B, FSDP on 8 H100 (96 GB HBM2e, 2.4
  // TB/s, 500 W power limit), local batch 2, selective (op) checkpointing,
  // no torch.compile: 5,762 tokens/s per GPU. Selective op checkpointing
  // recomputes few products: modelled as none.
  r = {};
  r.name = "torchtitan Llama 3.1 8B, 8 H100";
  r.source = "pytorch/torchtitan docs/performance.md, Table 1 (typed from the file)";
  r.cluster = "h100_nvlink_ib400";
  r.preset = "llama3-8b";
  r.micro_batch = 2;
  r.ranks = 8;
  r.software = "Table 1's row: FSDP without torch.compile (eager), torchtitan's float32 "
               "reduce-scatters";
  r.reduce_in_fp32 = true;
  r.published = 5762;
  r.in_band = false;
  r.known_error = 0.720;
  r.why = "the GPUs ran at a 500 W power limit with 2.4 TB/s HBM2e (\"96 GB\"), where the "
          "description is the 700 W, 3.35 TB/s H100 SXM5 and its product rates were measured "
          "on one; torchtitan's 33-39% MFU for this run against the 52% predicted is that "
          "part, not the eager element-wise work (counted: 0.32 s of a 1.65 s step)";
  results.push_back(r);
  // Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data
  // Parallel", VLDB 2023, section 5.4 and Figure 7(b): minGPT 175B
  // (vocabulary 50000, block size 2048), full sharding with prefetching,
  // activation checkpointing, bf16, Adam, batch 1 and 2 on 128 to 512 A100
  // 80GB: "more than 173 and 186 TFLOPS per GPU with batch size equal to 1
  // and 2 respectively", "approximately 55% and 60% of GPU hardware
  // utilization", linear from 128 to 512 GPUs; batch 2 on 128 GPUs ran lower
  // (memory defragmentation), so batch 2 is taken at 512. Its dimensions are
  // GPT-3's (96 x 12288, 96 heads). How it counts FLOPs is not stated there
  // ("hardware utilization" suggests recomputation counted): compared with
  // recomputation counted. Counted without, the same predictions are 153.1
  // and 154.3 TFLOPS (-11.5%, -17.0%): inside the band either way.
  for (const auto& [batch, ranks, tflops] :
       std::vector<std::tuple<int, int, double>>{{1, 128, 173}, {2, 512, 186}}) {
    r = {};
    r.name = "FSDP paper GPT-175B, " + std::to_string(ranks) + " A100, batch " +
             std::to_string(batch);
    r.source = "Zhao et al. VLDB 2023, section 5.4";
    r.cluster = "a100_ib200";
    r.config = GptDimensions(96, 12288, 96, 50000, 2048);
    r.micro_batch = batch;
    r.activation_checkpoint_every = 1;
    r.flash_attention = false;
    r.ranks = ranks;
    r.software = "minGPT in eager PyTorch (the paper names no compiler or fused kernels): "
                 "nn.LayerNorm, its explicit attention (scale, mask, softmax, dropout over "
                 "the full T x T), its tanh GELU, and dropout at minGPT's default 0.1";
    r.dropout = true;
    r.metric = Metric::kHardwareTflopsPerRank;
    r.published = tflops;
    results.push_back(r);
  }
  // Rajbhandari et al., "ZeRO", SC 2020, abstract: "trains large models of
  // over 100B parameter with super-linear speedup on 400 GPUs, achieving
  // throughput of 15 Petaflops" (37.5 TFLOPS per GPU, 30% of the V100's
  // peak; 25 DGX-2, 800 Gbps). FROM MEMORY: the shape (125 layers of width 8192,
  // 1024-token sequences) and 32 heads are recalled, not verified; the run
  // combined ZeRO stage 2 with 16-way Megatron tensor parallelism, which
  // this framework does not have: predicted as stage 2 (shard_grad_op) over
  // 400 ranks, the same products per GPU.
  r = {};
  r.name = "ZeRO 100B, 400 V100";
  r.source = "Rajbhandari et al. SC 2020, abstract; the shape from memory";
  r.cluster = "v100_dgx2_ib800";
  r.config = GptDimensions(125, 8192, 32, 50257, 1024);
  r.micro_batch = 1;
  r.activation_checkpoint_every = 1;
  r.flash_attention = false;
  r.strategy = proto::SHARD_GRAD_OP;
  r.ranks = 400;
  r.kernels = KernelSoftware::kFused;
  r.dropout = true;
  r.software = "Megatron-LM's model code (the paper's 100B ran with its tensor parallelism): "
               "fused LayerNorm, scale-mask-softmax, bias-GELU and bias-dropout-add, fp16, "
               "dropout 0.1";
  r.metric = Metric::kHardwareTflopsPerRank;
  r.published = 37.5;
  results.push_back(r);
  return results;
}

// What the comparison reads from one prediction.
struct Figures {
  double compared = 0;           // in the metric's unit
  double model_tflops = 0;       // per rank, recomputation left out
  double exposed_comm_s = 0, contention_s = 0, step_s = 0;
};

// The model as shipped; `without_framework` takes this runtime's own
// element-wise count and reductions and drops the description's
// framework_overhead (the model before the framework was counted), for the
// table only.
absl::StatusOr<Figures> Predict(const Published& r, bool without_framework = false) {
  const std::string path = "fsdp/plan/clusters/" + r.cluster + ".textproto";
  absl::StatusOr<std::string> text = base::ReadWholeFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<proto::HardwareDescription> hw = ParseHardwareDescription(*text, path);
  if (!hw.ok()) return hw.status();
  GptRun run;
  if (!r.preset.empty()) {
    absl::StatusOr<GptPreset> preset = FindGptPreset(r.preset);
    if (!preset.ok()) return preset.status();
    run.config = preset->config;
    run.framework_block = preset->block;
  } else {
    run.config = r.config;
  }
  run.kernels = r.kernels;
  run.dropout = r.dropout;
  run.reduce_in_fp32 = r.reduce_in_fp32;
  if (without_framework) {
    run.kernels = KernelSoftware::kThisRuntime;
    run.reduce_in_fp32 = false;
    hw->clear_framework_overhead();
  }
  run.config.activation_checkpoint_every = r.activation_checkpoint_every;
  run.config.flash_attention = r.flash_attention;
  run.micro_batch = r.micro_batch;
  run.bf16 = true;
  run.strategy = r.strategy;
  run.ranks = r.ranks;
  absl::StatusOr<GptStepPrediction> p = PredictGptStep(run, *hw);
  if (!p.ok()) return p.status();
  Figures f;
  f.compared = r.metric == Metric::kTokensPerSecondPerRank ? p->tokens_per_s / r.ranks
                                                           : p->hardware_flops_per_s / 1e12;
  f.model_tflops = p->model_flops_per_s / 1e12;
  f.exposed_comm_s = p->step.exposed_comm_s;
  f.contention_s = p->step.contention_s;
  f.step_s = p->step.step_s;
  return f;
}

TEST(PublishedResultsTest, PredictionsStayWhereTheDocumentSays) {
  std::printf(
      "| result | published | predicted | error | before: this runtime's kernels and "
      "reductions | model TFLOP/s | step s | contention s | exposed comm s |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  for (const Published& r : Results()) {
    absl::StatusOr<Figures> predicted = Predict(r);
    ASSERT_TRUE(predicted.ok()) << r.name << ": " << predicted.status();
    absl::StatusOr<Figures> before = Predict(r, /*without_framework=*/true);
    ASSERT_TRUE(before.ok()) << r.name << ": " << before.status();
    const double error = (predicted->compared - r.published) / r.published;
    std::printf("| %s | %.4g | %.4g | %+.1f%% | %.4g (%+.1f%%) | %.4g | %.3f | %.3f | %.3f |\n",
                r.name.c_str(), r.published, predicted->compared, 100 * error, before->compared,
                100 * (before->compared - r.published) / r.published, predicted->model_tflops,
                predicted->step_s, predicted->contention_s, predicted->exposed_comm_s);
    // The framework's kernels only add time.
    EXPECT_LE(predicted->compared, before->compared) << r.name;
    if (r.in_band) {
      EXPECT_LE(std::abs(error), 0.25) << r.name << " (" << r.source << ") left the 25% band";
    } else {
      EXPECT_NEAR(error, r.known_error, 0.03)
          << r.name << " moved from its documented error; why it was off: " << r.why;
    }
  }
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
