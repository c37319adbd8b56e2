// File: tests/fsdp/nn/gpt_activation_modes_test.cc
//
// Activation checkpointing and flash attention in the GPT: the modes parse
// and validate, checkpointing changes no bit of the loss or the gradients,
// flash attention matches the standard one within fp32 rounding, and the
// tracker's activation bytes after every unit, and their peak, equal the
// prediction of GptActivationBytesByUnit in every mode.
#include <cmath>
#include <string>

#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/gpt_model.h"
#include "fsdp/nn/gpt_spec.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::RandomBatch;

GptConfig SmallConfig() { return GptConfig{4, 16, 4, 37, 12}; }

TEST(ActivationModeTest, ParsesTheThreeFormsAndNamesThemBack) {
  EXPECT_EQ(ParseActivationCheckpointing("none", 4)->checkpoint_every(), 0);
  EXPECT_EQ(ParseActivationCheckpointing("all", 4)->checkpoint_every(), 1);
  EXPECT_EQ(ParseActivationCheckpointing("every:2", 4)->checkpoint_every(), 2);
  EXPECT_EQ(ParseActivationCheckpointing("every:4", 4)->checkpoint_every(), 4);
  using Mode = ActivationCheckpointing::Mode;
  EXPECT_EQ(ParseActivationCheckpointing("none", 4)->mode, Mode::kNone);
  EXPECT_EQ(ParseActivationCheckpointing("all", 4)->mode, Mode::kAll);
  EXPECT_EQ(*ParseActivationCheckpointing("every:3", 4), (ActivationCheckpointing{Mode::kEvery, 3}));
  // Each form names itself back as spelled: every:1 checkpoints what all
  // does, and stays every:1 (the start-up line prints the flag as given).
  for (const char* text : {"none", "all", "every:1", "every:2", "every:4"}) {
    const absl::StatusOr<ActivationCheckpointing> parsed = ParseActivationCheckpointing(text, 4);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(ActivationCheckpointingName(*parsed), text);
    EXPECT_TRUE(ValidateActivationCheckpointing(*parsed, 4).ok()) << text;
  }
  EXPECT_EQ(ParseActivationCheckpointing("every:1", 4)->checkpoint_every(), 1);
  // From a model's activation_checkpoint_every: 0 none, 1 all, K every:K.
  EXPECT_EQ(ActivationCheckpointingOf(0), ActivationCheckpointing{});
  EXPECT_EQ(ActivationCheckpointingOf(1).mode, Mode::kAll);
  EXPECT_EQ(ActivationCheckpointingOf(3), (ActivationCheckpointing{Mode::kEvery, 3}));
  for (int every : {0, 1, 2, 3}) {
    EXPECT_EQ(ActivationCheckpointingOf(every).checkpoint_every(), every);
  }
  EXPECT_EQ(ActivationCheckpointingName(0), "none");
  EXPECT_EQ(ActivationCheckpointingName(1), "all");
  EXPECT_EQ(ActivationCheckpointingName(3), "every:3");
  GptConfig c = SmallConfig();
  c.activation_checkpoint_every = 2;
  EXPECT_TRUE(IsCheckpointedBlock(c, 0));
  EXPECT_FALSE(IsCheckpointedBlock(c, 1));
  EXPECT_TRUE(IsCheckpointedBlock(c, 2));
  c.activation_checkpoint_every = 0;
  EXPECT_FALSE(IsCheckpointedBlock(c, 0));
}

TEST(ActivationModeTest, BadModesAreClearErrors) {
  struct Case {
    const char* mode;
    const char* says;
  } cases[] = {
      {"every:0", "K must be between 1 and the number of blocks (4), got 0"},
      {"every:5", "K must be between 1 and the number of blocks (4), got 5"},
      {"every:-1", "got -1"},
      {"sometimes", "is not a mode; use none, all, or every:K"},
      {"every:", "is not a mode"},
      {"every:2x", "is not a mode"},
      {"", "is not a mode"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<ActivationCheckpointing> k = ParseActivationCheckpointing(c.mode, 4);
    ASSERT_FALSE(k.ok()) << c.mode;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find(c.says), std::string::npos) << k.status();
  }
  // A value that parsed for a deeper model is refused for this one, in the
  // parse's words.
  const ActivationCheckpointing every6 = *ParseActivationCheckpointing("every:6", 8);
  const absl::Status too_deep = ValidateActivationCheckpointing(every6, 4);
  EXPECT_EQ(too_deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_deep.message().find("--activation_checkpointing=every:6: K must be between 1 and "
                                    "the number of blocks (4), got 6"),
            std::string::npos)
      << too_deep;
  EXPECT_TRUE(ValidateActivationCheckpointing(*ParseActivationCheckpointing("all", 8), 1).ok());
  GptConfig config = SmallConfig();
  config.activation_checkpoint_every = 5;
  EXPECT_NE(ValidateGptConfig(config).message().find("activation_checkpoint_every"),
            std::string::npos);
  MemoryTracker tracker;
  EXPECT_EQ(GptModel::Create(config, 1, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
}

struct StepResult {
  float loss = 0;
  std::vector<std::vector<float>> grads;
};

// Two micro-batches accumulated, as a step with --accum=2 runs them.
StepResult TwoMicroBatches(const GptConfig& config, int micro_batch) {
  MemoryTracker tracker;
  auto model = GptModel::Create(config, micro_batch, &tracker);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  ModelHarness h(model->get());
  h.Randomize(17, 0.3f);
  StepResult r;
  for (int m = 0; m < 2; ++m) {
    const absl::StatusOr<float> loss =
        h.Forward(RandomBatch(micro_batch, config.seq_len, config.vocab, 40 + m));
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (!loss.ok()) return {};
    r.loss += *loss;
    EXPECT_TRUE(h.Backward(0.5f).ok());
  }
  r.grads = h.grads;
  return r;
}

class CheckpointingTest : public testing::TestWithParam<std::tuple<int, bool>> {};

// Same kernels, same inputs, same order: checkpointing changes no bit, for
// every K, in both precisions and both attentions.
TEST_P(CheckpointingTest, LossAndGradientsAreBitIdenticalToNoCheckpointing) {
  const auto [precision, flash] = GetParam();
  GptConfig base = SmallConfig();
  base.compute_dtype = precision >= 1 ? comm::Dtype::kBFloat16 : comm::Dtype::kFloat32;  // 1: bf16 products, 2: and bf16 parameters
  base.param_dtype = precision == 2 ? comm::Dtype::kBFloat16 : comm::Dtype::kFloat32;
  base.flash_attention = flash;
  const StepResult reference = TwoMicroBatches(base, 3);
  ASSERT_FALSE(reference.grads.empty());
  for (int every = 1; every <= base.layers; ++every) {
    GptConfig config = base;
    config.activation_checkpoint_every = every;
    const StepResult r = TwoMicroBatches(config, 3);
    EXPECT_EQ(r.loss, reference.loss) << ActivationCheckpointingName(every);
    EXPECT_EQ(r.grads, reference.grads) << ActivationCheckpointingName(every);
  }
}

INSTANTIATE_TEST_SUITE_P(PrecisionAndAttention, CheckpointingTest,
                         testing::Combine(testing::Values(0, 1, 2), testing::Bool()));

// Flash attention groups the softmax's sums differently: equal within fp32
// rounding, not bit for bit. T = 130 spans two key blocks (not a multiple of
// the block size) and T = 12 one partial block.
TEST(FlashAttentionInModelTest, LossAndGradientsMatchStandardAttentionWithinFp32Rounding) {
  for (const GptConfig& standard : {GptConfig{2, 16, 2, 29, 130}, SmallConfig()}) {
    GptConfig flash = standard;
    flash.flash_attention = true;
    const StepResult a = TwoMicroBatches(standard, 2);
    const StepResult b = TwoMicroBatches(flash, 2);
    ASSERT_EQ(a.grads.size(), b.grads.size());
    EXPECT_NEAR(b.loss, a.loss, 1e-5 * std::fabs(a.loss));
    for (size_t u = 0; u < a.grads.size(); ++u) {
      double diff = 0, norm = 0;
      for (size_t i = 0; i < a.grads[u].size(); ++i) {
        const double d = double(b.grads[u][i]) - a.grads[u][i];
        diff += d * d;
        norm += double(a.grads[u][i]) * a.grads[u][i];
      }
      ASSERT_GT(norm, 0);
      EXPECT_LT(std::sqrt(diff / norm), 1e-5) << "unit " << u << " T=" << standard.seq_len;
    }
  }
}

// Under bf16 compute, flash attention's products take bf16 operands like the
// standard bf16 attention's, but different ones (per-block probabilities,
// the bf16 output in D): the two agree within bf16 rounding, and with fp32.
TEST(FlashAttentionInModelTest, Bf16FlashTracksBf16StandardAndFp32) {
  GptConfig fp32 = GptConfig{2, 32, 4, 53, 140};
  GptConfig standard = fp32;
  standard.compute_dtype = comm::Dtype::kBFloat16;
  GptConfig flash = standard;
  flash.flash_attention = true;
  const StepResult a = TwoMicroBatches(standard, 2);
  const StepResult b = TwoMicroBatches(flash, 2);
  const StepResult f = TwoMicroBatches(fp32, 2);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  EXPECT_NEAR(b.loss, a.loss, 1e-2 * std::fabs(a.loss));
  for (size_t u = 0; u < a.grads.size(); ++u) {
    double diff = 0, diff32 = 0, norm = 0, norm32 = 0;
    for (size_t i = 0; i < a.grads[u].size(); ++i) {
      diff += std::pow(double(b.grads[u][i]) - a.grads[u][i], 2);
      diff32 += std::pow(double(b.grads[u][i]) - f.grads[u][i], 2);
      norm += double(a.grads[u][i]) * a.grads[u][i];
      norm32 += double(f.grads[u][i]) * f.grads[u][i];
    }
    ASSERT_GT(norm, 0);
    EXPECT_LT(std::sqrt(diff / norm), 3e-2) << "unit " << u;
    EXPECT_LT(std::sqrt(diff32 / norm32), 3e-2) << "unit " << u;
  }
}

// The tracker's kActivations after every unit's forward and backward, and
// its peaks, against the prediction.
void ExpectEveryUnitAsPredicted(const GptConfig& config) {
  const int micro_batch = 3;
  SCOPED_TRACE(ActivationCheckpointingName(config.activation_checkpoint_every) +
               (config.flash_attention ? " flash" : " standard") +
               (config.compute_dtype == comm::Dtype::kBFloat16 ? " bf16" : " fp32"));
  MemoryTracker tracker;
  auto model = GptModel::Create(config, micro_batch, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Init(1);
  const GptActivationBreakdown predicted = GptActivationBytesByUnit(config, micro_batch);
  const int units = (*model)->num_units();
  for (int step = 0; step < 2; ++step) {
    const Batch batch = RandomBatch(micro_batch, config.seq_len, config.vocab, step);
    int64_t expected = 0;
    for (int u = 0; u < units; ++u) {
      ASSERT_TRUE((*model)->ForwardUnit(u, h.Params(u), batch).ok());
      expected += predicted.unit_saved_bytes(u);
      EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), expected) << u;
    }
    EXPECT_EQ(expected, predicted.saved_bytes());
    for (int u = units - 1; u >= 0; --u) {
      ASSERT_TRUE((*model)
                      ->BackwardUnit(u, h.Params(u), {absl::MakeSpan(h.grads[u])}, 1.0f,
                                     GradWrite::kAdd)
                      .ok());
      expected -= predicted.unit_saved_bytes(u);
      EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), expected) << u;
    }
  }
  const MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.peak(MemoryCategory::kActivations), predicted.peak_bytes());
  EXPECT_EQ(s.peak(MemoryCategory::kWorkspace), predicted.workspace_bytes);
  EXPECT_EQ(s.peak_total_bytes, GptActivationBytes(config, micro_batch));
}

TEST(ActivationBytesTest, MeasuredBytesEqualThePredictionInEveryMode) {
  // fp32; bf16 products on fp32 parameters; bf16 parameters (--precision=bf16).
  for (int precision : {0, 1, 2}) {
    for (bool flash : {false, true}) {
      for (int every = 0; every <= 4; ++every) {
        GptConfig config = SmallConfig();
        config.compute_dtype = precision >= 1 ? comm::Dtype::kBFloat16 : comm::Dtype::kFloat32;
        config.param_dtype = precision == 2 ? comm::Dtype::kBFloat16 : comm::Dtype::kFloat32;
        config.flash_attention = flash;
        config.activation_checkpoint_every = every;
        ASSERT_NO_FATAL_FAILURE(ExpectEveryUnitAsPredicted(config));
        // And the modes do what they are for: every K saves less than none.
        GptConfig none = config;
        none.activation_checkpoint_every = 0;
        if (every > 0) {
          EXPECT_LT(GptActivationBytesByUnit(config, 3).peak_bytes(),
                    GptActivationBytesByUnit(none, 3).peak_bytes());
        }
      }
    }
  }
}

// The formulas' terms by hand, B = 3, T = 12, C = 16, H = 4.
TEST(ActivationBytesTest, CheckpointedBlocksKeepTheirOutputAndFlashKeepsOneValuePerRow) {
  const int64_t B = 3, T = 12, C = 16, H = 4;
  GptConfig config = SmallConfig();
  const GptActivationBreakdown none = GptActivationBytesByUnit(config, 3);
  config.activation_checkpoint_every = 1;
  const GptActivationBreakdown all = GptActivationBytesByUnit(config, 3);
  EXPECT_EQ(all.checkpointed_block_bytes, 4 * B * T * C);
  EXPECT_EQ(all.recompute_bytes, none.block_bytes - 4 * B * T * C);
  EXPECT_EQ(all.saved_bytes(),
            none.embedding_bytes + 4 * all.checkpointed_block_bytes + none.head_bytes);
  // The last block's transient, over everything before it.
  EXPECT_EQ(all.peak_bytes(), std::max(all.saved_bytes(), none.embedding_bytes +
                                                              4 * all.checkpointed_block_bytes +
                                                              all.recompute_bytes));
  EXPECT_LT(all.peak_bytes(), none.peak_bytes());
  config.activation_checkpoint_every = 0;
  config.flash_attention = true;
  const GptActivationBreakdown flash = GptActivationBytesByUnit(config, 3);
  EXPECT_EQ(flash.block_bytes, none.block_bytes - 4 * B * H * T * T + 4 * B * H * T);
}

}  // namespace
}  // namespace fsdp
