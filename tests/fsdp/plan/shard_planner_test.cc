// File: tests/fsdp/plan/shard_planner_test.cc
//
// The planner's layouts checked against their definitions, recomputed here
// from the UnitSpecs: contiguous offsets, minimal padding, shard ranges that
// tile the padded buffer, real-data ranges, merging, rank groups, and every
// error the planner reports.
#include "fsdp/plan/shard_planner.h"

#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fsdp/plan/sharding_strategy.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/fsdp/plan/test_units.h"

namespace fsdp {
namespace plan {
namespace {

using ::fsdp::plan::testing::GptLikeShape;
using ::fsdp::plan::testing::GptLikeUnits;
using ::fsdp::plan::testing::UnitsWithParamNumels;

int64_t ProductOf(const std::vector<int64_t>& shape) {
  int64_t product = 1;
  for (int64_t dim : shape) product *= dim;
  return product;
}

PlannerOptions OptionsFor(proto::ShardingStrategy strategy, int world_size, int group_size) {
  PlannerOptions options;
  options.sharding.strategy = *StrategyOfPlan(strategy);
  options.world_size = world_size;
  options.sharding.group_size = strategy == proto::HYBRID_SHARD ? group_size : 0;
  return options;
}

// Checks one unit of a plan against the model units it was built from.
void ExpectUnitLayoutIsValid(const proto::UnitPlan& unit, const std::vector<UnitSpec>& specs,
                             int shard_group_size) {
  SCOPED_TRACE(absl::StrCat("unit ", unit.index(), " '", unit.name(), "'"));
  // Params lie back to back, in source-unit then ParamSpec order.
  int64_t expected_offset = 0;
  int param_index = 0;
  for (const proto::SourceUnit& source : unit.source_units()) {
    const UnitSpec& spec = specs[source.model_unit_index()];
    EXPECT_EQ(source.name(), spec.name);
    EXPECT_EQ(source.offset(), expected_offset);
    for (const ParamSpec& param : spec.params) {
      ASSERT_LT(param_index, unit.params_size());
      const proto::ParamLayout& layout = unit.params(param_index++);
      EXPECT_EQ(layout.name(), param.name);
      EXPECT_EQ(std::vector<int64_t>(layout.shape().begin(), layout.shape().end()),
                param.shape);
      EXPECT_EQ(layout.offset(), expected_offset);
      EXPECT_EQ(layout.numel(), ProductOf(param.shape));
      EXPECT_EQ(layout.source_unit_index(), source.model_unit_index());
      expected_offset += ProductOf(param.shape);
    }
    EXPECT_EQ(source.numel(), expected_offset - source.offset());
  }
  EXPECT_EQ(param_index, unit.params_size());

  // Minimal padding: padded is the first multiple of the group size >= flat.
  const int64_t flat = expected_offset;
  EXPECT_EQ(unit.flat_numel(), flat);
  EXPECT_EQ(unit.padded_numel() % shard_group_size, 0);
  EXPECT_GE(unit.padded_numel(), flat);
  EXPECT_LT(unit.padded_numel() - flat, shard_group_size);
  EXPECT_EQ(unit.padding_numel(), unit.padded_numel() - flat);
  EXPECT_EQ(unit.shard_numel() * shard_group_size, unit.padded_numel());

  // Shard ranges tile [0, padded) in shard-rank order, each shard_numel long;
  // data ranges are those clipped to [0, flat) and together cover it once.
  ASSERT_EQ(unit.shards_size(), shard_group_size);
  int64_t next_begin = 0, data_covered = 0;
  for (int r = 0; r < shard_group_size; ++r) {
    const proto::ShardRange& shard = unit.shards(r);
    EXPECT_EQ(shard.shard_rank(), r);
    EXPECT_EQ(shard.padded_begin(), next_begin);
    EXPECT_EQ(shard.padded_end() - shard.padded_begin(), unit.shard_numel());
    next_begin = shard.padded_end();
    const int64_t clipped_begin = std::min(shard.padded_begin(), flat);
    const int64_t clipped_end = std::min(shard.padded_end(), flat);
    EXPECT_EQ(shard.data_begin(), clipped_begin);
    EXPECT_EQ(shard.data_end(), clipped_end);
    data_covered += shard.data_end() - shard.data_begin();
    // The helper computes what the plan recorded.
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ShardRangeOf(unit, r), shard));
  }
  EXPECT_EQ(next_begin, unit.padded_numel());
  EXPECT_EQ(data_covered, flat);
}

// ---- Layouts over a grid of strategies and world sizes ----------------------

class LayoutGridTest
    : public ::testing::TestWithParam<std::tuple<proto::ShardingStrategy, int, int>> {};

TEST_P(LayoutGridTest, UnitsAreContiguousMinimallyPaddedAndTiledByShards) {
  const auto [strategy, world_size, group_size] = GetParam();
  // A GPT-like model with odd sizes (so padding is non-trivial), and units of
  // 0, 1, prime and mixed sizes.
  const std::vector<std::vector<UnitSpec>> models = {
      GptLikeUnits(GptLikeShape{/*layers=*/3, /*d_model=*/5, /*vocab=*/37, /*seq_len=*/7}),
      UnitsWithParamNumels({{1}, {}, {13}, {2, 3, 5}, {1, 1}, {97}}),
  };
  for (const std::vector<UnitSpec>& specs : models) {
    absl::StatusOr<proto::ShardPlan> plan =
        BuildShardPlan(specs, OptionsFor(strategy, world_size, group_size));
    ASSERT_TRUE(plan.ok()) << plan.status();
    const int expected_group =
        strategy == proto::HYBRID_SHARD ? group_size : world_size;  // no_shard: world too
    EXPECT_EQ(plan->strategy(), strategy);
    EXPECT_EQ(plan->world_size(), world_size);
    EXPECT_EQ(plan->shard_group_size(), expected_group);
    EXPECT_EQ(plan->replica_group_count(), world_size / expected_group);
    ASSERT_EQ(plan->units_size(), static_cast<int>(specs.size()));  // no merging

    int64_t flat = 0, padded = 0, shard = 0;
    for (int u = 0; u < plan->units_size(); ++u) {
      EXPECT_EQ(plan->units(u).index(), u);
      EXPECT_EQ(plan->units(u).name(), specs[u].name);
      ExpectUnitLayoutIsValid(plan->units(u), specs, expected_group);
      flat += plan->units(u).flat_numel();
      padded += plan->units(u).padded_numel();
      shard += plan->units(u).shard_numel();
    }
    int64_t model_numel = 0;
    for (const UnitSpec& spec : specs) model_numel += spec.numel();
    EXPECT_EQ(flat, model_numel);
    EXPECT_EQ(plan->total_flat_numel(), model_numel);
    EXPECT_EQ(plan->total_padded_numel(), padded);
    EXPECT_EQ(plan->total_shard_numel(), shard);
  }
}

// Every strategy at world sizes 1..8 and 12; hybrid_shard with every group
// size that divides the world.
std::vector<std::tuple<proto::ShardingStrategy, int, int>> StrategyWorldGroupGrid() {
  std::vector<std::tuple<proto::ShardingStrategy, int, int>> grid;
  for (int world_size : {1, 2, 3, 4, 5, 6, 7, 8, 12}) {
    for (proto::ShardingStrategy strategy : {proto::NO_SHARD, proto::SHARD_OPTIMIZER,
                                             proto::SHARD_GRAD_OP, proto::FULL_SHARD}) {
      grid.emplace_back(strategy, world_size, 0);
    }
    for (int group_size = 1; group_size <= world_size; ++group_size) {
      if (world_size % group_size == 0) {
        grid.emplace_back(proto::HYBRID_SHARD, world_size, group_size);
      }
    }
  }
  return grid;
}

INSTANTIATE_TEST_SUITE_P(StrategiesAndWorlds, LayoutGridTest,
                         ::testing::ValuesIn(StrategyWorldGroupGrid()));

TEST(ShardPlannerTest, GptLikeModelHasTheFormulaParameterCount) {
  const GptLikeShape shape{/*layers=*/4, /*d_model=*/16, /*vocab=*/50, /*seq_len=*/12};
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(GptLikeUnits(shape), OptionsFor(proto::FULL_SHARD, 6, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->total_flat_numel(), testing::GptLikeNumParams(shape));
  EXPECT_EQ(plan->units_size(), 4 + 2);
}

TEST(ShardPlannerTest, DtypesFollowMixedPrecision) {
  const std::vector<UnitSpec> specs = UnitsWithParamNumels({{10}});
  PlannerOptions options = OptionsFor(proto::FULL_SHARD, 2, 0);
  absl::StatusOr<proto::ShardPlan> fp32 = BuildShardPlan(specs, options);
  options.sharding.precision = *fsdp::ParsePrecisionPolicy("bf16", "bf16");
  absl::StatusOr<proto::ShardPlan> mixed = BuildShardPlan(specs, options);
  ASSERT_TRUE(fp32.ok() && mixed.ok());
  EXPECT_EQ(fp32->param_dtype(), proto::FP32);
  EXPECT_EQ(fp32->reduce_dtype(), proto::FP32);
  EXPECT_EQ(fp32->optimizer_state_dtype(), proto::FP32);
  EXPECT_EQ(mixed->param_dtype(), proto::BF16);
  EXPECT_EQ(mixed->reduce_dtype(), proto::BF16);
  EXPECT_EQ(mixed->optimizer_state_dtype(), proto::FP32);  // master and moments stay fp32
  EXPECT_TRUE(mixed->options().mixed_precision());
}

TEST(ShardPlannerTest, RecordsTheOptionsUsed) {
  PlannerOptions options = OptionsFor(proto::HYBRID_SHARD, 8, 2);
  options.sharding.min_unit_numel = 7;
  options.sharding.prefetch_depth = 3;
  options.sharding.max_gathers_in_flight = 5;
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(UnitsWithParamNumels({{10}, {20}}), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->options().min_unit_numel(), 7);
  EXPECT_EQ(plan->options().prefetch_depth(), 3);
  EXPECT_EQ(plan->options().max_gathers_in_flight(), 5);
  EXPECT_TRUE(plan->options().include_rank_ranges());
  EXPECT_EQ(plan->format_version(), kShardPlanFormatVersion);
}

TEST(ShardPlannerTest, PaddingIsTheSmallestThatDividesTheGroup) {
  // 10 elements over 4 ranks: 12 padded, 3 per shard; the last shard has one
  // real element [9, 10) and two of padding.
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(UnitsWithParamNumels({{4, 6}}), OptionsFor(proto::FULL_SHARD, 4, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const proto::UnitPlan& unit = plan->units(0);
  EXPECT_EQ(unit.padded_numel(), 12);
  EXPECT_EQ(unit.padding_numel(), 2);
  EXPECT_EQ(unit.shard_numel(), 3);
  EXPECT_EQ(unit.shards(3).data_begin(), 9);
  EXPECT_EQ(unit.shards(3).data_end(), 10);
  EXPECT_EQ(unit.params(1).offset(), 4);
}

TEST(ShardPlannerTest, ShardsOfPaddingOnlyHaveEmptyDataRanges) {
  // 2 elements over 8 ranks: shard_numel 1, ranks 2..7 hold padding only.
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(UnitsWithParamNumels({{2}}), OptionsFor(proto::FULL_SHARD, 8, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int r = 2; r < 8; ++r) {
    const proto::ShardRange& shard = plan->units(0).shards(r);
    EXPECT_EQ(shard.data_begin(), shard.data_end()) << "shard rank " << r;
    EXPECT_EQ(shard.data_begin(), 2);
  }
}

TEST(ShardPlannerTest, UnitWithoutParamsBecomesAnEmptyUnit) {
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(
      UnitsWithParamNumels({{3}, {}, {5}}), OptionsFor(proto::FULL_SHARD, 3, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const proto::UnitPlan& empty = plan->units(1);
  EXPECT_EQ(empty.flat_numel(), 0);
  EXPECT_EQ(empty.padded_numel(), 0);
  EXPECT_EQ(empty.shard_numel(), 0);
  EXPECT_EQ(empty.params_size(), 0);
  ASSERT_EQ(empty.shards_size(), 3);
  for (const proto::ShardRange& shard : empty.shards()) {
    EXPECT_EQ(shard.padded_begin(), shard.padded_end());
  }
}

// ---- Merging -------------------------------------------------------------------

std::vector<std::vector<int>> SourceIndices(const proto::ShardPlan& plan) {
  std::vector<std::vector<int>> indices;
  for (const proto::UnitPlan& unit : plan.units()) {
    indices.emplace_back();
    for (const proto::SourceUnit& source : unit.source_units()) {
      indices.back().push_back(source.model_unit_index());
    }
  }
  return indices;
}

TEST(ShardPlannerMergeTest, MergesUntilTheMinimumAndFoldsTheTailBack) {
  // Numels 5 3 10 1 1 2 with a minimum of 8: {5,3} reaches 8, {10} reaches it
  // alone, the tail {1,1,2} = 4 is short and joins {10}.
  PlannerOptions options = OptionsFor(proto::FULL_SHARD, 2, 0);
  options.sharding.min_unit_numel = 8;
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(UnitsWithParamNumels({{5}, {3}, {10}, {1}, {1}, {2}}), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(SourceIndices(*plan), (std::vector<std::vector<int>>{{0, 1}, {2, 3, 4, 5}}));
  EXPECT_EQ(plan->units(0).name(), "u0..u1");
  EXPECT_EQ(plan->units(1).name(), "u2..u5");
  EXPECT_EQ(plan->units(1).flat_numel(), 14);
  // Inside a merged unit, offsets continue across source units.
  EXPECT_EQ(plan->units(1).source_units(1).offset(), 10);
  EXPECT_EQ(plan->units(1).params(3).offset(), 12);
  EXPECT_EQ(plan->units(1).params(3).source_unit_index(), 5);
  ExpectUnitLayoutIsValid(plan->units(1), UnitsWithParamNumels({{5}, {3}, {10}, {1}, {1}, {2}}),
                          2);
}

TEST(ShardPlannerMergeTest, ModelSmallerThanTheMinimumIsOneUnit) {
  PlannerOptions options = OptionsFor(proto::FULL_SHARD, 3, 0);
  options.sharding.min_unit_numel = 1000;
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(UnitsWithParamNumels({{5}, {3}, {10}}), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(SourceIndices(*plan), (std::vector<std::vector<int>>{{0, 1, 2}}));
  EXPECT_EQ(plan->units(0).name(), "u0..u2");
}

TEST(ShardPlannerMergeTest, ZeroMeansOnePlanUnitPerModelUnit) {
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(
      UnitsWithParamNumels({{5}, {3}, {10}}), OptionsFor(proto::FULL_SHARD, 3, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(SourceIndices(*plan), (std::vector<std::vector<int>>{{0}, {1}, {2}}));
}

TEST(ShardPlannerMergeTest, UnitsWithoutParamsJoinTheirNeighbours) {
  PlannerOptions options = OptionsFor(proto::FULL_SHARD, 2, 0);
  options.sharding.min_unit_numel = 1;
  absl::StatusOr<proto::ShardPlan> plan =
      BuildShardPlan(UnitsWithParamNumels({{}, {4}, {}, {4}, {}}), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(SourceIndices(*plan), (std::vector<std::vector<int>>{{0, 1}, {2, 3, 4}}));
}

TEST(ShardPlannerMergeTest, EveryMergedUnitReachesTheMinimumOverManyLayouts) {
  // Property check over pseudo-random layouts: plan units cover the model
  // units once, in order; each reaches the minimum unless it is the only one;
  // without its last source unit, each (but the last) would fall short.
  uint64_t state = 12345;
  auto next = [&state](int64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % bound);
  };
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<int64_t>> numels(1 + next(12));
    for (auto& unit : numels) {
      const int params = next(3);
      for (int p = 0; p < params; ++p) unit.push_back(1 + next(50));
    }
    const std::vector<UnitSpec> specs = UnitsWithParamNumels(numels);
    PlannerOptions options = OptionsFor(proto::FULL_SHARD, 1 + next(5), 0);
    options.sharding.min_unit_numel = 1 + next(120);
    absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(specs, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    int next_model_unit = 0;
    for (int u = 0; u < plan->units_size(); ++u) {
      const proto::UnitPlan& unit = plan->units(u);
      for (const proto::SourceUnit& source : unit.source_units()) {
        EXPECT_EQ(source.model_unit_index(), next_model_unit++);
      }
      if (plan->units_size() > 1) {
        EXPECT_GE(unit.flat_numel(), options.sharding.min_unit_numel) << "trial " << trial;
      }
      if (u + 1 < plan->units_size()) {
        const proto::SourceUnit& last = unit.source_units(unit.source_units_size() - 1);
        EXPECT_LT(unit.flat_numel() - last.numel(), options.sharding.min_unit_numel);
      }
      ExpectUnitLayoutIsValid(unit, specs, options.world_size);
    }
    EXPECT_EQ(next_model_unit, static_cast<int>(specs.size()));
  }
}

// ---- Rank groups ------------------------------------------------------------------

TEST(ShardPlannerGroupsTest, HybridGroupsAreConsecutiveShardsAndStridedReplicas) {
  for (int world_size : {1, 2, 6, 8, 12}) {
    for (int group_size = 1; group_size <= world_size; ++group_size) {
      if (world_size % group_size != 0) continue;
      SCOPED_TRACE(absl::StrCat("world ", world_size, " group ", group_size));
      absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(
          UnitsWithParamNumels({{7}}), OptionsFor(proto::HYBRID_SHARD, world_size, group_size));
      ASSERT_TRUE(plan.ok()) << plan.status();
      const int replicas = world_size / group_size;
      EXPECT_EQ(plan->replica_group_count(), replicas);
      ASSERT_EQ(plan->shard_groups_size(), replicas);
      ASSERT_EQ(plan->replica_groups_size(), group_size);
      std::vector<int> seen_in_shard_groups(world_size), seen_in_replica_groups(world_size);
      for (int g = 0; g < replicas; ++g) {
        ASSERT_EQ(plan->shard_groups(g).ranks_size(), group_size);
        for (int i = 0; i < group_size; ++i) {
          const int rank = plan->shard_groups(g).ranks(i);
          EXPECT_EQ(rank, g * group_size + i);
          EXPECT_EQ(ShardRankOf(*plan, rank), i);
          ++seen_in_shard_groups[rank];
        }
      }
      for (int r = 0; r < group_size; ++r) {
        ASSERT_EQ(plan->replica_groups(r).ranks_size(), replicas);
        for (int k = 0; k < replicas; ++k) {
          const int rank = plan->replica_groups(r).ranks(k);
          EXPECT_EQ(rank % group_size, r);  // replicas hold the same shard
          if (k > 0) {
            EXPECT_GT(rank, plan->replica_groups(r).ranks(k - 1));
          }
          ++seen_in_replica_groups[rank];
        }
      }
      EXPECT_EQ(seen_in_shard_groups, std::vector<int>(world_size, 1));
      EXPECT_EQ(seen_in_replica_groups, std::vector<int>(world_size, 1));
    }
  }
}

TEST(ShardPlannerGroupsTest, WorldShardedStrategiesHaveOneShardGroup) {
  for (proto::ShardingStrategy strategy :
       {proto::NO_SHARD, proto::SHARD_OPTIMIZER, proto::SHARD_GRAD_OP, proto::FULL_SHARD}) {
    absl::StatusOr<proto::ShardPlan> plan =
        BuildShardPlan(UnitsWithParamNumels({{7}}), OptionsFor(strategy, 5, 0));
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->shard_groups_size(), 1);
    EXPECT_EQ(plan->shard_groups(0).ranks_size(), 5);
    EXPECT_EQ(plan->replica_groups_size(), 5);
    EXPECT_EQ(plan->replica_groups(0).ranks_size(), 1);
  }
}

TEST(ShardPlannerGroupsTest, ShardedStateFollowsTheStrategy) {
  struct Expected {
    proto::ShardingStrategy strategy;
    bool parameters, gradients, optimizer_state;
  };
  for (const Expected& e : {Expected{proto::NO_SHARD, false, false, false},
                            Expected{proto::SHARD_OPTIMIZER, false, false, true},
                            Expected{proto::SHARD_GRAD_OP, false, true, true},
                            Expected{proto::FULL_SHARD, true, true, true},
                            Expected{proto::HYBRID_SHARD, true, true, true}}) {
    absl::StatusOr<proto::ShardPlan> plan =
        BuildShardPlan(UnitsWithParamNumels({{7}}), OptionsFor(e.strategy, 4, 2));
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->sharded_state().parameters(), e.parameters);
    EXPECT_EQ(plan->sharded_state().gradients(), e.gradients);
    EXPECT_EQ(plan->sharded_state().optimizer_state(), e.optimizer_state);
  }
}

// ---- Summary plans and the text dump ------------------------------------------------

TEST(ShardPlannerTest, SummaryPlanHasTheSameUnitsWithoutRanges) {
  const std::vector<UnitSpec> specs = GptLikeUnits(GptLikeShape{2, 6, 11, 5});
  PlannerOptions options = OptionsFor(proto::HYBRID_SHARD, 12, 4);
  absl::StatusOr<proto::ShardPlan> full = BuildShardPlan(specs, options);
  options.include_rank_ranges = false;
  absl::StatusOr<proto::ShardPlan> summary = BuildShardPlan(specs, options);
  ASSERT_TRUE(full.ok() && summary.ok());
  EXPECT_EQ(summary->shard_groups_size(), 0);
  EXPECT_EQ(summary->replica_groups_size(), 0);
  EXPECT_FALSE(summary->options().include_rank_ranges());
  ASSERT_EQ(summary->units_size(), full->units_size());
  for (int u = 0; u < full->units_size(); ++u) {
    EXPECT_EQ(summary->units(u).shards_size(), 0);
    proto::UnitPlan without_ranges = full->units(u);
    without_ranges.clear_shards();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(without_ranges,
                                                                   summary->units(u)));
    for (int r = 0; r < 4; ++r) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
          ShardRangeOf(summary->units(u), r), full->units(u).shards(r)));
    }
  }
  EXPECT_NE(summary->fingerprint(), full->fingerprint());
}

TEST(ShardPlannerTest, TextDumpParsesBackToTheSamePlan) {
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(
      GptLikeUnits(GptLikeShape{1, 4, 9, 3}), OptionsFor(proto::HYBRID_SHARD, 4, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string text = ShardPlanToText(*plan);
  EXPECT_NE(text.find("strategy: HYBRID_SHARD"), std::string::npos) << text;
  EXPECT_NE(text.find("name: \"block0.attn.qkv.weight\""), std::string::npos) << text;
  proto::ShardPlan parsed;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &parsed));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, *plan));
}

TEST(ShardPlannerTest, BuildingTwiceGivesTheSamePlan) {
  const std::vector<UnitSpec> specs = GptLikeUnits(GptLikeShape{3, 7, 13, 5});
  PlannerOptions options = OptionsFor(proto::FULL_SHARD, 7, 0);
  options.sharding.min_unit_numel = 500;
  absl::StatusOr<proto::ShardPlan> first = BuildShardPlan(specs, options);
  absl::StatusOr<proto::ShardPlan> second = BuildShardPlan(specs, options);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*first, *second));
  EXPECT_EQ(first->SerializeAsString(), second->SerializeAsString());
}

// ---- Errors ----------------------------------------------------------------------------

void ExpectInvalid(const std::vector<UnitSpec>& specs, const PlannerOptions& options,
                   const std::vector<std::string>& message_parts) {
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(specs, options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  for (const std::string& part : message_parts) {
    const std::string message(plan.status().message());
    EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(ShardPlannerErrorTest, OptionsOutOfRange) {
  const std::vector<UnitSpec> specs = UnitsWithParamNumels({{4}});
  PlannerOptions unknown_strategy = OptionsFor(proto::NO_SHARD, 2, 0);
  unknown_strategy.sharding.strategy = static_cast<Strategy>(99);
  ExpectInvalid(specs, unknown_strategy,
                {"value 99 is not a known strategy", "no_shard, shard_optimizer, shard_grad_op, "
                                                     "full_shard, hybrid_shard"});
  ExpectInvalid(specs, OptionsFor(proto::FULL_SHARD, 0, 0), {"world_size must be >= 1, got 0"});
  ExpectInvalid(specs, OptionsFor(proto::NO_SHARD, -3, 0), {"world_size", "-3"});
  ExpectInvalid(specs, OptionsFor(proto::HYBRID_SHARD, 8, 3),
                {"group_size 3 does not divide world_size 8", "1, 2, 4, 8"});
  ExpectInvalid(specs, OptionsFor(proto::HYBRID_SHARD, 12, 5), {"1, 2, 3, 4, 6, 12"});
  ExpectInvalid(specs, OptionsFor(proto::HYBRID_SHARD, 8, 0), {"1 <= group_size", "got group_size 0"});
  ExpectInvalid(specs, OptionsFor(proto::HYBRID_SHARD, 8, 16), {"group_size 16"});

  PlannerOptions group_without_hybrid = OptionsFor(proto::FULL_SHARD, 8, 0);
  group_without_hybrid.sharding.group_size = 4;
  ExpectInvalid(specs, group_without_hybrid, {"only applies to hybrid_shard", "full_shard"});

  PlannerOptions negative_merge = OptionsFor(proto::FULL_SHARD, 2, 0);
  negative_merge.sharding.min_unit_numel = -1;
  ExpectInvalid(specs, negative_merge, {"min_unit_numel must be >= 0"});

  PlannerOptions negative_prefetch = OptionsFor(proto::FULL_SHARD, 2, 0);
  negative_prefetch.sharding.prefetch_depth = -1;
  ExpectInvalid(specs, negative_prefetch, {"prefetch_depth must be >= 0"});

  PlannerOptions no_gathers = OptionsFor(proto::FULL_SHARD, 2, 0);
  no_gathers.sharding.max_gathers_in_flight = 0;
  ExpectInvalid(specs, no_gathers, {"max_gathers_in_flight must be >= 1"});
}

TEST(ShardPlannerErrorTest, BadUnitSpecs) {
  const PlannerOptions options = OptionsFor(proto::FULL_SHARD, 2, 0);
  ExpectInvalid({}, options, {"no units"});
  ExpectInvalid({UnitSpec{"", {{"w", {2}}}}}, options, {"unit 0 has an empty name"});
  ExpectInvalid({UnitSpec{"a", {{"w", {2}}}}, UnitSpec{"a", {{"v", {2}}}}}, options,
                {"units 0 and 1 are both named 'a'"});
  ExpectInvalid({UnitSpec{"a", {{"w", {2}}}}, UnitSpec{"b", {{"w", {2}}}}}, options,
                {"'w' appears in unit 'a' and again in unit 'b'"});
  ExpectInvalid({UnitSpec{"a", {{"", {2}}}}}, options, {"unit 0 'a'", "empty name"});
  ExpectInvalid({UnitSpec{"a", {{"w", {3, 0}}}}}, options,
                {"'w' in unit 'a' has shape [3, 0]", ">= 1"});
  ExpectInvalid({UnitSpec{"a", {{"w", {-2}}}}}, options, {"shape [-2]"});
  ExpectInvalid({UnitSpec{"a", {{"w", {int64_t{1} << 40, int64_t{1} << 40}}}}}, options,
                {"more than 2^58 elements"});
  ExpectInvalid({UnitSpec{"a", {{"w", {int64_t{1} << 57}}, {"v", {int64_t{1} << 57}},
                                {"x", {int64_t{1} << 57}}}}},
                options, {"model has more than 2^58 elements"});
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
