// File: fsdp/plan/plan_tool_main.cc
//
// Plans a GPT (fsdp/nn/gpt_spec.h) without building it and prints the plan,
// its fingerprint, or the predicted memory per rank. Pure: no communication,
// so it answers for any world size, e.g. 7.5e9 parameters over 16384 ranks:
//
//   bazel run -c opt //fsdp/plan:plan_tool -- --print=memory
//       --layers=36 --d_model=4096 --heads=32 --vocab=50304 --seq_len=2048
//       --strategy=full_shard --world_size=16384 --mixed_precision
//
//   --print=plan         the ShardPlan as text protobuf (what --dump_plan shows)
//   --print=fingerprint  the plan's fingerprint, as 0x%016x
//   --print=memory       predicted peak bytes per rank, by category
//
// --print=memory plans without per-rank ranges (a summary plan), so it is
// instant at any world size; --print=plan builds every range.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/precision_policy.h"
#include "fsdp/plan/strategy.h"

ABSL_FLAG(std::string, print, "plan", "plan | fingerprint | memory");
ABSL_FLAG(std::string, strategy, "full_shard",
          "no_shard | shard_optimizer | shard_grad_op | full_shard | hybrid_shard");
ABSL_FLAG(int, world_size, 4, "Ranks in the job.");
ABSL_FLAG(int, group_size, 0, "hybrid_shard only: ranks per shard group (divides world_size).");
ABSL_FLAG(int64_t, min_unit_numel, 0, "Merge consecutive units below this many elements.");
ABSL_FLAG(int, prefetch_depth, 1, "Units all-gathered ahead of the one computing.");
ABSL_FLAG(int, max_gathers_in_flight, 2, "Most all-gathers outstanding at once.");
ABSL_FLAG(bool, mixed_precision, false, "bf16 params/grads, fp32 master and optimizer state.");
ABSL_FLAG(int, layers, 2, "GPT: transformer blocks.");
ABSL_FLAG(int, d_model, 64, "GPT: channels.");
ABSL_FLAG(int, heads, 4, "GPT: attention heads.");
ABSL_FLAG(int, vocab, 256, "GPT: vocabulary size.");
ABSL_FLAG(int, seq_len, 64, "GPT: sequence length.");
ABSL_FLAG(int, micro_batch, 0, "Sequences per micro-batch for activation bytes (0 = none).");
ABSL_FLAG(std::string, optimizer, "adam", "adam | sgd_momentum | sgd (memory only).");

namespace fsdp {
namespace plan {
namespace {

absl::StatusOr<OptimizerKind> ParseOptimizerFlag(const std::string& name) {
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "sgd_momentum") return OptimizerKind::kSgdMomentum;
  if (name == "sgd") return OptimizerKind::kSgd;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown --optimizer \"", name, "\"; valid names: adam, sgd_momentum, sgd"));
}

absl::Status Run() {
  GptConfig config;
  config.layers = absl::GetFlag(FLAGS_layers);
  config.d_model = absl::GetFlag(FLAGS_d_model);
  config.heads = absl::GetFlag(FLAGS_heads);
  config.vocab = absl::GetFlag(FLAGS_vocab);
  config.seq_len = absl::GetFlag(FLAGS_seq_len);
  FSDP_RETURN_IF_ERROR(ValidateGptConfig(config));

  PlannerOptions options;
  ShardingOptions& sharding = options.sharding;
  FSDP_ASSIGN_OR_RETURN(sharding.strategy, ParseStrategy(absl::GetFlag(FLAGS_strategy)));
  options.world_size = absl::GetFlag(FLAGS_world_size);
  sharding.group_size = absl::GetFlag(FLAGS_group_size);
  sharding.min_unit_numel = absl::GetFlag(FLAGS_min_unit_numel);
  sharding.prefetch_depth = absl::GetFlag(FLAGS_prefetch_depth);
  sharding.max_gathers_in_flight = absl::GetFlag(FLAGS_max_gathers_in_flight);
  if (absl::GetFlag(FLAGS_mixed_precision)) {
    FSDP_ASSIGN_OR_RETURN(sharding.precision, ParsePrecisionPolicy("bf16", "bf16"));
  }

  const std::string what = absl::GetFlag(FLAGS_print);
  if (what == "memory") {
    MemoryModelInputs inputs;
    FSDP_ASSIGN_OR_RETURN(inputs.optimizer, ParseOptimizerFlag(absl::GetFlag(FLAGS_optimizer)));
    if (absl::GetFlag(FLAGS_micro_batch) > 0) {
      GptActivationBreakdown activations =
          GptActivationBytesByUnit(config, absl::GetFlag(FLAGS_micro_batch));
      inputs.activation_bytes = activations.peak_bytes();
      inputs.workspace_bytes = activations.workspace_bytes;
    }
    FSDP_ASSIGN_OR_RETURN(RankMemoryPrediction memory,
                          PredictRankMemoryFromUnits(GptUnitSpecs(config), options, inputs));
    std::printf("%s, %lld parameters, %s over %d ranks\n%s", GptConfigToString(config).c_str(),
                static_cast<long long>(GptNumParams(config)),
                StrategyName(sharding.strategy), options.world_size,
                RankMemoryPredictionToText(memory).c_str());
    return absl::OkStatus();
  }
  if (what != "plan" && what != "fingerprint") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --print \"", what, "\"; valid: plan, fingerprint, memory"));
  }
  FSDP_ASSIGN_OR_RETURN(proto::ShardPlan plan, BuildShardPlan(GptUnitSpecs(config), options));
  if (what == "fingerprint") {
    std::printf("0x%016llx\n", static_cast<unsigned long long>(plan.fingerprint()));
  } else {
    std::fputs(ShardPlanToText(plan).c_str(), stdout);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace plan
}  // namespace fsdp

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status status = fsdp::plan::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "plan_tool: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
