// File: tests/fsdp/train/flat_unit_test.cc
//
// Padding arithmetic and the gradient state machine of one unit, with a
// single rank (the explicit world-size-1 path) and with two ranks as threads.
#include "fsdp/train/flat_unit.h"

#include <thread>

#include "gtest/gtest.h"
#include "tests/fsdp/train/thread_communicator.h"

namespace fsdp {
namespace {

UnitSpec SpecOfNumel(int64_t numel) {
  return UnitSpec{"u", {ParamSpec{"u.w", {numel}}}};
}

TEST(FlatUnitLayoutTest, PadsToAMultipleOfTheWorldSize) {
  for (int world = 1; world <= 8; ++world) {
    for (int64_t numel : {1, 2, 7, 8, 9, 1000, 1001}) {
      auto layout = MakeFlatUnitLayout(SpecOfNumel(numel), 3, world);
      ASSERT_TRUE(layout.ok()) << layout.status();
      // Independent formula: the smallest multiple of world >= numel.
      int64_t expected = numel;
      while (expected % world != 0) ++expected;
      EXPECT_EQ(layout->padded_numel, expected) << numel << " over " << world;
      EXPECT_EQ(layout->shard_numel * world, expected);
      EXPECT_EQ(layout->padding(), expected - numel);
      EXPECT_EQ(layout->shard_offset(world - 1), expected - layout->shard_numel);
    }
  }
}

TEST(FlatUnitLayoutTest, RejectsBadWorldAndEmptyUnit) {
  EXPECT_EQ(MakeFlatUnitLayout(SpecOfNumel(4), 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeFlatUnitLayout(UnitSpec{"empty", {}}, 0, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FlatUnitTest, BuffersAreZeroedPaddedAndTracked) {
  MemoryTracker tracker;
  auto layout = MakeFlatUnitLayout(SpecOfNumel(7), 0, 4);
  ASSERT_TRUE(layout.ok());
  auto unit = FlatUnit::Create(*layout, tracker);
  ASSERT_TRUE(unit.ok()) << unit.status();
  EXPECT_EQ((*unit)->params().size(), 7u);
  EXPECT_EQ((*unit)->padded_params().size(), 8u);
  for (float p : (*unit)->padded_params()) EXPECT_EQ(p, 0.0f);
  MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.current(MemoryCategory::kParameters), 8 * 4);
  EXPECT_EQ(s.current(MemoryCategory::kGradients), 8 * 4);
  EXPECT_EQ(s.current(MemoryCategory::kCommBuffers), 2 * 4);
}

TEST(FlatUnitTest, WrongTransitionsNameBothStates) {
  auto comms = fsdp_test::MakeThreadCommunicators(1);
  MemoryTracker tracker;
  auto unit = FlatUnit::Create(*MakeFlatUnitLayout(SpecOfNumel(3), 5, 1), tracker);
  ASSERT_TRUE(unit.ok());
  FlatUnit& u = **unit;
  CommWaitClock clock;
  absl::Status s = u.StartReduction(*comms[0]);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("unit 5"), std::string::npos) << s;
  EXPECT_NE(s.message().find("kAccumulated"), std::string::npos) << s;
  EXPECT_NE(s.message().find("kIdle"), std::string::npos) << s;
  EXPECT_EQ(u.FinishReduceScatter(*comms[0], 1.0f, absl::Seconds(1), clock).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(u.FinishAllGather(absl::Seconds(1), clock).code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(u.MarkBackwardDone().ok());
  ASSERT_TRUE(u.MarkBackwardDone().ok());  // a second micro-batch accumulates
  EXPECT_EQ(u.ZeroGrads().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(u.StartReduction(*comms[0]).ok());
  EXPECT_EQ(u.grad_state(), GradState::kReduceScattering);
  // A backward while the reduction is in flight would corrupt it.
  EXPECT_EQ(u.MarkBackwardDone().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(u.FinishReduceScatter(*comms[0], 1.0f, absl::Seconds(1), clock).ok());
  EXPECT_EQ(u.grad_state(), GradState::kAllGathering);
  ASSERT_TRUE(u.FinishAllGather(absl::Seconds(1), clock).ok());
  EXPECT_EQ(u.grad_state(), GradState::kReduced);
  ASSERT_TRUE(u.ZeroGrads().ok());
  EXPECT_EQ(u.grad_state(), GradState::kIdle);
  EXPECT_EQ(clock.num_waits(), 2);
}

// Two ranks: reduce-scatter, scale by 1/2, all-gather = the average, with
// the padding element (numel 5 over 2 ranks -> 6) staying zero.
TEST(FlatUnitTest, TwoRanksAverageTheirGradients) {
  constexpr int kWorld = 2;
  auto comms = fsdp_test::MakeThreadCommunicators(kWorld);
  std::vector<std::vector<float>> padded(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      MemoryTracker tracker;
      auto unit = FlatUnit::Create(*MakeFlatUnitLayout(SpecOfNumel(5), 0, kWorld), tracker);
      ASSERT_TRUE(unit.ok());
      FlatUnit& u = **unit;
      for (int i = 0; i < 5; ++i) u.mutable_grads()[i] = (r + 1) * (i + 1);
      CommWaitClock clock;
      ASSERT_TRUE(u.MarkBackwardDone().ok());
      ASSERT_TRUE(u.StartReduction(*comms[r]).ok());
      ASSERT_TRUE(u.FinishReduceScatter(*comms[r], 0.5f, absl::Seconds(10), clock).ok());
      ASSERT_TRUE(u.FinishAllGather(absl::Seconds(10), clock).ok());
      padded[r].assign(u.padded_grads().begin(), u.padded_grads().end());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(padded[r].size(), 6u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(padded[r][i], 1.5f * (i + 1)) << r << " " << i;
    EXPECT_EQ(padded[r][5], 0.0f);
  }
}

}  // namespace
}  // namespace fsdp
