// File: tests/fsdp/nn/support_test.cc
//
// The small pieces around the models: parameter views, compute threads.
#include <cstdlib>

#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/tensor.h"
#include "fsdp/nn/unit_order.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

TEST(ViewParamsTest, CarvesTheFlatBufferInSpecOrder) {
  const UnitSpec unit{"u", {{"a", {2, 3}}, {"b", {4}}, {"c", {1, 2, 2}}}};
  std::vector<float> flat(unit.numel());
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = float(i);
  absl::StatusOr<std::vector<TensorView>> views = ViewParams(unit, absl::MakeSpan(flat));
  ASSERT_TRUE(views.ok()) << views.status();
  ASSERT_EQ(views->size(), 3u);
  EXPECT_EQ((*views)[0].data(), flat.data());
  EXPECT_EQ((*views)[0].dim(1), 3);
  EXPECT_EQ((*views)[1].data(), flat.data() + 6);
  EXPECT_EQ((*views)[1].numel(), 4);
  EXPECT_EQ((*views)[2].data(), flat.data() + 10);
  EXPECT_EQ((*views)[2].rank(), 3);
  std::vector<float> wrong(unit.numel() + 1);
  absl::Status s = ViewParams(unit, absl::MakeConstSpan(wrong)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("14 parameters"), std::string::npos) << s;
}

TEST(ComputeThreadsTest, DefaultDividesCoresAmongLocalRanksAndSetSticks) {
  unsetenv("LOCAL_WORLD_SIZE");
  const int all = DefaultComputeThreads();
  EXPECT_GE(all, 1);
  setenv("LOCAL_WORLD_SIZE", "1000000", 1);
  EXPECT_EQ(DefaultComputeThreads(), 1);
  setenv("LOCAL_WORLD_SIZE", "garbage", 1);
  EXPECT_EQ(DefaultComputeThreads(), all);
  unsetenv("LOCAL_WORLD_SIZE");
  ASSERT_TRUE(SetComputeThreads(1).ok());
  EXPECT_EQ(ComputeThreads(), 1);
  EXPECT_EQ(SetComputeThreads(0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(UnitOrderTest, WalksForwardThenBackwardAndNamesTheExpectedCall) {
  UnitOrder order(3);
  EXPECT_TRUE(order.CheckForward(0).ok());
  order.ForwardDone(0);
  absl::Status s = order.CheckForward(2);
  EXPECT_NE(s.message().find("expected ForwardUnit(1)"), std::string::npos) << s;
  order.ForwardDone(1);
  order.ForwardDone(2);
  EXPECT_TRUE(order.forward_done());
  EXPECT_FALSE(order.CheckBackward(1).ok());
  EXPECT_TRUE(order.CheckBackward(2).ok());
  order.BackwardDone(2);
  order.BackwardDone(1);
  order.BackwardDone(0);
  EXPECT_EQ(order.phase(), UnitOrder::Phase::kIdle);
  EXPECT_FALSE(order.CheckBackward(0).ok());
}

}  // namespace
}  // namespace fsdp
