// File: tests/fsdp/optim/lr_schedule_test.cc
#include "fsdp/optim/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

TEST(LrScheduleTest, WarmupThenCosineToTheFloor) {
  LrScheduleOptions o;
  o.base_lr = 1.0f;
  o.min_lr = 0.1f;
  o.warmup_steps = 10;
  o.total_steps = 110;
  absl::StatusOr<LrSchedule> s = LrSchedule::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FLOAT_EQ(s->At(0), 0.1f);
  EXPECT_FLOAT_EQ(s->At(4), 0.5f);
  EXPECT_FLOAT_EQ(s->At(9), 1.0f);
  EXPECT_FLOAT_EQ(s->At(10), 1.0f);               // decay starts at the peak
  EXPECT_NEAR(s->At(60), 0.55f, 1e-6);            // half-way: the mean of peak and floor
  EXPECT_NEAR(s->At(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-6);
  EXPECT_FLOAT_EQ(s->At(110), 0.1f);
  EXPECT_FLOAT_EQ(s->At(5000), 0.1f);
  for (int t = 11; t < 110; ++t) EXPECT_LE(s->At(t), s->At(t - 1));  // monotone decay
}

TEST(LrScheduleTest, LinearDecayAndConstant) {
  LrScheduleOptions o;
  o.base_lr = 2.0f;
  o.min_lr = 0.0f;
  o.warmup_steps = 0;
  o.total_steps = 4;
  o.decay = LrDecay::kLinear;
  absl::StatusOr<LrSchedule> s = LrSchedule::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s->At(0), 2.0f);
  EXPECT_FLOAT_EQ(s->At(1), 1.5f);
  EXPECT_FLOAT_EQ(s->At(3), 0.5f);
  EXPECT_FLOAT_EQ(s->At(4), 0.0f);
  o.decay = LrDecay::kConstant;
  s = LrSchedule::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s->At(100), 2.0f);
}

TEST(LrScheduleTest, LinearScalingRuleWithGradualWarmup) {
  // Goyal et al.: batch k times the reference -> k times the lr, reached by a
  // linear ramp from the reference lr.
  LrScheduleOptions o;
  o.base_lr = 0.1f;
  o.min_lr = 0.0f;
  o.warmup_steps = 5;
  o.total_steps = 100;
  o.linear_scaling = true;
  o.global_batch = 1024;
  o.reference_batch = 256;
  absl::StatusOr<LrSchedule> s = LrSchedule::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s->peak_lr(), 0.4f);
  EXPECT_NEAR(s->At(0), 0.1f + 0.3f / 5, 1e-7);
  EXPECT_NEAR(s->At(2), 0.1f + 0.3f * 3 / 5, 1e-7);
  EXPECT_FLOAT_EQ(s->At(4), 0.4f);
  EXPECT_FLOAT_EQ(s->At(5), 0.4f);
}

TEST(LrScheduleTest, RejectsBadOptionsWithReasons) {
  LrScheduleOptions o;
  o.base_lr = 0.0f;
  EXPECT_EQ(LrSchedule::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = LrScheduleOptions();
  o.warmup_steps = 10;
  o.total_steps = 5;
  absl::Status st = LrSchedule::Create(o).status();
  EXPECT_NE(st.message().find("warmup_steps (10)"), std::string::npos) << st;
  o = LrScheduleOptions();
  o.min_lr = 1.0f;
  EXPECT_EQ(LrSchedule::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = LrScheduleOptions();
  o.linear_scaling = true;
  o.reference_batch = 0;
  EXPECT_EQ(LrSchedule::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fsdp
