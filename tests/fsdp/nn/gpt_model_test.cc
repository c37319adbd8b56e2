// File: tests/fsdp/nn/gpt_model_test.cc
#include "fsdp/nn/gpt_model.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "fsdp/nn/gpt_spec.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::NumericGrad;
using testing_util::RandomBatch;

GptConfig TinyConfig() {
  GptConfig c;
  c.layers = 2;
  c.d_model = 8;
  c.heads = 2;
  c.vocab = 11;
  c.seq_len = 5;
  return c;
}

TEST(GptSpecTest, ValidationNamesTheBadField) {
  GptConfig c = TinyConfig();
  EXPECT_TRUE(ValidateGptConfig(c).ok());
  c.heads = 3;
  absl::Status s = ValidateGptConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("heads (3) must divide d_model (8)"), std::string::npos)
      << s.message();
  c = TinyConfig();
  c.layers = 0;
  s = ValidateGptConfig(c);
  EXPECT_NE(s.message().find("layers must be positive"), std::string::npos) << s.message();
  MemoryTracker tracker;
  EXPECT_EQ(GptModel::Create(c, 1, &tracker).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GptModel::Create(TinyConfig(), 0, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GptSpecTest, Gpt2SmallHasTheKnownParameterCountPlusAnUntiedHead) {
  // GPT-2 124M: 124,439,808 parameters with the head tied to wte; ours is
  // untied, adding V * C.
  const GptConfig gpt2{12, 768, 12, 50257, 1024};
  EXPECT_EQ(GptNumParams(gpt2), 124439808 + int64_t{50257} * 768);
  const std::vector<UnitSpec> units = GptUnitSpecs(gpt2);
  ASSERT_EQ(units.size(), 14u);
  EXPECT_EQ(units[0].name, "embedding");
  EXPECT_EQ(units[1].name, "block0");
  EXPECT_EQ(units[12].name, "block11");
  EXPECT_EQ(units[13].name, "head");
  EXPECT_EQ(units[1].params[2].name, "block0.attn.qkv.weight");
  EXPECT_EQ(units[1].params[2].shape, (std::vector<int64_t>{3 * 768, 768}));
  // Per block 12 C^2 + 13 C, by the textbook count.
  EXPECT_EQ(units[5].numel(), 12 * 768 * 768 + 13 * 768);
}

TEST(GptSpecTest, SpecsOfA7Point5BillionParameterModelNeedNoBigAllocation) {
  const GptConfig big{36, 4096, 32, 50304, 2048};
  const int64_t C = 4096, V = 50304, T = 2048;
  const int64_t expected = 36 * (12 * C * C + 13 * C) + V * C + T * C + 2 * C + V * C;
  EXPECT_EQ(GptNumParams(big), expected);
  EXPECT_GT(expected, int64_t{7'500'000'000});
  EXPECT_GT(GptActivationBytes(big, 1), 0);
}

TEST(GptModelTest, GradientsThroughTheModelInterfaceMatchFiniteDifferences) {
  MemoryTracker tracker;
  absl::StatusOr<std::unique_ptr<GptModel>> model = GptModel::Create(TinyConfig(), 2, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Randomize(7, 0.3f);
  const Batch batch = RandomBatch(2, 5, 11, 8);
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.0f).ok());
  testing_util::ExpectGradientsMatchFiniteDifferences(h, batch, 40, "gpt");
}

TEST(GptModelTest, BackwardAddsScaledGradients) {
  MemoryTracker tracker;
  auto model = GptModel::Create(TinyConfig(), 2, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(3);
  const Batch batch = RandomBatch(2, 5, 11, 9);
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.0f).ok());
  const std::vector<std::vector<float>> once = h.grads;
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(2.0f).ok());  // adds 2x: total 3x
  for (size_t u = 0; u < once.size(); ++u)
    for (size_t i = 0; i < once[u].size(); ++i)
      EXPECT_NEAR(h.grads[u][i], 3.0f * once[u][i], 1e-5f + 1e-4f * std::fabs(once[u][i]));
}

// GradWrite::kOverwrite writes every gradient element, whatever the buffer
// held (here NaN), and gives the bits that adding into zeroed gradients
// gives (the trainer's first micro-batch against the old zeroing pass), in
// each compute mode; activation checkpointing recomputes one block.
TEST(GptModelTest, OverwrittenGradientsEqualGradientsAddedIntoZeros) {
  struct Mode {
    const char* name;
    comm::Dtype compute, params;
    bool flash;
  };
  constexpr comm::Dtype kF32 = comm::Dtype::kFloat32, kBf16 = comm::Dtype::kBFloat16;
  for (const Mode mode : {Mode{"fp32", kF32, kF32, false}, Mode{"bf16 compute", kBf16, kF32, false},
                          Mode{"bf16 params", kBf16, kBf16, false}, Mode{"fp32 flash", kF32, kF32, true}}) {
    GptConfig config{3, 32, 4, 53, 24};
    config.compute_dtype = mode.compute;
    config.param_dtype = mode.params;
    config.flash_attention = mode.flash;
    config.activation_checkpoint_every = 2;
    MemoryTracker tracker;
    auto model = GptModel::Create(config, 2, &tracker);
    ASSERT_TRUE(model.ok()) << model.status();
    ModelHarness h(model->get());
    h.Init(5);
    const Batch batch = RandomBatch(2, 24, 53, 6);
    ASSERT_TRUE(h.Forward(batch).ok());
    ASSERT_TRUE(h.Backward(0.5f).ok());  // into the harness's zeros
    const std::vector<std::vector<float>> added = h.grads;
    for (auto& g : h.grads) std::fill(g.begin(), g.end(), std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(h.Forward(batch).ok());
    ASSERT_TRUE(h.Backward(0.5f, GradWrite::kOverwrite).ok());
    for (size_t u = 0; u < added.size(); ++u) {
      ASSERT_EQ(h.grads[u].size(), added[u].size());
      EXPECT_EQ(0, std::memcmp(h.grads[u].data(), added[u].data(),
                               added[u].size() * sizeof(float)))
          << mode.name << ", unit " << u;
    }
  }
}

// Two steps of `config` at micro-batch 3: the tracker's activations after
// each forward and backward, and its peaks, equal the prediction.
void ExpectMeasuredBytesEqualPrediction(const GptConfig& config) {
  const int micro_batch = 3;
  MemoryTracker tracker;
  auto model = GptModel::Create(config, micro_batch, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(1);
  const GptActivationBreakdown predicted = GptActivationBytesByUnit(config, micro_batch);
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(h.Forward(RandomBatch(micro_batch, config.seq_len, config.vocab, step)).ok());
    EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), predicted.saved_bytes());
    ASSERT_TRUE(h.Backward(1.0f).ok());
    EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), 0);
  }
  const MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.peak(MemoryCategory::kActivations), predicted.peak_bytes());
  EXPECT_EQ(s.peak(MemoryCategory::kWorkspace), predicted.workspace_bytes);
  EXPECT_EQ(s.peak_total_bytes, GptActivationBytes(config, micro_batch));
}

TEST(GptModelTest, MeasuredActivationAndWorkspacePeaksEqualThePrediction) {
  const GptConfig config{3, 16, 4, 37, 12};
  const int micro_batch = 3;
  ExpectMeasuredBytesEqualPrediction(config);
  const GptActivationBreakdown predicted = GptActivationBytesByUnit(config, micro_batch);
  // Independent check of the formula's size: the saved tensors listed by hand.
  const int64_t B = 3, T = 12, C = 16, H = 4, V = 37, BT = B * T;
  const int64_t block_floats = BT * C /*ln1*/ + 2 * BT + 3 * BT * C /*qkv*/ + B * H * T * T +
                               BT * C /*att*/ + BT * C /*res2*/ + BT * C /*ln2*/ + 2 * BT +
                               8 * BT * C /*fc, gelu*/ + BT * C /*out*/;
  EXPECT_EQ(predicted.block_bytes, 4 * block_floats);
  EXPECT_EQ(predicted.head_bytes, 4 * (BT * C + 2 * BT + BT * V + BT));
}

TEST(GptModelTest, ForwardThatExceedsTheBudgetFailsCleanly) {
  const GptConfig config = TinyConfig();
  const GptActivationBreakdown predicted = GptActivationBytesByUnit(config, 2);
  MemoryTracker tracker(predicted.workspace_bytes + predicted.embedding_bytes + 100);
  auto model = GptModel::Create(config, 2, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Init(1);
  absl::StatusOr<float> loss = h.Forward(RandomBatch(2, 5, 11, 1));
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(loss.status().message().find("block0"), std::string::npos) << loss.status();
}

TEST(GptModelTest, OutOfOrderCallsAndBadInputsAreErrors) {
  MemoryTracker tracker;
  auto model = GptModel::Create(TinyConfig(), 2, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(1);
  Model& m = **model;
  const Batch batch = RandomBatch(2, 5, 11, 1);
  EXPECT_EQ(m.BackwardUnit(3, h.Params(3), {absl::MakeSpan(h.grads[3])}, 1.0f, GradWrite::kAdd)
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.ForwardUnit(1, h.Params(1), batch).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.ForwardUnit(9, h.Params(1), batch).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(m.ForwardUnit(0, h.Params(1), batch).code(), absl::StatusCode::kInvalidArgument);
  Batch bad = batch;
  bad.inputs[3] = 11;
  EXPECT_EQ(m.ForwardUnit(0, h.Params(0), bad).code(), absl::StatusCode::kInvalidArgument);
  bad = RandomBatch(3, 5, 11, 1);  // larger than the micro-batch
  EXPECT_EQ(m.ForwardUnit(0, h.Params(0), bad).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(m.ForwardUnit(0, h.Params(0), batch).ok());
  EXPECT_EQ(m.BackwardUnit(0, h.Params(0), {absl::MakeSpan(h.grads[0])}, 1.0f, GradWrite::kAdd)
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // Shorter sequences than the config's seq_len are fine.
  EXPECT_TRUE(h.Forward(RandomBatch(1, 3, 11, 2)).ok());
  EXPECT_TRUE(h.Backward(1.0f).ok());
}

TEST(GptModelTest, InitIsDeterministicPerSeedAndUnitWithGpt2Scales) {
  const GptConfig config{4, 64, 4, 50, 16};
  MemoryTracker tracker;
  auto model = GptModel::Create(config, 1, &tracker);
  ASSERT_TRUE(model.ok());
  const UnitSpec& block = (*model)->units()[2];
  std::vector<float> a(block.numel()), b(block.numel()), c(block.numel());
  (*model)->InitUnitParams(2, absl::MakeSpan(a), 42);
  (*model)->InitUnitParams(2, absl::MakeSpan(b), 42);
  (*model)->InitUnitParams(2, absl::MakeSpan(c), 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<float> other_block(block.numel());
  (*model)->InitUnitParams(3, absl::MakeSpan(other_block), 42);
  EXPECT_NE(a, other_block);
  // Per parameter: LN weight 1, biases 0, std 0.02 or 0.02/sqrt(2L).
  int64_t offset = 0;
  for (const ParamSpec& p : block.params) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < p.numel(); ++i) {
      sum += a[offset + i];
      sq += double{a[offset + i]} * a[offset + i];
    }
    const double mean = sum / p.numel();
    const double std = std::sqrt(sq / p.numel() - mean * mean);
    if (p.name.find(".bias") != std::string::npos) {
      EXPECT_EQ(sq, 0.0) << p.name;
    } else if (p.name.find(".ln") != std::string::npos) {
      EXPECT_EQ(mean, 1.0) << p.name;
      EXPECT_EQ(std, 0.0) << p.name;
    } else {
      const double expected =
          p.name.find("proj") != std::string::npos ? 0.02 / std::sqrt(8.0) : 0.02;
      EXPECT_NEAR(std, expected, 0.1 * expected) << p.name;
      EXPECT_NEAR(mean, 0.0, 0.1 * expected) << p.name;
    }
    offset += p.numel();
  }
}

TEST(GptModelTest, InitialLossIsNearLogVocab) {
  const GptConfig config{2, 32, 4, 64, 16};
  MemoryTracker tracker;
  auto model = GptModel::Create(config, 4, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(5);
  absl::StatusOr<float> loss = h.Forward(RandomBatch(4, 16, 64, 3));
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, std::log(64.0), 0.1);
}

}  // namespace
}  // namespace fsdp

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::RandomBatch;

// The bf16 compute mode against the fp32 model (whose gradients the finite
// difference test above checks): same parameters and batch, loss and every
// unit's gradient within what bf16's 8-bit mantissa allows. The tolerance:
// each product rounds its operands to 2^-9 relative, so a gradient vector is
// expected within a few 2^-9 of fp32's in relative L2 norm; 3e-2 leaves room
// for the sums of several products, and fails for a wrong product (>= 1).
TEST(GptModelBf16Test, LossAndGradientsTrackFp32WithinBf16Rounding) {
  GptConfig fp32_config{2, 32, 4, 53, 24};
  GptConfig bf16_config = fp32_config;
  bf16_config.compute_dtype = comm::Dtype::kBFloat16;
  MemoryTracker t32, t16;
  auto m32 = GptModel::Create(fp32_config, 2, &t32);
  auto m16 = GptModel::Create(bf16_config, 2, &t16);
  ASSERT_TRUE(m32.ok() && m16.ok());
  ModelHarness h32(m32->get()), h16(m16->get());
  h32.Randomize(5, 0.2f);
  h16.params = h32.params;
  const Batch batch = RandomBatch(2, 24, 53, 3);
  const absl::StatusOr<float> loss32 = h32.Forward(batch);
  const absl::StatusOr<float> loss16 = h16.Forward(batch);
  ASSERT_TRUE(loss32.ok() && loss16.ok());
  EXPECT_NEAR(*loss16, *loss32, 1e-2 * std::fabs(*loss32));
  ASSERT_TRUE(h32.Backward(1.0f).ok());
  ASSERT_TRUE(h16.Backward(1.0f).ok());
  for (int u = 0; u < h32.model->num_units(); ++u) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < h32.grads[u].size(); ++i) {
      const double d = h16.grads[u][i] - h32.grads[u][i];
      diff += d * d;
      norm += double(h32.grads[u][i]) * h32.grads[u][i];
    }
    ASSERT_GT(norm, 0) << h32.model->units()[u].name;
    EXPECT_LT(std::sqrt(diff / norm), 3e-2) << h32.model->units()[u].name;
  }
}

TEST(GptModelBf16Test, MeasuredActivationAndWorkspacePeaksEqualThePrediction) {
  GptConfig config{3, 16, 4, 37, 12};
  config.compute_dtype = comm::Dtype::kBFloat16;
  const int micro_batch = 3;
  ExpectMeasuredBytesEqualPrediction(config);
  const GptActivationBreakdown predicted = GptActivationBytesByUnit(config, micro_batch);
  // By hand: ln1, qkv, att, ln2 and gelu (10 BTC) and the attention
  // probabilities (B H T T) of a block and the head's ln_f in 2 bytes; the
  // workspace drops fp32's second 4 BTC gradient (GELU's backward rounds its
  // gradient block by block), adds the largest unit (here a block) and 4 BTC
  // in bf16, and attention's dense head blocks: q, k, v and the output
  // gradient in bf16, one T x hs product in fp32.
  const int64_t B = 3, T = 12, C = 16, H = 4, V = 37, BT = B * T;
  const GptActivationBreakdown fp32 = GptActivationBytesByUnit({3, 16, 4, 37, 12}, micro_batch);
  EXPECT_EQ(predicted.block_bytes, fp32.block_bytes - 2 * (10 * BT * C + B * H * T * T));
  EXPECT_EQ(predicted.head_bytes, 4 * (2 * BT + BT * V + BT) + 2 * BT * C);
  const int64_t max_unit = 12 * C * C + 13 * C;  // a block: larger than embedding and head here
  ASSERT_GT(max_unit, V * C + T * C);
  const int64_t hs = C / H;
  EXPECT_EQ(predicted.workspace_bytes,
            fp32.workspace_bytes - 4 * 4 * BT * C + 4 * T * hs +
                2 * (max_unit + 4 * BT * C + T * T + 4 * T * hs));
}

// The bf16 parameter layout (bf16 param_dtype: what --precision=bf16 trains with)
// computes exactly what the bf16 compute mode computes from fp32 parameters
// that hold the same bf16 values: loss and every gradient bit for bit. Its
// memory is exactly GptActivationBytesByUnit's, the workspace holding an
// fp32 copy of one unit's 1-D parameters instead of a bf16 copy of a unit.
TEST(GptModelBf16Test, Bf16ParametersGiveTheBitsOfRoundedFp32Parameters) {
  GptConfig rounded_config{2, 32, 4, 53, 24};
  rounded_config.compute_dtype = comm::Dtype::kBFloat16;
  GptConfig bf16_config = rounded_config;
  bf16_config.param_dtype = comm::Dtype::kBFloat16;
  MemoryTracker t_rounded, t_bf16;
  auto rounded = GptModel::Create(rounded_config, 2, &t_rounded);
  auto bf16 = GptModel::Create(bf16_config, 2, &t_bf16);
  ASSERT_TRUE(rounded.ok() && bf16.ok());
  EXPECT_EQ((*rounded)->param_dtype(), comm::Dtype::kFloat32);
  EXPECT_EQ((*bf16)->param_dtype(), comm::Dtype::kBFloat16);
  ModelHarness h_rounded(rounded->get()), h_bf16(bf16->get());
  h_bf16.Randomize(5, 0.2f);
  h_rounded.params = h_bf16.params;
  for (int u = 0; u < h_rounded.model->num_units(); ++u) {
    const absl::Span<const uint16_t> bits = h_bf16.Bf16Params(u);
    base::FromBf16(h_rounded.params[u].data(), bits.data(), static_cast<int64_t>(bits.size()));
  }
  const Batch batch = RandomBatch(2, 24, 53, 3);
  for (int step = 0; step < 2; ++step) {
    const absl::StatusOr<float> loss_rounded = h_rounded.Forward(batch);
    const absl::StatusOr<float> loss_bf16 = h_bf16.Forward(batch);
    ASSERT_TRUE(loss_rounded.ok() && loss_bf16.ok()) << loss_bf16.status();
    EXPECT_EQ(*loss_bf16, *loss_rounded);
    ASSERT_TRUE(h_rounded.Backward(1.0f).ok());
    ASSERT_TRUE(h_bf16.Backward(1.0f).ok());
    EXPECT_EQ(h_bf16.grads, h_rounded.grads);
  }
  // fp32 parameters are refused by a bf16-parameter model and vice versa.
  EXPECT_EQ((*bf16)->ForwardUnit(0, absl::MakeConstSpan(h_bf16.params[0]), batch).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*rounded)->ForwardUnit(0, h_bf16.Bf16Params(0), batch).code(),
            absl::StatusCode::kFailedPrecondition);
  // bf16 parameters need bf16 compute.
  GptConfig bad = bf16_config;
  bad.compute_dtype = comm::Dtype::kFloat32;
  EXPECT_NE(ValidateGptConfig(bad).message().find("needs compute_dtype bf16"), std::string::npos);
}

TEST(GptModelBf16Test, Bf16ParametersMeasuredPeaksEqualThePrediction) {
  GptConfig config{3, 16, 4, 37, 12};
  config.compute_dtype = comm::Dtype::kBFloat16;
  config.param_dtype = comm::Dtype::kBFloat16;
  ExpectMeasuredBytesEqualPrediction(config);
  GptConfig converted = config;
  converted.param_dtype = comm::Dtype::kFloat32;
  const int64_t C = 16, max_unit = 12 * C * C + 13 * C;
  // The bf16 copy of the largest unit gives way to an fp32 copy of a block's
  // 13 C 1-D parameters.
  EXPECT_EQ(GptActivationBytesByUnit(config, 3).workspace_bytes,
            GptActivationBytesByUnit(converted, 3).workspace_bytes - 2 * max_unit + 4 * 13 * C);
}

// The first micro-batch under 2-byte gradients: the model writes its
// gradients in bf16 itself (the products straight from their accumulators),
// and they are the bits of the fp32 gradients rounded, whatever the scratch
// and the destination held.
TEST(GptModelBf16Test, Bf16GradientsAreTheRoundedFp32Gradients) {
  struct Mode {
    const char* name;
    bool flash;
    int checkpoint_every;
  };
  for (const Mode mode : {Mode{"standard", false, 0}, Mode{"flash", true, 0},
                          Mode{"checkpointed", false, 2}}) {
    GptConfig config{3, 32, 4, 53, 24};
    config.compute_dtype = comm::Dtype::kBFloat16;
    config.param_dtype = comm::Dtype::kBFloat16;
    config.flash_attention = mode.flash;
    config.activation_checkpoint_every = mode.checkpoint_every;
    MemoryTracker tracker;
    auto model = GptModel::Create(config, 2, &tracker);
    ASSERT_TRUE(model.ok()) << model.status();
    ModelHarness h(model->get());
    h.Randomize(7, 0.2f);
    const Batch batch = RandomBatch(2, 24, 53, 8);
    ASSERT_TRUE(h.Forward(batch).ok());
    ASSERT_TRUE(h.Backward(0.5f, GradWrite::kOverwrite).ok());
    std::vector<std::vector<uint16_t>> expected;
    for (const std::vector<float>& g : h.grads) {
      expected.emplace_back(g.size());
      base::ToBf16(expected.back().data(), g.data(), static_cast<int64_t>(g.size()));
    }
    ASSERT_TRUE(h.Forward(batch).ok());
    for (int u = h.model->num_units() - 1; u >= 0; --u) {
      std::vector<float> scratch(h.grads[u].size(), std::numeric_limits<float>::quiet_NaN());
      std::vector<uint16_t> grads16(h.grads[u].size(), 0xFFFF);
      const absl::Status status =
          (*model)->BackwardUnit(u, h.Params(u), {absl::MakeSpan(grads16), absl::MakeSpan(scratch)},
                                 0.5f, GradWrite::kOverwrite);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(grads16, expected[u]) << mode.name << ", unit " << u;
    }
  }
}

TEST(GptModelBf16Test, Bf16GradientsOfTheWrongSizeAreRefused) {
  GptConfig config{2, 32, 4, 53, 24};
  config.compute_dtype = comm::Dtype::kBFloat16;
  config.param_dtype = comm::Dtype::kBFloat16;
  MemoryTracker tracker;
  auto model = GptModel::Create(config, 2, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(3);
  ASSERT_TRUE(h.Forward(RandomBatch(2, 24, 53, 4)).ok());
  const int last = h.model->num_units() - 1;
  std::vector<uint16_t> short_grads16(h.grads[last].size() - 1);
  const absl::Status status = (*model)->BackwardUnit(
      last, h.Params(last), {absl::MakeSpan(short_grads16), absl::MakeSpan(h.grads[last])}, 1.0f,
      GradWrite::kOverwrite);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bf16 gradients for"), std::string::npos) << status;
}

// Same inputs, same bits: the bf16 path is deterministic.
TEST(GptModelBf16Test, RepeatedStepsAreBitIdentical) {
  GptConfig config{2, 32, 4, 53, 24};
  config.compute_dtype = comm::Dtype::kBFloat16;
  MemoryTracker tracker;
  auto model = GptModel::Create(config, 2, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(9);
  const Batch batch = RandomBatch(2, 24, 53, 4);
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.0f).ok());
  const std::vector<std::vector<float>> first = h.grads;
  h.ZeroGrads();
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.0f).ok());
  EXPECT_EQ(h.grads, first);
}

}  // namespace
}  // namespace fsdp
