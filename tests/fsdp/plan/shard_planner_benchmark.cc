// File: tests/fsdp/plan/shard_planner_benchmark.cc
//
// Times BuildShardPlan and PredictRankMemoryFromUnits for a GPT-like model of
// the ZeRO paper's size (7.5e9 parameters) at world sizes up to 16384, with
// and without per-rank ranges. Prints wall times; asserts nothing.
//
//   bazel run -c opt //tests/fsdp/plan:shard_planner_benchmark
#include <cstdio>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/plan/shard_planner.h"
#include "tests/fsdp/plan/test_units.h"

int main() {
  using namespace fsdp::plan;
  const testing::GptLikeShape shape{/*layers=*/36, /*d_model=*/4096, /*vocab=*/50304,
                                    /*seq_len=*/2048};
  const std::vector<fsdp::UnitSpec> units = testing::GptLikeUnits(shape);
  std::printf("GPT-like model: %lld parameters, %zu units\n",
              static_cast<long long>(testing::GptLikeNumParams(shape)), units.size());
  for (int world_size : {64, 1024, 16384}) {
    for (bool ranges : {false, true}) {
      PlannerOptions options;
      options.sharding.strategy = fsdp::Strategy::kFullShard;
      options.world_size = world_size;
      options.sharding.precision = *fsdp::ParsePrecisionPolicy("bf16", "bf16");
      options.include_rank_ranges = ranges;
      const absl::Time start = absl::Now();
      absl::StatusOr<fsdp::proto::ShardPlan> plan = BuildShardPlan(units, options);
      const absl::Duration elapsed = absl::Now() - start;
      if (!plan.ok()) {
        std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
        return 1;
      }
      std::printf("world %6d  rank ranges %-3s  BuildShardPlan %8.3f ms  (%lld bytes serialized)\n",
                  world_size, ranges ? "yes" : "no", absl::ToDoubleMilliseconds(elapsed),
                  static_cast<long long>(plan->ByteSizeLong()));
    }
    PlannerOptions options;
    options.sharding.strategy = fsdp::Strategy::kFullShard;
    options.world_size = world_size;
    options.sharding.precision = *fsdp::ParsePrecisionPolicy("bf16", "bf16");
    const absl::Time start = absl::Now();
    absl::StatusOr<RankMemoryPrediction> memory =
        PredictRankMemoryFromUnits(units, options, MemoryModelInputs{});
    const absl::Duration elapsed = absl::Now() - start;
    if (!memory.ok()) return 1;
    std::printf("world %6d  PredictRankMemoryFromUnits %8.3f ms  model state %lld B\n",
                world_size, absl::ToDoubleMilliseconds(elapsed),
                static_cast<long long>(memory->model_state_bytes()));
  }
  return 0;
}
