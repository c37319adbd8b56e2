// File: tests/fsdp/plan/memory_model_test.cc
//
// The memory model against first principles: the ZeRO paper's per-device
// model-state formulas (Rajbhandari et al. 2019, section 5) for many (Psi,
// N_d), a brute-force simulation of which units are gathered at each step of
// forward and backward, and the summary (range-free) plan path.
#include "fsdp/plan/memory_model.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"
#include "gtest/gtest.h"
#include "tests/fsdp/plan/test_units.h"

namespace fsdp {
namespace plan {
namespace {

using ::fsdp::plan::testing::GptLikeShape;
using ::fsdp::plan::testing::GptLikeUnits;
using ::fsdp::plan::testing::UnitsWithParamNumels;

// ---- The ZeRO paper, written out independently of the model -----------------

enum class ZeroStage { kBaseline, kOs, kOsG, kOsGP };

ZeroStage StageOf(proto::ShardingStrategy strategy) {
  switch (strategy) {
    case proto::NO_SHARD:
      return ZeroStage::kBaseline;
    case proto::SHARD_OPTIMIZER:
      return ZeroStage::kOs;
    case proto::SHARD_GRAD_OP:
      return ZeroStage::kOsG;
    default:
      return ZeroStage::kOsGP;
  }
}

// Per-device bytes of the three model-state terms, for Psi parameters over
// N_d data-parallel ranks: parameters of `param_bytes` each, gradients of
// `grad_bytes` each, and K bytes of optimizer state per parameter.
//   baseline  (2 + 2 + K) Psi
//   P_os      2 Psi + 2 Psi + K Psi / N_d
//   P_os+g    2 Psi + (2 + K) Psi / N_d
//   P_os+g+p  (2 + 2 + K) Psi / N_d
// (the paper's 2s are param_bytes and grad_bytes; in mixed precision they are 2).
// In doubles, exact for the sizes used here (below 2^53).
struct ZeroTerms {
  double parameters, gradients, optimizer_states;
  double total() const { return parameters + gradients + optimizer_states; }
};

ZeroTerms ZeroModelState(ZeroStage stage, double psi, double n_d, double param_bytes,
                         double grad_bytes, double k) {
  const bool os = stage != ZeroStage::kBaseline;
  const bool g = stage == ZeroStage::kOsG || stage == ZeroStage::kOsGP;
  const bool p = stage == ZeroStage::kOsGP;
  return ZeroTerms{param_bytes * (p ? psi / n_d : psi), grad_bytes * (g ? psi / n_d : psi),
                   k * (os ? psi / n_d : psi)};
}

struct Precision {
  bool mixed;
  OptimizerKind optimizer;
  int64_t param_bytes, grad_bytes, k;  // K: optimizer-state bytes per parameter
};

// K = 12 for mixed-precision Adam (fp32 master + two fp32 moments), as in
// the paper; without mixed precision the fp32 parameters are their own master.
const Precision kPrecisions[] = {
    {true, OptimizerKind::kAdam, 2, 2, 12},
    {true, OptimizerKind::kSgdMomentum, 2, 2, 8},
    {true, OptimizerKind::kSgd, 2, 2, 4},
    {false, OptimizerKind::kAdam, 4, 4, 8},
    {false, OptimizerKind::kSgdMomentum, 4, 4, 4},
    {false, OptimizerKind::kSgd, 4, 4, 0},
};

PlannerOptions OptionsFor(proto::ShardingStrategy strategy, int world_size, int group_size,
                          bool mixed) {
  PlannerOptions options;
  options.sharding.strategy = *StrategyOfPlan(strategy);
  options.world_size = world_size;
  options.sharding.group_size = strategy == proto::HYBRID_SHARD ? group_size : 0;
  if (mixed) options.sharding.precision = *ParsePrecisionPolicy("bf16", "bf16");
  return options;
}

RankMemoryPrediction Predict(const std::vector<UnitSpec>& units, const PlannerOptions& options,
                             OptimizerKind optimizer) {
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(units, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  MemoryModelInputs inputs;
  inputs.optimizer = optimizer;
  return PredictRankMemory(*plan, inputs);
}

void ExpectMatchesZero(const RankMemoryPrediction& memory, const ZeroTerms& zero) {
  EXPECT_EQ(static_cast<double>(memory.parameter_bytes), zero.parameters);
  EXPECT_EQ(static_cast<double>(memory.gradient_bytes), zero.gradients);
  EXPECT_EQ(static_cast<double>(memory.master_parameter_bytes + memory.optimizer_state_bytes),
            zero.optimizer_states);
  EXPECT_EQ(static_cast<double>(memory.model_state_bytes()), zero.total());
}

const proto::ShardingStrategy kWorldStrategies[] = {
    proto::NO_SHARD, proto::SHARD_OPTIMIZER, proto::SHARD_GRAD_OP, proto::FULL_SHARD};

TEST(MemoryModelZeroTest, EqualsThePaperWhenUnitsNeedNoPadding) {
  // Units whose sizes are multiples of N_d have no padding, so the plan's
  // model state must equal the paper's formulas exactly.
  for (int64_t n_d : {1, 2, 3, 4, 7, 8, 16, 64, 1024}) {
    for (int64_t multiple : {1, 5, 1000, 123457}) {
      const std::vector<UnitSpec> units =
          UnitsWithParamNumels({{n_d * multiple}, {n_d * 3, n_d * 2 * multiple}, {n_d}});
      const int64_t psi = n_d * (multiple + 3 + 2 * multiple + 1);
      for (const Precision& precision : kPrecisions) {
        for (proto::ShardingStrategy strategy : kWorldStrategies) {
          SCOPED_TRACE(absl::StrCat("N_d ", n_d, " Psi ", psi, " strategy ", strategy,
                                    " mixed ", precision.mixed, " K ", precision.k));
          ExpectMatchesZero(
              Predict(units, OptionsFor(strategy, n_d, 0, precision.mixed), precision.optimizer),
              ZeroModelState(StageOf(strategy), psi, n_d, precision.param_bytes,
                             precision.grad_bytes, precision.k));
        }
      }
    }
  }
}

TEST(MemoryModelZeroTest, WithinPaddingOfThePaperForAnySize) {
  // With arbitrary sizes each unit pads by fewer than N_d elements, so the
  // prediction lies between the paper's formula at Psi and at
  // Psi + units * (N_d - 1).
  for (int64_t n_d : {2, 3, 5, 8, 13, 100, 16384}) {
    for (int64_t psi_seed : {1, 17, 99991, 7500000}) {
      const std::vector<std::vector<int64_t>> numels = {
          {psi_seed}, {psi_seed / 3 + 1, 11}, {2 * psi_seed + 7}};
      const std::vector<UnitSpec> units = UnitsWithParamNumels(numels);
      int64_t psi = 0;
      for (const UnitSpec& unit : units) psi += unit.numel();
      const int64_t max_padding = static_cast<int64_t>(units.size()) * (n_d - 1);
      for (const Precision& precision : kPrecisions) {
        for (proto::ShardingStrategy strategy : kWorldStrategies) {
          SCOPED_TRACE(absl::StrCat("N_d ", n_d, " Psi ", psi, " strategy ", strategy));
          const RankMemoryPrediction memory =
              Predict(units, OptionsFor(strategy, n_d, 0, precision.mixed), precision.optimizer);
          const ZeroTerms low = ZeroModelState(StageOf(strategy), psi, n_d, precision.param_bytes,
                                               precision.grad_bytes, precision.k);
          const ZeroTerms high =
              ZeroModelState(StageOf(strategy), psi + max_padding, n_d, precision.param_bytes,
                             precision.grad_bytes, precision.k);
          EXPECT_GE(static_cast<double>(memory.model_state_bytes()), low.total());
          EXPECT_LE(static_cast<double>(memory.model_state_bytes()), high.total());
        }
      }
    }
  }
}

TEST(MemoryModelZeroTest, HybridShardIsStageThreeOverTheGroup) {
  // hybrid_shard with G ranks per group keeps what full_shard over G would.
  for (int world_size : {4, 8, 12}) {
    for (int group_size = 1; group_size <= world_size; ++group_size) {
      if (world_size % group_size != 0) continue;
      const std::vector<UnitSpec> units = UnitsWithParamNumels({{24 * 5}, {24 * 7, 24}});
      const int64_t psi = 24 * 13;  // 24 is a multiple of every group size here
      const RankMemoryPrediction memory = Predict(
          units, OptionsFor(proto::HYBRID_SHARD, world_size, group_size, true),
          OptimizerKind::kAdam);
      SCOPED_TRACE(absl::StrCat("world ", world_size, " group ", group_size));
      ExpectMatchesZero(memory, ZeroModelState(ZeroStage::kOsGP, psi, group_size, 2, 2, 12));
    }
  }
}

TEST(MemoryModelZeroTest, SevenPointFiveBillionOverSixteenThousandRanksIsInstant) {
  // The paper's running example: Psi = 7.5e9, N_d = 64 gives 1.9 GB with
  // P_os+g+p (Table 1: 16 x 7.5e9 / 64 = 1.875e9). Plan a GPT-like model of
  // that size without rank ranges; it must be within padding of the formula.
  const GptLikeShape shape{/*layers=*/36, /*d_model=*/4096, /*vocab=*/50304, /*seq_len=*/2048};
  const std::vector<UnitSpec> units = GptLikeUnits(shape);
  const int64_t psi = testing::GptLikeNumParams(shape);
  ASSERT_GT(psi, int64_t{7'400'000'000});
  for (int n_d : {64, 1024, 16384}) {
    absl::StatusOr<RankMemoryPrediction> memory = PredictRankMemoryFromUnits(
        units, OptionsFor(proto::FULL_SHARD, n_d, 0, true), MemoryModelInputs{});
    ASSERT_TRUE(memory.ok()) << memory.status();
    const double max_padding = static_cast<double>(units.size()) * (n_d - 1);
    const ZeroTerms low = ZeroModelState(ZeroStage::kOsGP, psi, n_d, 2, 2, 12);
    const ZeroTerms high = ZeroModelState(ZeroStage::kOsGP, psi + max_padding, n_d, 2, 2, 12);
    EXPECT_GE(static_cast<double>(memory->model_state_bytes()), low.total());
    EXPECT_LE(static_cast<double>(memory->model_state_bytes()), high.total());
  }
}

// ---- Working buffers, by simulating the schedule -------------------------------

// The most padded elements unsharded at once when unit u computes together
// with the `ahead` units after it (forward) or before it (backward).
int64_t SimulatedPeakGathered(const proto::ShardPlan& plan, int ahead) {
  const int n = plan.units_size();
  int64_t peak = 0;
  for (int pass = 0; pass < 2; ++pass) {  // 0: forward, 1: backward
    for (int step = 0; step < n; ++step) {
      const int u = pass == 0 ? step : n - 1 - step;
      std::set<int> gathered;
      for (int k = 0; k <= ahead; ++k) {
        const int v = pass == 0 ? u + k : u - k;
        if (v >= 0 && v < n) gathered.insert(v);
      }
      int64_t numel = 0;
      for (int v : gathered) numel += plan.units(v).padded_numel();
      peak = std::max(peak, numel);
    }
  }
  return peak;
}

TEST(MemoryModelWorkingBuffersTest, GatheredParametersMatchASimulatedSchedule) {
  uint64_t state = 99;
  auto next = [&state](int64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % bound);
  };
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<std::vector<int64_t>> numels(1 + next(9));
    for (auto& unit : numels) unit.push_back(1 + next(1000));
    const std::vector<UnitSpec> units = UnitsWithParamNumels(numels);
    const int world_size = 1 + next(8);
    const bool mixed = next(2) == 1;
    const int64_t element_bytes = mixed ? 2 : 4;
    PlannerOptions options = OptionsFor(proto::FULL_SHARD, world_size, 0, mixed);
    options.sharding.prefetch_depth = static_cast<int>(next(4));
    absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(units, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const RankMemoryPrediction memory = PredictRankMemory(*plan, MemoryModelInputs{});
    SCOPED_TRACE(absl::StrCat("trial ", trial, " prefetch ", options.sharding.prefetch_depth));
    EXPECT_EQ(memory.gathered_parameter_bytes,
              element_bytes * SimulatedPeakGathered(*plan, options.sharding.prefetch_depth));
    // A unit's unsharded gradients overlap the next backward unit's.
    EXPECT_EQ(memory.unsharded_gradient_bytes,
              element_bytes * SimulatedPeakGathered(*plan, /*ahead=*/1));
    // full_shard reduce-scatters straight into its gradient shards: only
    // the loss/norm exchange buffer, 16 bytes a rank, is staged.
    EXPECT_EQ(memory.communication_scratch_bytes, 16 * world_size);
    // With accumulation every unit's unsharded gradients are held until the
    // last micro-batch's reductions: the whole padded model.
    MemoryModelInputs accumulating;
    accumulating.accum_steps = 2 + static_cast<int>(next(3));
    EXPECT_EQ(PredictRankMemory(*plan, accumulating).unsharded_gradient_bytes,
              element_bytes * plan->total_padded_numel());
  }
}

TEST(MemoryModelWorkingBuffersTest, OnlyShardedStateNeedsUnshardedBuffers) {
  const std::vector<UnitSpec> units = UnitsWithParamNumels({{100}, {300}, {200}});
  const RankMemoryPrediction no_shard =
      Predict(units, OptionsFor(proto::NO_SHARD, 4, 0, false), OptimizerKind::kAdam);
  EXPECT_EQ(no_shard.gathered_parameter_bytes, 0);
  EXPECT_EQ(no_shard.unsharded_gradient_bytes, 0);
  const RankMemoryPrediction grad_op =
      Predict(units, OptionsFor(proto::SHARD_GRAD_OP, 4, 0, false), OptimizerKind::kAdam);
  EXPECT_EQ(grad_op.gathered_parameter_bytes, 0);  // parameters kept whole
  EXPECT_EQ(grad_op.parameter_bytes, 4 * 600);     // all units gathered
  EXPECT_EQ(grad_op.unsharded_gradient_bytes, 4 * (300 + 200));
  const RankMemoryPrediction hybrid =
      Predict(units, OptionsFor(proto::HYBRID_SHARD, 4, 2, false), OptimizerKind::kAdam);
  // Gradient-sharding strategies stage nothing but the loss/norm exchange:
  // 16 bytes a rank of the shard group (2 for this hybrid, 4 otherwise).
  EXPECT_EQ(hybrid.communication_scratch_bytes, 16 * 2);
  EXPECT_EQ(grad_op.communication_scratch_bytes, 16 * 4);
  // Whole-gradient strategies keep one reduce-scatter output (a shard) per
  // unit: 100, 300 and 200 elements over 4 ranks need no padding.
  EXPECT_EQ(no_shard.communication_scratch_bytes, 4 * (100 + 300 + 200) / 4 + 16 * 4);
  const RankMemoryPrediction shard_optimizer =
      Predict(units, OptionsFor(proto::SHARD_OPTIMIZER, 4, 0, false), OptimizerKind::kAdam);
  EXPECT_EQ(shard_optimizer.communication_scratch_bytes,
            no_shard.communication_scratch_bytes);
}

// [Note: bf16 gradients] The 2-byte gradient layout (mixed precision without
// fp32_gradients, the runtime's --precision=bf16): gradients at 2 bytes,
// reduce-scatters in place (no output shards), and one fp32 workspace of
// the largest unit; with fp32_gradients neither.
TEST(MemoryModelWorkingBuffersTest, TwoByteGradientsReduceInPlaceBesideOneFp32Workspace) {
  const std::vector<UnitSpec> units = UnitsWithParamNumels({{100}, {300}, {200}});
  for (proto::ShardingStrategy strategy :
       {proto::NO_SHARD, proto::SHARD_OPTIMIZER, proto::SHARD_GRAD_OP, proto::FULL_SHARD}) {
    PlannerOptions options = OptionsFor(strategy, 4, 0, true);
    const RankMemoryPrediction two_byte = Predict(units, options, OptimizerKind::kAdam);
    options.sharding.precision.reduce_dtype = comm::Dtype::kFloat32;
    const RankMemoryPrediction four_byte = Predict(units, options, OptimizerKind::kAdam);
    const std::string what = proto::ShardingStrategy_Name(strategy);
    EXPECT_EQ(2 * two_byte.gradient_bytes, four_byte.gradient_bytes) << what;
    EXPECT_EQ(2 * two_byte.unsharded_gradient_bytes, four_byte.unsharded_gradient_bytes)
        << what;
    EXPECT_EQ(two_byte.gradient_workspace_bytes, 4 * 300) << what;  // the largest unit
    EXPECT_EQ(four_byte.gradient_workspace_bytes, 0) << what;
    EXPECT_EQ(two_byte.communication_scratch_bytes, 16 * 4) << what;  // the norm exchange only
    EXPECT_EQ(two_byte.parameter_bytes, four_byte.parameter_bytes) << what;
    EXPECT_EQ(two_byte.working_buffer_bytes(),
              two_byte.gathered_parameter_bytes + two_byte.unsharded_gradient_bytes +
                  two_byte.communication_scratch_bytes + 4 * 300)
        << what;
  }
  // no_shard with Adam: 2 + 2 + 4 + 8 = 16 bytes per parameter of model state.
  const RankMemoryPrediction no_shard =
      Predict(units, OptionsFor(proto::NO_SHARD, 4, 0, true), OptimizerKind::kAdam);
  EXPECT_EQ(no_shard.model_state_bytes(), 16 * 600);
}

// ---- Inputs, totals and the summary path --------------------------------------------

TEST(MemoryModelTest, ActivationsAreAddedAsGiven) {
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(
      UnitsWithParamNumels({{10}, {20}}), OptionsFor(proto::FULL_SHARD, 2, 0, false));
  ASSERT_TRUE(plan.ok());
  MemoryModelInputs inputs;
  inputs.activation_bytes = 1000;
  inputs.workspace_bytes = 300;
  const RankMemoryPrediction memory = PredictRankMemory(*plan, inputs);
  EXPECT_EQ(memory.activation_bytes, 1000);
  EXPECT_EQ(memory.workspace_bytes, 300);
  EXPECT_EQ(memory.total_bytes(),
            memory.parameter_bytes + memory.gradient_bytes + memory.master_parameter_bytes +
                memory.optimizer_state_bytes + memory.gathered_parameter_bytes +
                memory.unsharded_gradient_bytes + memory.communication_scratch_bytes + 1300);
  const std::string text = RankMemoryPredictionToText(memory);
  EXPECT_NE(text.find("activations"), std::string::npos) << text;
}

TEST(MemoryModelTest, SummaryPlanPredictsWhatTheFullPlanDoes) {
  const std::vector<UnitSpec> units = GptLikeUnits(GptLikeShape{3, 12, 40, 9});
  for (proto::ShardingStrategy strategy :
       {proto::NO_SHARD, proto::SHARD_OPTIMIZER, proto::SHARD_GRAD_OP, proto::FULL_SHARD,
        proto::HYBRID_SHARD}) {
    PlannerOptions options = OptionsFor(strategy, 6, 3, true);
    options.sharding.prefetch_depth = 2;
    options.sharding.min_unit_numel = 2000;
    MemoryModelInputs inputs;
    inputs.optimizer = OptimizerKind::kSgdMomentum;
    absl::StatusOr<RankMemoryPrediction> fast = PredictRankMemoryFromUnits(units, options, inputs);
    ASSERT_TRUE(fast.ok()) << fast.status();
    const RankMemoryPrediction full = Predict(units, options, OptimizerKind::kSgdMomentum);
    EXPECT_EQ(fast->total_bytes(), full.total_bytes());
    EXPECT_EQ(fast->gathered_parameter_bytes, full.gathered_parameter_bytes);
    EXPECT_EQ(fast->model_state_bytes(), full.model_state_bytes());
  }
}

TEST(MemoryModelTest, SummaryPathReportsPlannerErrors) {
  absl::StatusOr<RankMemoryPrediction> memory = PredictRankMemoryFromUnits(
      {}, OptionsFor(proto::FULL_SHARD, 2, 0, false), MemoryModelInputs{});
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
