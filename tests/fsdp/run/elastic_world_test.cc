// File: tests/fsdp/run/elastic_world_test.cc
//
// An elastic run's options at another world size (fsdp/run/elastic_world.h):
// the global batch kept, re-split; the ranges that cannot be refused up front.
#include "fsdp/run/elastic_world.h"

#include "gtest/gtest.h"

namespace fsdp {
namespace {

TrainOptions Started(int nproc, int micro_batch, int accum) {
  TrainOptions o;
  o.nproc = nproc;
  o.micro_batch = micro_batch;
  o.accum = accum;
  o.checkpoint_dir = "/tmp/unused";
  return o;
}

TEST(ElasticWorldTest, TheGlobalBatchIsKeptWithTheLargestMicroBatchThatFits) {
  const TrainOptions started = Started(4, 2, 3);  // 24 sequences
  for (int world = 1; world <= 8; ++world) {
    absl::StatusOr<TrainOptions> at = OptionsForWorldSize(started, world);
    if (24 % world != 0) {
      ASSERT_FALSE(at.ok()) << world;
      EXPECT_NE(at.status().message().find("does not split over " + std::to_string(world)),
                std::string::npos)
          << at.status();
      continue;
    }
    ASSERT_TRUE(at.ok()) << world << ": " << at.status();
    EXPECT_EQ(at->nproc, world);
    EXPECT_EQ(at->global_batch(), 24) << world;
    EXPECT_LE(at->micro_batch, 2);
  }
  // 24 / 3 = 8 per rank: micro-batches of 2, four of them.
  EXPECT_EQ(OptionsForWorldSize(started, 3)->accum, 4);
  // 24 / 8 = 3 per rank: 2 does not divide 3, so 1 x 3.
  EXPECT_EQ(OptionsForWorldSize(started, 8)->micro_batch, 1);
  EXPECT_EQ(OptionsForWorldSize(started, 8)->accum, 3);
}

TEST(ElasticWorldTest, HybridGroupsMustDivideTheNewWorld) {
  TrainOptions started = Started(4, 2, 3);
  started.sharding.strategy = Strategy::kHybridShard;
  started.sharding.group_size = 2;
  EXPECT_TRUE(OptionsForWorldSize(started, 2).ok());
  EXPECT_FALSE(OptionsForWorldSize(started, 3).ok());
}

TEST(ElasticWorldTest, ARangeThatCannotSplitIsRefusedUpFront) {
  TrainOptions o = Started(4, 2, 3);
  EXPECT_TRUE(ValidateElasticOptions(o).ok());  // not elastic
  o.min_nproc = 2;
  o.max_nproc = 4;
  EXPECT_TRUE(ValidateElasticOptions(o).ok());
  o.max_nproc = 5;
  absl::Status five = ValidateElasticOptions(o);
  ASSERT_FALSE(five.ok());
  EXPECT_NE(five.message().find("does not split over 5 ranks"), std::string::npos) << five;
  EXPECT_NE(five.message().find("a multiple of 60"), std::string::npos) << five;
  o.max_nproc = 3;
  EXPECT_NE(ValidateElasticOptions(o).message().find("--max_nproc=3 must be at least --nproc=4"),
            std::string::npos);
  o.max_nproc = 4;
  o.min_nproc = 5;
  EXPECT_FALSE(ValidateElasticOptions(o).ok());
  o.min_nproc = 2;
  o.checkpoint_dir.clear();
  EXPECT_NE(ValidateElasticOptions(o).message().find("needs --buddy_every"), std::string::npos);
  o.buddy_every = 1;
  EXPECT_TRUE(ValidateElasticOptions(o).ok());
  TrainOptions fixed = Started(4, 2, 3);
  fixed.max_nproc = 6;
  EXPECT_NE(ValidateElasticOptions(fixed).message().find("needs --min_nproc"), std::string::npos);
}

}  // namespace
}  // namespace fsdp
