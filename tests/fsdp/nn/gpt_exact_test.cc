// File: tests/fsdp/nn/gpt_exact_test.cc
//
// The GPT's exact gradients (GptConfig::per_sequence_products, int64
// UnitGrads; docs/exact.md): the int64 sums and per-tensor maxima of a batch
// of sequences are the same bits however the sequences are split into
// micro-batches and in whatever order the micro-batches come, and so are the
// per-sequence losses; in fp32 and bf16 (fp32 and bf16 parameters), with
// flash attention and activation checkpointing. Converted, the sums are the
// gradient of the mean loss (against the whole-batch fp32 model, within
// rounding). And the model refuses the gradients of the other mode.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/fixed_point_sum.h"
#include "fsdp/nn/gpt_model.h"
#include "fsdp/nn/gpt_spec.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::RandomBatch;

constexpr int kExponent = 8;  // every contribution here is far below 2^8
constexpr uint64_t kSeed = 7;

GptConfig SmallConfig() {
  GptConfig c;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 2;
  c.vocab = 29;
  c.seq_len = 8;
  c.per_sequence_products = true;
  return c;
}

struct ExactResult {
  std::vector<std::vector<int64_t>> sums;  // per unit
  std::vector<std::vector<float>> max_abs;  // per unit, per parameter
  std::vector<float> sequence_losses;       // in the batch's order
};

// Sequences [first, first + count) of `whole`.
Batch Slice(const Batch& whole, int first, int count) {
  Batch b;
  b.batch_size = count;
  b.seq_len = whole.seq_len;
  const auto at = [&](const std::vector<int32_t>& v, int s) { return v.begin() + s * whole.seq_len; };
  b.inputs.assign(at(whole.inputs, first), at(whole.inputs, first + count));
  b.targets.assign(at(whole.targets, first), at(whole.targets, first + count));
  return b;
}

// The model on `whole`'s sequences in micro-batches of `sizes` (in `order`
// of those micro-batches), every gradient an exact sum at kExponent.
ExactResult RunSplit(const GptConfig& config, const Batch& whole, const std::vector<int>& sizes,
                     std::vector<int> order = {}) {
  const int largest = *std::max_element(sizes.begin(), sizes.end());
  MemoryTracker tracker;
  auto model = GptModel::Create(config, largest, &tracker);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  ModelHarness h(model->get());
  h.Init(kSeed);
  std::vector<int> firsts;
  for (int i = 0, first = 0; i < static_cast<int>(sizes.size()); first += sizes[i++]) {
    firsts.push_back(first);
  }
  if (order.empty()) {
    order.resize(sizes.size());
    std::iota(order.begin(), order.end(), 0);
  }
  const int units = (*model)->num_units();
  ExactResult r;
  r.sequence_losses.assign(whole.batch_size, 0.0f);
  std::vector<std::vector<float>> scratch(units);
  std::vector<std::vector<int>> exponents(units);
  r.sums.resize(units);
  r.max_abs.resize(units);
  for (int u = 0; u < units; ++u) {
    const UnitSpec& spec = (*model)->units()[u];
    r.sums[u].assign(spec.numel(), 0);
    scratch[u].assign(spec.numel(), 0.0f);
    exponents[u].assign(spec.params.size(), kExponent);
    r.max_abs[u].assign(spec.params.size(), 0.0f);
  }
  bool first_call = true;
  for (int i : order) {
    const Batch b = Slice(whole, firsts[i], sizes[i]);
    EXPECT_TRUE(h.Forward(b).ok());
    const absl::Span<const float> losses = (*model)->sequence_losses();
    EXPECT_EQ(static_cast<int>(losses.size()), sizes[i]);
    std::copy(losses.begin(), losses.end(), r.sequence_losses.begin() + firsts[i]);
    for (int u = units - 1; u >= 0; --u) {
      UnitGrads g{DtypeSpan(absl::MakeSpan(r.sums[u])), absl::MakeSpan(scratch[u]),
                  {exponents[u], absl::MakeSpan(r.max_abs[u])}};
      const absl::Status s = (*model)->BackwardUnit(
          u, h.Params(u), g, 1.0f, first_call ? GradWrite::kOverwrite : GradWrite::kAdd);
      EXPECT_TRUE(s.ok()) << s;
    }
    first_call = false;
  }
  return r;
}

void ExpectSameBits(const ExactResult& got, const ExactResult& want, const std::string& what) {
  ASSERT_EQ(got.sums.size(), want.sums.size()) << what;
  for (size_t u = 0; u < want.sums.size(); ++u) {
    EXPECT_TRUE(got.sums[u] == want.sums[u]) << what << ": unit " << u << " sums differ";
    EXPECT_EQ(got.max_abs[u], want.max_abs[u]) << what << ": unit " << u;
  }
  EXPECT_EQ(got.sequence_losses, want.sequence_losses) << what;
}

struct Variant {
  const char* name;
  comm::Dtype compute;
  comm::Dtype params;
  bool flash;
  int checkpoint_every;
};

class GptExactTest : public ::testing::TestWithParam<Variant> {};

TEST_P(GptExactTest, EverySplitAndOrderGivesTheSameSums) {
  GptConfig config = SmallConfig();
  config.compute_dtype = GetParam().compute;
  config.param_dtype = GetParam().params;
  config.flash_attention = GetParam().flash;
  config.activation_checkpoint_every = GetParam().checkpoint_every;
  const Batch whole = RandomBatch(6, config.seq_len, config.vocab, 3);
  const ExactResult one_call = RunSplit(config, whole, {6});
  bool any_nonzero = false;
  for (const auto& unit : one_call.sums) {
    for (int64_t x : unit) any_nonzero |= x != 0;
  }
  EXPECT_TRUE(any_nonzero);
  ExpectSameBits(RunSplit(config, whole, {1, 1, 1, 1, 1, 1}), one_call, "6 x 1");
  ExpectSameBits(RunSplit(config, whole, {2, 2, 2}), one_call, "3 x 2");
  ExpectSameBits(RunSplit(config, whole, {3, 3}, {1, 0}), one_call, "2 x 3 reversed");
  ExpectSameBits(RunSplit(config, whole, {4, 1, 1}, {2, 0, 1}), one_call, "4 + 1 + 1 shuffled");
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GptExactTest,
    ::testing::Values(
        Variant{"fp32", comm::Dtype::kFloat32, comm::Dtype::kFloat32, false, 0},
        Variant{"fp32_flash_checkpointed", comm::Dtype::kFloat32, comm::Dtype::kFloat32, true, 1},
        Variant{"bf16_compute", comm::Dtype::kBFloat16, comm::Dtype::kFloat32, false, 0},
        Variant{"bf16_params_flash", comm::Dtype::kBFloat16, comm::Dtype::kBFloat16, true, 0},
        Variant{"bf16_params_checkpointed", comm::Dtype::kBFloat16, comm::Dtype::kBFloat16, false,
                1}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

TEST(GptExactGradientTest, ConvertedSumsAreTheMeanLossGradient) {
  GptConfig exact_config = SmallConfig();
  GptConfig plain_config = exact_config;
  plain_config.per_sequence_products = false;
  const Batch whole = RandomBatch(4, exact_config.seq_len, exact_config.vocab, 5);
  const ExactResult exact = RunSplit(exact_config, whole, {2, 2});

  MemoryTracker tracker;
  auto plain = GptModel::Create(plain_config, 4, &tracker);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ModelHarness h(plain->get());
  h.Init(kSeed);
  const absl::StatusOr<float> loss = h.Forward(whole);
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(h.Backward(1.0f, GradWrite::kOverwrite).ok());
  double loss_sum = 0.0;
  for (float l : exact.sequence_losses) loss_sum += l;
  EXPECT_NEAR(loss_sum / 4, *loss, 1e-6 * std::fabs(*loss));

  const int64_t tokens = int64_t{whole.batch_size} * whole.seq_len;
  for (int u = 0; u < (*plain)->num_units(); ++u) {
    const UnitSpec& spec = (*plain)->units()[u];
    std::vector<float> converted(spec.numel());
    int64_t offset = 0;
    for (size_t k = 0; k < spec.params.size(); ++k) {
      const int64_t n = spec.params[k].numel();
      ASSERT_TRUE(ExactSumToFloats(kExponent, absl::MakeConstSpan(exact.sums[u]).subspan(offset, n),
                                   tokens, exact.max_abs[u][k],
                                   absl::MakeSpan(converted).subspan(offset, n))
                      .ok());
      offset += n;
    }
    double worst = 0.0, scale = 0.0;
    for (int64_t i = 0; i < spec.numel(); ++i) {
      worst = std::max(worst, std::fabs(double{converted[i]} - h.grads[u][i]));
      scale = std::max(scale, std::fabs(double{h.grads[u][i]}));
    }
    EXPECT_LE(worst, 1e-5 * scale + 1e-9) << spec.name;
  }
}

TEST(GptExactGradientTest, EachModeRefusesTheOthersGradients) {
  MemoryTracker tracker;
  GptConfig exact_config = SmallConfig();
  auto exact = GptModel::Create(exact_config, 2, &tracker);
  ASSERT_TRUE(exact.ok());
  ModelHarness h(exact->get());
  h.Init(kSeed);
  const Batch batch = RandomBatch(2, exact_config.seq_len, exact_config.vocab, 1);
  ASSERT_TRUE(h.Forward(batch).ok());
  const int last = (*exact)->num_units() - 1;
  absl::Status s = (*exact)->BackwardUnit(last, h.Params(last), {absl::MakeSpan(h.grads[last])},
                                          1.0f, GradWrite::kOverwrite);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("exact (int64) gradient sums only"), std::string::npos) << s;

  GptConfig plain_config = SmallConfig();
  plain_config.per_sequence_products = false;
  auto plain = GptModel::Create(plain_config, 2, &tracker);
  ASSERT_TRUE(plain.ok());
  ModelHarness p(plain->get());
  p.Init(kSeed);
  ASSERT_TRUE(p.Forward(batch).ok());
  const UnitSpec& spec = (*plain)->units()[last];
  std::vector<int64_t> sums(spec.numel());
  std::vector<float> scratch(spec.numel());
  std::vector<int> exponents(spec.params.size(), kExponent);
  std::vector<float> max_abs(spec.params.size());
  s = (*plain)->BackwardUnit(last, p.Params(last),
                             {DtypeSpan(absl::MakeSpan(sums)), absl::MakeSpan(scratch),
                              {exponents, absl::MakeSpan(max_abs)}},
                             1.0f, GradWrite::kOverwrite);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("per_sequence_products"), std::string::npos) << s;
}

}  // namespace
}  // namespace fsdp
