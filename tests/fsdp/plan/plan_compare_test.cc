// File: tests/fsdp/plan/plan_compare_test.cc
//
// ComparePlans names the ranks, the first differing unit and field, and both
// values; the expected messages are assembled here from the plans' own
// fields, so they follow the plans rather than echo the code.
#include "fsdp/plan/plan_compare.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"
#include "gtest/gtest.h"
#include "tests/fsdp/plan/test_units.h"

namespace fsdp {
namespace plan {
namespace {

proto::ShardPlan GptPlan(int layers, int world_size, proto::ShardingStrategy strategy) {
  PlannerOptions options;
  options.sharding.strategy = *StrategyOfPlan(strategy);
  options.world_size = world_size;
  options.sharding.group_size = strategy == proto::HYBRID_SHARD ? 2 : 0;
  absl::StatusOr<proto::ShardPlan> plan = BuildShardPlan(
      testing::GptLikeUnits(testing::GptLikeShape{layers, 6, 17, 5}), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

void ExpectMessageContains(const absl::Status& status, const std::string& part) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(MessageOf(status).find(part), std::string::npos)
      << "message: " << MessageOf(status) << "\nexpected to contain: " << part;
}

TEST(ComparePlansTest, EqualPlansCompareOk) {
  const proto::ShardPlan mine = GptPlan(3, 4, proto::FULL_SHARD);
  EXPECT_TRUE(ComparePlans(mine, 0, GptPlan(3, 4, proto::FULL_SHARD), 1).ok());
  // As the runtime does it: the peer's plan arrives serialized.
  proto::ShardPlan received;
  ASSERT_TRUE(received.ParseFromString(mine.SerializeAsString()));
  EXPECT_TRUE(ComparePlans(mine, received, 3).ok());
}

TEST(ComparePlansTest, NamesTheUnitAndFieldThatDiffer) {
  const proto::ShardPlan mine = GptPlan(3, 4, proto::FULL_SHARD);
  proto::ShardPlan theirs = mine;
  proto::UnitPlan* unit = theirs.mutable_units(3);
  unit->set_padded_numel(unit->padded_numel() + 4);
  ExpectMessageContains(
      ComparePlans(mine, 0, theirs, 2),
      absl::StrCat("rank 0 and rank 2 hold different shard plans: unit 3 '",
                   mine.units(3).name(), "' field padded_numel: ",
                   mine.units(3).padded_numel(), " vs ", unit->padded_numel()));
}

TEST(ComparePlansTest, NamesTheParamInsideAUnit) {
  const proto::ShardPlan mine = GptPlan(2, 4, proto::FULL_SHARD);
  proto::ShardPlan theirs = mine;
  proto::ParamLayout* param = theirs.mutable_units(1)->mutable_params(2);
  param->set_offset(param->offset() + 1);
  ExpectMessageContains(
      ComparePlans(mine, 1, theirs, 0),
      absl::StrCat("rank 1 and rank 0 hold different shard plans: unit 1 '",
                   mine.units(1).name(), "' field params[2] ('", param->name(),
                   "').offset: ", mine.units(1).params(2).offset(), " vs ", param->offset()));
}

TEST(ComparePlansTest, NamesAShardRange) {
  const proto::ShardPlan mine = GptPlan(2, 4, proto::FULL_SHARD);
  proto::ShardPlan theirs = mine;
  theirs.mutable_units(2)->mutable_shards(3)->set_data_end(7);
  ExpectMessageContains(ComparePlans(mine, 0, theirs, 5),
                        absl::StrCat("unit 2 '", mine.units(2).name(), "' field shards[3].data_end: ",
                                     mine.units(2).shards(3).data_end(), " vs 7"));
}

TEST(ComparePlansTest, NamesHeaderFields) {
  ExpectMessageContains(ComparePlans(GptPlan(2, 4, proto::FULL_SHARD), 0,
                                     GptPlan(2, 8, proto::FULL_SHARD), 3),
                        "rank 0 and rank 3 hold different shard plans: field world_size: 4 vs 8");
  ExpectMessageContains(ComparePlans(GptPlan(2, 4, proto::FULL_SHARD), 0,
                                     GptPlan(2, 4, proto::HYBRID_SHARD), 1),
                        "field strategy: FULL_SHARD vs HYBRID_SHARD");
}

TEST(ComparePlansTest, DifferentModelsDifferAtTheFirstUnitThatChanged) {
  // One block more: unit 2 is "head" on one rank and "block1" on the other.
  ExpectMessageContains(ComparePlans(GptPlan(1, 4, proto::FULL_SHARD), 0,
                                     GptPlan(2, 4, proto::FULL_SHARD), 1),
                        "unit 2 'head' field name: \"head\" vs \"block1\"");
}

TEST(ComparePlansTest, ReportsAMissingUnit) {
  const proto::ShardPlan mine = GptPlan(2, 4, proto::FULL_SHARD);
  proto::ShardPlan theirs = mine;
  theirs.mutable_units()->RemoveLast();
  ExpectMessageContains(ComparePlans(mine, 0, theirs, 1),
                        absl::StrCat("field units (entry count): ", mine.units_size(), " vs ",
                                     theirs.units_size()));
}

TEST(ComparePlansTest, FingerprintOnlyMeansDifferentBuilds) {
  const proto::ShardPlan mine = GptPlan(2, 4, proto::FULL_SHARD);
  proto::ShardPlan theirs = mine;
  theirs.set_fingerprint(mine.fingerprint() ^ 1);
  ExpectMessageContains(ComparePlans(mine, 0, theirs, 1), "every field is equal");
  ExpectMessageContains(ComparePlans(mine, 0, theirs, 1), "different builds");
}

TEST(ComparePlansTest, WithoutMyRankSaysThisRank) {
  ExpectMessageContains(ComparePlans(GptPlan(2, 4, proto::FULL_SHARD),
                                     GptPlan(2, 8, proto::FULL_SHARD), 2),
                        "this rank and rank 2 hold different shard plans: field world_size");
}

}  // namespace
}  // namespace plan
}  // namespace fsdp
