// File: tests/fsdp/report/report_io_test.cc
//
// The rank measurement text format, the sweep presets and which points the
// runtime can be asked to train. (Atomic file writes moved with their code:
// tests/base/atomic_file_test.cc.)
#include <string>

#include "fsdp/models/gpt_config.h"
#include "fsdp/report/activation_mode.h"
#include "fsdp/report/rank_measurement.h"
#include "fsdp/report/sweep.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace report {
namespace {

TEST(RankMeasurementTest, TextRoundTripsAndRejectsDamage) {
  RankMeasurement m;
  for (int c = 0; c < kNumMemoryCategories; ++c) m.peak_bytes[c] = (c + 1) * 1000003;
  m.peak_total_bytes = 99;
  m.peak_rss_bytes = int64_t{5} << 33;
  m.baseline_rss_bytes = 12345;
  const std::string text = RankMeasurementToText(m);
  absl::StatusOr<RankMeasurement> back = ParseRankMeasurement(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->peak_bytes, m.peak_bytes);
  EXPECT_EQ(back->peak_rss_bytes, m.peak_rss_bytes);
  EXPECT_EQ(back->baseline_rss_bytes, 12345);
  EXPECT_FALSE(ParseRankMeasurement(text.substr(0, text.size() / 2)).ok());
  EXPECT_FALSE(ParseRankMeasurement("parameters lots\n").ok());

  RankMeasurement other = m;
  other.peak_bytes[2] += 1;
  other.peak_rss_bytes = 1;
  const RankMeasurement max = MaxOverRanks({m, other});
  EXPECT_EQ(max.peak_bytes[2], m.peak_bytes[2] + 1);
  EXPECT_EQ(max.peak_rss_bytes, m.peak_rss_bytes);
}

TEST(SweepTest, PresetsCoverTheirGridAndStartNearAMillionParameters) {
  absl::StatusOr<SweepOptions> full = SweepPreset("full");
  ASSERT_TRUE(full.ok());
  const std::vector<MemoryPoint> points = SweepPoints(*full);
  EXPECT_EQ(full->precisions.size(), 3u);
  EXPECT_EQ(points.size(), full->widths.size() * full->ranks.size() * 5 * 3);
  absl::StatusOr<RankMemoryEstimate> first = EstimateRankMemory(points.front());
  ASSERT_TRUE(first.ok());
  EXPECT_GT(first->num_params, 500000);
  EXPECT_LT(first->num_params, 2000000);
  for (const MemoryPoint& point : points) {
    if (point.strategy == proto::HYBRID_SHARD) {
      EXPECT_EQ(point.ranks % point.group_size, 0);
    }
    ASSERT_TRUE(EstimateRankMemory(point).ok()) << MemoryPointToString(point);
  }
  EXPECT_TRUE(SweepPreset("small").ok());
  EXPECT_EQ(SweepPreset("huge").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SweepTest, TrainOptionsForPointSaysWhyThePointCannotBeTrained) {
  MemoryPoint point;
  point.config = {2, 32, 1, 256, 32};
  point.ranks = 2;
  absl::StatusOr<TrainOptions> run = TrainOptionsForPoint(point, 3);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->nproc, 2);
  EXPECT_EQ(run->steps, 3);
  EXPECT_EQ(run->d_model, 32);
  point.precision = Precision::kMixed;  // the ZeRO layout: --precision=bf16, bf16 gradients
  absl::StatusOr<TrainOptions> mixed = TrainOptionsForPoint(point, 3);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->sharding.precision, *ParsePrecisionPolicy("bf16", ""));
  EXPECT_TRUE(mixed->bf16_grads());
  EXPECT_EQ(run->sharding.precision, *ParsePrecisionPolicy("fp32", ""));
  point.precision = Precision::kBf16;  // the bf16 layout: 2-byte parameters, fp32 wire
  absl::StatusOr<TrainOptions> bf16 = TrainOptionsForPoint(point, 3);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->sharding.precision.param_dtype, comm::Dtype::kBFloat16);
  EXPECT_EQ(bf16->sharding.precision.reduce_dtype, comm::Dtype::kFloat32);
  EXPECT_FALSE(bf16->bf16_grads());
  point.precision = Precision::kFp32;
  point.strategy = proto::HYBRID_SHARD;
  point.group_size = 1;
  absl::StatusOr<TrainOptions> hybrid = TrainOptionsForPoint(point, 3);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  EXPECT_EQ(hybrid->sharding.group_size, 1);
  point.group_size = 3;  // does not divide 2 ranks: the runtime's own validation says so
  EXPECT_EQ(TrainOptionsForPoint(point, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

// The activation mode reaches the training run, and a run's options give
// back the point's mode (what the launched ranks and the budget both use).
TEST(SweepTest, TrainOptionsForPointCarryTheActivationMode) {
  MemoryPoint point;
  point.config = {4, 32, 1, 256, 32};
  point.ranks = 2;
  point.min_unit_numel = 5000;
  for (const ActivationMode& mode :
       {ActivationMode{0, false}, ActivationMode{2, true}, ActivationMode{1, false}}) {
    ASSERT_TRUE(ApplyActivationMode(mode, point.config).ok());
    absl::StatusOr<TrainOptions> run = TrainOptionsForPoint(point, 2);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(ActivationCheckpointingName(run->activation_checkpointing),
              ActivationCheckpointingName(mode.checkpoint_every));
    EXPECT_STREQ(AttentionName(run->attention), mode.flash_attention ? "flash" : "standard");
    EXPECT_EQ(run->sharding.min_unit_numel, 5000);
    EXPECT_EQ(ActivationModeOf(GptConfigOf(*run)), mode);
  }
}

// The sequence-length sweep: every (mode, seq_len) of one model, strategy
// and rank count; the model sweep repeats its grid per mode and leaves out
// the members a mode cannot take.
TEST(SweepTest, SequenceLengthSweepAndModesOfTheModelSweep) {
  absl::StatusOr<SweepOptions> full = SweepPreset("full");
  ASSERT_TRUE(full.ok());
  const std::vector<MemoryPoint> seq = SeqLenSweepPoints(*full);
  const SeqLenSweep& s = full->seq_len_sweep;
  EXPECT_EQ(seq.size(), s.modes.size() * s.seq_lens.size());
  EXPECT_EQ(s.seq_lens.front(), 128);
  EXPECT_EQ(s.seq_lens.back(), 4096);
  for (const MemoryPoint& point : seq) {
    EXPECT_EQ(point.config.d_model, s.width);
    EXPECT_EQ(point.strategy, s.strategy);
    EXPECT_EQ(point.ranks, s.ranks);
    ASSERT_TRUE(EstimateRankMemory(point).ok()) << MemoryPointToString(point);
  }
  SweepOptions sweep = *full;
  sweep.precisions = {Precision::kFp32};
  sweep.strategies = {proto::FULL_SHARD};
  sweep.ranks = {2};
  sweep.widths = {32, 64, 128, 256};  // 2, 2, 4 and 8 blocks
  sweep.modes = {ActivationMode{0, false}, ActivationMode{4, true}};
  const std::vector<MemoryPoint> points = SweepPoints(sweep);
  EXPECT_EQ(points.size(), 4u + 2u) << "every:4 skips the 2-block members";
  EXPECT_EQ(points.back().config.activation_checkpoint_every, 4);
  EXPECT_TRUE(points.back().config.flash_attention);
  sweep.seq_len_sweep.width = 0;
  EXPECT_TRUE(SeqLenSweepPoints(sweep).empty());
}

}  // namespace
}  // namespace report
}  // namespace fsdp
