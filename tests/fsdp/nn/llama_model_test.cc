// File: tests/fsdp/nn/llama_model_test.cc
//
// LlamaModel: its spec against known parameter counts, its loss against the
// independent double reference (tests/fsdp/nn/llama_reference.h), its
// gradients against finite differences, and the contracts every model keeps
// (kOverwrite = adding into zeros, checkpointing and flash attention in
// every precision).
#include "fsdp/nn/llama_model.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "fsdp/nn/llama_spec.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"
#include "tests/fsdp/nn/llama_reference.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::NaiveLlamaLoss;
using testing_util::NumericGrad;
using testing_util::RandomBatch;

constexpr comm::Dtype kF32 = comm::Dtype::kFloat32;
constexpr comm::Dtype kBf16 = comm::Dtype::kBFloat16;

LlamaConfig TinyConfig() {
  LlamaConfig c;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn_hidden = 12;
  c.vocab = 11;
  c.seq_len = 6;
  c.rope_theta = 100.0f;  // angles that turn visibly within 6 positions
  return c;
}

TEST(LlamaSpecTest, ValidationNamesTheBadField) {
  LlamaConfig c = TinyConfig();
  EXPECT_TRUE(ValidateLlamaConfig(c).ok());
  c.kv_heads = 3;
  absl::Status s = ValidateLlamaConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("kv_heads (3) must divide heads (4)"), std::string::npos)
      << s.message();
  c = TinyConfig();
  c.heads = 8;  // head size 2 is even; 16 / 16 = 1 is not
  EXPECT_TRUE(ValidateLlamaConfig(c).ok()) << ValidateLlamaConfig(c);
  c.heads = 16;
  c.kv_heads = 16;
  s = ValidateLlamaConfig(c);
  EXPECT_NE(s.message().find("even head size"), std::string::npos) << s.message();
  c = TinyConfig();
  c.ffn_hidden = 0;
  EXPECT_NE(ValidateLlamaConfig(c).message().find("ffn_hidden must be positive"),
            std::string::npos);
  c = TinyConfig();
  c.rope_theta = 1.0f;
  EXPECT_NE(ValidateLlamaConfig(c).message().find("rope_theta"), std::string::npos);
  c = TinyConfig();
  c.param_dtype = kBf16;
  EXPECT_NE(ValidateLlamaConfig(c).message().find("bf16 parameters need bf16 compute"),
            std::string::npos);
  MemoryTracker tracker;
  EXPECT_EQ(LlamaModel::Create(c, 1, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LlamaModel::Create(TinyConfig(), 0, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LlamaSpecTest, DefaultFfnHiddenIsLlamasRule) {
  EXPECT_EQ(LlamaDefaultFfnHidden(4096), 11008);        // Llama 2 7B
  EXPECT_EQ(LlamaDefaultFfnHidden(5120), 13824);        // Llama 2 13B
  EXPECT_EQ(LlamaDefaultFfnHidden(64), 256);
  EXPECT_EQ(LlamaDefaultFfnHidden(96, 32), 256);        // 8 * 96 / 3 = 256 exactly
  EXPECT_EQ(LlamaDefaultFfnHidden(100, 32), 288);       // 266 rounded up
}

TEST(LlamaSpecTest, Llama3With8BillionParametersHasTheKnownCountAndHfNames) {
  LlamaConfig c;
  c.layers = 32;
  c.d_model = 4096;
  c.heads = 32;
  c.kv_heads = 8;
  c.ffn_hidden = 14336;
  c.vocab = 128256;
  c.seq_len = 8192;
  c.rope_theta = 500000.0f;
  ASSERT_TRUE(ValidateLlamaConfig(c).ok());
  EXPECT_EQ(LlamaNumParams(c), int64_t{8030261248});  // Meta-Llama-3-8B, untied
  const std::vector<UnitSpec> units = LlamaUnitSpecs(c);
  ASSERT_EQ(units.size(), 34u);
  EXPECT_EQ(units[0].params[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(units[3].params[2].name, "model.layers.2.self_attn.k_proj.weight");
  EXPECT_EQ(units[3].params[2].shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(units[3].params[8].name, "model.layers.2.mlp.down_proj.weight");
  EXPECT_EQ(units[3].params[8].shape, (std::vector<int64_t>{4096, 14336}));
  EXPECT_EQ(units[33].params[1].name, "lm_head.weight");
  // Llama 3.2 1B: the head tied to the embedding, which the head unit then
  // does not hold.
  LlamaConfig tied = c;
  tied.layers = 16;
  tied.d_model = 2048;
  tied.heads = 32;
  tied.kv_heads = 8;
  tied.ffn_hidden = 8192;
  tied.tie_embeddings = true;
  ASSERT_TRUE(ValidateLlamaConfig(tied).ok());
  EXPECT_EQ(LlamaNumParams(tied), int64_t{1235814400});  // meta-llama/Llama-3.2-1B
  EXPECT_EQ(LlamaUnitSpecs(tied).back().params.size(), 1u);
}

struct Mode {
  const char* name;
  comm::Dtype compute, params;
  bool flash;
  int checkpoint_every;
  bool tied = false;
};

LlamaConfig WithMode(LlamaConfig c, const Mode& m) {
  c.compute_dtype = m.compute;
  c.param_dtype = m.params;
  c.flash_attention = m.flash;
  c.activation_checkpoint_every = m.checkpoint_every;
  c.tie_embeddings = c.tie_embeddings || m.tied;
  return c;
}

// The loss equals the double reference: to fp32 rounding in fp32 compute,
// within bf16's in bf16 compute.
TEST(LlamaModelTest, LossEqualsTheIndependentReference) {
  for (const Mode m : {Mode{"fp32", kF32, kF32, false, 0}, Mode{"fp32 flash", kF32, kF32, true, 0},
                       Mode{"bf16", kBf16, kF32, false, 0},
                       Mode{"bf16 params flash", kBf16, kBf16, true, 1}}) {
    for (int kv_heads : {4, 2, 1, -2}) {  // -2: 2, the head tied to the embedding
      LlamaConfig config = WithMode(TinyConfig(), m);
      config.kv_heads = kv_heads < 0 ? -kv_heads : kv_heads;
      config.tie_embeddings = kv_heads < 0;
      MemoryTracker tracker;
      auto model = LlamaModel::Create(config, 2, &tracker);
      ASSERT_TRUE(model.ok()) << model.status();
      ModelHarness h(model->get());
      h.Randomize(3, 0.3f);
      for (auto& unit : h.params) {
        // Weights as the bf16 model reads them, so only compute differs.
        if (m.params == kBf16) base::RoundThroughBf16(unit.data(), unit.size());
      }
      const Batch batch = RandomBatch(2, 6, 11, 4);
      absl::StatusOr<float> loss = h.Forward(batch);
      ASSERT_TRUE(loss.ok()) << loss.status();
      const double reference = NaiveLlamaLoss(config, h.params, batch);
      const double tolerance = m.compute == kF32 ? 2e-6 : 2e-2;
      EXPECT_NEAR(*loss, reference, tolerance * reference) << m.name << " kv " << kv_heads;
    }
  }
}

TEST(LlamaModelTest, GradientsMatchFiniteDifferences) {
  for (const int variant : {0, 1, 2}) {  // standard, flash, tied
    const bool flash = variant == 1;
    LlamaConfig config = TinyConfig();
    config.flash_attention = flash;
    config.tie_embeddings = variant == 2;
    MemoryTracker tracker;
    auto model = LlamaModel::Create(config, 2, &tracker);
    ASSERT_TRUE(model.ok()) << model.status();
    ModelHarness h(model->get());
    h.Randomize(7, 0.3f);
    const Batch batch = RandomBatch(2, 6, 11, 8);
    ASSERT_TRUE(h.Forward(batch).ok());
    ASSERT_TRUE(h.Backward(1.0f).ok());
    testing_util::ExpectGradientsMatchFiniteDifferences(h, batch, 60,
                                                        variant == 0   ? "standard"
                                                        : variant == 1 ? "flash"
                                                                       : "tied");
  }
}

// Gradients of `config` after one forward and backward of `batch`.
std::vector<std::vector<float>> Gradients(const LlamaConfig& config, const Batch& batch,
                                          GradWrite write, float* loss) {
  MemoryTracker tracker;
  auto model = LlamaModel::Create(config, 2, &tracker);
  EXPECT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Init(5);
  if (write == GradWrite::kOverwrite) {
    for (auto& g : h.grads) std::fill(g.begin(), g.end(), std::numeric_limits<float>::quiet_NaN());
  }
  absl::StatusOr<float> l = h.Forward(batch);
  EXPECT_TRUE(l.ok()) << l.status();
  *loss = l.value_or(0.0f);
  EXPECT_TRUE(h.Backward(0.5f, write).ok());
  return h.grads;
}

// kOverwrite writes every element whatever the buffer held (NaN here) with
// the bits of adding into zeros, and checkpointing recomputes with the same
// bits, in every precision and attention.
TEST(LlamaModelTest, OverwriteAndCheckpointingKeepTheBits) {
  for (const Mode m :
       {Mode{"fp32", kF32, kF32, false, 0}, Mode{"bf16", kBf16, kF32, false, 0},
        Mode{"bf16 params", kBf16, kBf16, false, 0}, Mode{"fp32 flash", kF32, kF32, true, 0},
        Mode{"bf16 flash", kBf16, kF32, true, 0},
        Mode{"bf16 params tied", kBf16, kBf16, false, 0, true},
        Mode{"fp32 tied", kF32, kF32, false, 0, true}}) {
    LlamaConfig base = TinyConfig();
    base.layers = 3;
    base.seq_len = 24;
    const Batch batch = RandomBatch(2, 24, 11, 6);
    float added_loss = 0, loss = 0;
    const auto added = Gradients(WithMode(base, m), batch, GradWrite::kAdd, &added_loss);
    for (int every : {0, 1, 2}) {
      Mode checkpointed = m;
      checkpointed.checkpoint_every = every;
      const auto overwritten =
          Gradients(WithMode(base, checkpointed), batch, GradWrite::kOverwrite, &loss);
      EXPECT_EQ(loss, added_loss) << m.name << " every " << every;
      for (size_t u = 0; u < added.size(); ++u) {
        ASSERT_EQ(overwritten[u].size(), added[u].size());
        EXPECT_EQ(0, std::memcmp(overwritten[u].data(), added[u].data(),
                                 added[u].size() * sizeof(float)))
            << m.name << " every " << every << ", unit " << u;
      }
    }
  }
}

// bf16 gradients (written whole through the fp32 scratch) are the fp32
// gradients of the same computation rounded, but for the products' weight
// gradients, which are rounded from the products' own accumulators.
TEST(LlamaModelTest, Bf16GradientsAreTheScratchRounded) {
  LlamaConfig config = WithMode(TinyConfig(), Mode{"bf16 params", kBf16, kBf16, false, 0});
  MemoryTracker tracker;
  auto model = LlamaModel::Create(config, 2, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Init(9);
  const Batch batch = RandomBatch(2, 6, 11, 10);
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.0f).ok());
  const std::vector<std::vector<float>> fp32 = h.grads;
  ASSERT_TRUE(h.Forward(batch).ok());
  for (int u = h.model->num_units() - 1; u >= 0; --u) {
    std::vector<uint16_t> values(h.params[u].size());
    std::vector<float> scratch(h.params[u].size());
    ASSERT_TRUE(h.model
                    ->BackwardUnit(u, h.Params(u), {absl::MakeSpan(values), absl::MakeSpan(scratch)},
                                   1.0f, GradWrite::kOverwrite)
                    .ok());
    for (size_t i = 0; i < values.size(); ++i) {
      float widened;
      base::FromBf16(&widened, &values[i], 1);
      EXPECT_NEAR(widened, fp32[u][i], 1e-2f * std::fabs(fp32[u][i]) + 1e-7f)
          << h.model->units()[u].name << "[" << i << "]";
    }
  }
}

// Two steps of `config` at micro-batch 3: the tracker's activations after
// each forward and backward, and its peaks, equal the prediction to the byte.
void ExpectMeasuredBytesEqualPrediction(const LlamaConfig& config, const std::string& what) {
  const int micro_batch = 3;
  MemoryTracker tracker;
  auto model = LlamaModel::Create(config, micro_batch, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Init(1);
  const GptActivationBreakdown predicted = LlamaActivationBytesByUnit(config, micro_batch);
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(h.Forward(RandomBatch(micro_batch, config.seq_len, config.vocab, step)).ok());
    EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), predicted.saved_bytes())
        << what;
    ASSERT_TRUE(h.Backward(1.0f).ok());
    EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), 0) << what;
  }
  const MemorySnapshot s = tracker.Snapshot();
  EXPECT_EQ(s.peak(MemoryCategory::kActivations), predicted.peak_bytes()) << what;
  EXPECT_EQ(s.peak(MemoryCategory::kWorkspace), predicted.workspace_bytes) << what;
}

TEST(LlamaModelTest, MeasuredActivationAndWorkspacePeaksEqualThePrediction) {
  for (const comm::Dtype compute : {kF32, kBf16}) {
    for (const comm::Dtype params : {kF32, kBf16}) {
      if (compute == kF32 && params == kBf16) continue;
      for (const bool flash : {false, true}) {
        for (const int every : {0, 1, 2}) {
          LlamaConfig config = TinyConfig();
          config.layers = 3;
          config.ffn_hidden = 40;  // 2F > 3C: the wide buffers follow the MLP
          config.seq_len = 9;
          config.tie_embeddings = every == 2;
          const Mode mode{"", compute, params, flash, every};
          ExpectMeasuredBytesEqualPrediction(
              WithMode(config, mode),
              absl::StrCat(comm::DtypeName(compute), " compute, ", comm::DtypeName(params),
                           " params, flash ", flash, ", checkpoint every ", every,
                           config.tie_embeddings ? ", tied" : ""));
        }
      }
    }
  }
  // Independent of the formula's code: the fp32 block's saved tensors by hand.
  LlamaConfig config = TinyConfig();
  const int64_t B = 3, T = 6, C = 16, H = 4, F = 12, n = B * T;
  const int64_t block_floats = n * C /*rms1*/ + n + 3 * n * C /*qkv*/ + B * H * T * T +
                               n * C /*att*/ + n * C /*res2*/ + n * C /*rms2*/ + n +
                               2 * n * F /*gate_up*/ + n * F /*swiglu*/ + n * C /*out*/;
  EXPECT_EQ(LlamaActivationBytesByUnit(config, 3).block_bytes, 4 * block_floats);
}

// Per-sequence products (the exact mode's model): the loss is the mean of
// the per-sequence losses it reports and equals the whole-batch model's to
// rounding; each model refuses the other's gradients, naming the reason.
TEST(LlamaModelTest, ExactGradientsNeedPerSequenceProducts) {
  const Batch batch = RandomBatch(3, 6, 11, 2);
  auto loss_of = [&](bool per_sequence, std::vector<float>* sequence_losses) {
    LlamaConfig config = TinyConfig();
    config.per_sequence_products = per_sequence;
    MemoryTracker tracker;
    auto model = LlamaModel::Create(config, 3, &tracker);
    EXPECT_TRUE(model.ok()) << model.status();
    ModelHarness h(model->get());
    h.Init(4);
    absl::StatusOr<float> loss = h.Forward(batch);
    EXPECT_TRUE(loss.ok()) << loss.status();
    const absl::Span<const float> losses = (*model)->sequence_losses();
    sequence_losses->assign(losses.begin(), losses.end());
    // The other kind of gradients for the head.
    const int last = (*model)->num_units() - 1;
    const int64_t numel = (*model)->units()[last].numel();
    const int params = static_cast<int>((*model)->units()[last].params.size());
    std::vector<int64_t> sums(numel);
    std::vector<float> values(numel), scratch(numel), max_abs(params);
    std::vector<int> exponents(params, 0);
    UnitGrads grads;
    if (per_sequence) {
      grads.values = DtypeSpan(absl::MakeSpan(values));
    } else {
      grads.values = DtypeSpan(absl::MakeSpan(sums));
      grads.fp32_scratch = absl::MakeSpan(scratch);
      grads.exact = {exponents, absl::MakeSpan(max_abs)};
    }
    const absl::Status refused =
        (*model)->BackwardUnit(last, h.Params(last), grads, 1.0f, GradWrite::kOverwrite);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_NE(refused.message().find(per_sequence ? "writes exact (int64) gradient sums only"
                                                  : "need LlamaConfig::per_sequence_products"),
              std::string::npos)
        << refused;
    return loss.value_or(0.0f);
  };
  std::vector<float> none, per_sequence;
  const float whole = loss_of(false, &none);
  const float split = loss_of(true, &per_sequence);
  EXPECT_TRUE(none.empty());
  ASSERT_EQ(per_sequence.size(), 3u);
  EXPECT_EQ(split,
            static_cast<float>((double{per_sequence[0]} + per_sequence[1] + per_sequence[2]) / 3));
  EXPECT_NEAR(split, whole, 1e-6f * whole);
}

TEST(LlamaModelTest, ForwardThatExceedsTheBudgetFailsCleanly) {
  MemoryTracker unbounded;
  auto probe = LlamaModel::Create(TinyConfig(), 2, &unbounded);
  ASSERT_TRUE(probe.ok());
  const int64_t workspace = unbounded.Snapshot().current(MemoryCategory::kWorkspace);
  MemoryTracker tracker(workspace + 200);
  auto model = LlamaModel::Create(TinyConfig(), 2, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Init(1);
  absl::StatusOr<float> loss = h.Forward(RandomBatch(2, 6, 11, 1));
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kResourceExhausted) << loss.status();
}

}  // namespace
}  // namespace fsdp
