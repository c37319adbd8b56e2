// File: tests/fsdp/run/straggler_report_test.cc
//
// fsdp/run/straggler_report.h: who is named, when, in which phase, with
// which scores (expectations computed from the inputs).
#include "fsdp/run/straggler_report.h"

#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace {

std::vector<RankPhases> Window(double slow_compute_s, double slow_data_s, int slow_rank,
                               int world_size) {
  std::vector<RankPhases> w(world_size, RankPhases{0.010, 0.001, 0.004, 0.0});
  w[slow_rank] = RankPhases{slow_compute_s, slow_data_s, 0.0005, 0.0};
  return w;
}

TEST(StragglerDetector, NamesTheRankSlowerInConsecutiveWindowsWithPhaseAndScores) {
  StragglerDetector detector(3, StragglerOptions{0.2, 2});
  // Window 1: rank 2 busy 0.016 s vs 0.011 s: over the threshold, once.
  EXPECT_FALSE(detector.AddWindow(Window(0.015, 0.001, 2, 3)).has_value());
  // Window 2: again, slower still: named.
  std::optional<Straggler> named = detector.AddWindow(Window(0.021, 0.001, 2, 3));
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->rank, 2);
  EXPECT_EQ(named->phase, "compute");
  EXPECT_DOUBLE_EQ(named->vs_fastest, 0.022 / 0.011);
  EXPECT_DOUBLE_EQ(named->vs_own_best, 0.022 / 0.016);
  const std::vector<std::string> lines = detector.SkewLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(absl::StrContains(lines[2], "rank 2: busy 19.0 ms/step (1.73x the fastest)"))
      << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "named the straggler in 1 of 2 windows")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[0], "(1.00x the fastest)")) << lines[0];
}

TEST(StragglerDetector, NamesTheDataPhaseWhenDataIsWhatIsSlow) {
  StragglerDetector detector(2, StragglerOptions{0.2, 1});
  std::optional<Straggler> named = detector.AddWindow(Window(0.010, 0.020, 0, 2));
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->rank, 0);
  EXPECT_EQ(named->phase, "data");
}

TEST(StragglerDetector, NamesTheOptimizerPhaseWhenTheOptimizerIsWhatIsSlow) {
  StragglerDetector detector(2, StragglerOptions{0.2, 1});
  std::vector<RankPhases> w = Window(0.010, 0.001, 1, 2);
  w[1].optimizer_s = 0.008;  // busy 0.019 s against 0.011 s
  std::optional<Straggler> named = detector.AddWindow(w);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->rank, 1);
  EXPECT_EQ(named->phase, "optimizer");
  EXPECT_DOUBLE_EQ(named->vs_fastest, 0.019 / 0.011);
  const std::string skew = detector.SkewLines()[1];
  EXPECT_TRUE(absl::StrContains(skew, "optimizer 8.0 ms")) << skew;
}

TEST(StragglerDetector, NoiseBelowTheThresholdOrChangingRanksNamesNobody) {
  StragglerDetector detector(4, StragglerOptions{0.2, 2});
  EXPECT_FALSE(detector.AddWindow(Window(0.012, 0.001, 1, 4)).has_value());  // 18%: below
  EXPECT_FALSE(detector.AddWindow(Window(0.020, 0.001, 1, 4)).has_value());  // once
  EXPECT_FALSE(detector.AddWindow(Window(0.020, 0.001, 3, 4)).has_value());  // another rank
  EXPECT_FALSE(detector.AddWindow(Window(0.011, 0.001, 3, 4)).has_value());  // back to normal
  EXPECT_FALSE(detector.AddWindow(Window(0.020, 0.001, 3, 4)).has_value());  // once
  EXPECT_TRUE(detector.AddWindow(Window(0.020, 0.001, 3, 4)).has_value());
}

TEST(StragglerDetector, OneRankAndWrongSizesNameNobody) {
  StragglerDetector one(1, StragglerOptions{});
  EXPECT_FALSE(one.AddWindow({RankPhases{1, 0, 0}}).has_value());
  StragglerDetector two(2, StragglerOptions{0.2, 1});
  EXPECT_FALSE(two.AddWindow(Window(1, 0, 0, 3)).has_value());
}

TEST(StragglerOptions, BadValuesAreRefusedNamingThem) {
  EXPECT_TRUE(ValidateStragglerOptions(StragglerOptions{}).ok());
  absl::Status bad = ValidateStragglerOptions(StragglerOptions{-0.5, 2});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "-0.5")) << bad;
  EXPECT_FALSE(ValidateStragglerOptions(StragglerOptions{0.2, 0}).ok());
}

}  // namespace
}  // namespace fsdp

namespace fsdp {
namespace {

// Units timed: the unit whose compute exceeds the fastest rank's by the
// most is named, in the window and in the skew lines.
TEST(StragglerDetector, NamesTheUnitWhenComputeIsTheSlowPhase) {
  StragglerDetector detector(2, StragglerOptions{0.2, 1});
  std::vector<RankPhases> w(2);
  w[0] = RankPhases{0.010, 0.001, 0.004, 0.0, {0.002, 0.003, 0.004}};
  w[1] = RankPhases{0.016, 0.001, 0.004, 0.0, {0.0025, 0.003, 0.0095}};
  std::optional<Straggler> named = detector.AddWindow(w);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->rank, 1);
  EXPECT_EQ(named->phase, "compute");
  EXPECT_EQ(named->unit, 2);
  const std::vector<std::string> lines = detector.SkewLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(absl::StrContains(lines[1],
                                "compute 16.0 ms (the most over the fastest rank in "
                                "unit 2: +5.5 ms)"))
      << lines[1];
  EXPECT_FALSE(absl::StrContains(lines[0], "the most over")) << lines[0];
  // Slow data names no unit.
  StragglerDetector data_detector(2, StragglerOptions{0.2, 1});
  w[1] = RankPhases{0.010, 0.009, 0.004, 0.0, {0.002, 0.003, 0.004}};
  named = data_detector.AddWindow(w);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->phase, "data");
  EXPECT_EQ(named->unit, -1);
}

}  // namespace
}  // namespace fsdp
