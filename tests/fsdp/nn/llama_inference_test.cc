// File: tests/fsdp/nn/llama_inference_test.cc
//
// The forward-only Llama computes LlamaModel's fp32 logits bit for bit
// (checked through the cross-entropy of the training forward, with grouped
// and with multi-head attention), agrees with the independent double
// reference, takes less memory than a training micro-batch, is causal (a
// prefix gives the prefix's logits, which generation relies on), and
// refuses what it cannot run.
#include "fsdp/nn/llama_inference.h"

#include <vector>

#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/llama_model.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/llama_reference.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::NaiveLlamaLoss;
using testing_util::RandomBatch;

LlamaConfig Config(int kv_heads) {
  LlamaConfig c;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.ffn_hidden = 12;
  c.vocab = 11;
  c.seq_len = 6;
  c.rope_theta = 100.0f;  // angles that turn visibly within 6 positions
  return c;
}

absl::Status RunAll(LlamaInference& forward, const ModelHarness& h,
                    const std::vector<int32_t>& tokens, int batch, int seq) {
  absl::Status s = forward.Begin(tokens, batch, seq);
  for (int u = 0; s.ok() && u < forward.num_units(); ++u) s = forward.RunUnit(u, h.params[u]);
  return s;
}

TEST(LlamaInferenceTest, LogitsAreTheTrainingForwardsBitForBit) {
  for (const int variant : {1, 2, 4, -2}) {  // kv_heads; -2: 2, the head tied
    const int kv_heads = variant < 0 ? -variant : variant;
    LlamaConfig config = Config(kv_heads);
    config.tie_embeddings = variant < 0;
    MemoryTracker model_tracker, inference_tracker;
    absl::StatusOr<std::unique_ptr<LlamaModel>> model =
        LlamaModel::Create(config, 3, &model_tracker);
    ASSERT_TRUE(model.ok()) << model.status();
    ModelHarness h(model->get());
    h.Init(5);
    const Batch batch = RandomBatch(3, 6, 11, 7);
    absl::StatusOr<float> loss = h.Forward(batch);
    ASSERT_TRUE(loss.ok()) << loss.status();
    absl::StatusOr<std::unique_ptr<LlamaInference>> forward =
        LlamaInference::Create(config, 3, &inference_tracker);
    ASSERT_TRUE(forward.ok()) << forward.status();
    ASSERT_TRUE(RunAll(**forward, h, batch.inputs, 3, 6).ok());
    absl::StatusOr<absl::Span<const float>> logits = (*forward)->logits();
    ASSERT_TRUE(logits.ok());
    std::vector<float> copy(logits->begin(), logits->end());
    const float inference_loss = CrossEntropyForward(copy.data(), batch.targets.data(), 18, 11);
    EXPECT_EQ(inference_loss, *loss) << "variant " << variant;
    const double reference = NaiveLlamaLoss(config, h.params, batch);
    EXPECT_NEAR(inference_loss, reference, 2e-6 * reference) << "variant " << variant;
    EXPECT_LT(inference_tracker.Snapshot().peak_total_bytes,
              LlamaActivationBytesByUnit(config, 3).saved_bytes());
  }
}

TEST(LlamaInferenceTest, TrainingChoicesDoNotChangeTheForward) {
  // A bf16, flash, checkpointed run validates on its fp32 master weights
  // with the same fp32 forward as an fp32 run.
  LlamaConfig trained = Config(2);
  trained.compute_dtype = comm::Dtype::kBFloat16;
  trained.param_dtype = comm::Dtype::kBFloat16;
  trained.flash_attention = true;
  trained.activation_checkpoint_every = 1;
  MemoryTracker model_tracker, tracker;
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Create(Config(2), 2, &model_tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(3);
  const Batch batch = RandomBatch(2, 6, 11, 1);
  absl::StatusOr<std::unique_ptr<LlamaInference>> plain =
      LlamaInference::Create(Config(2), 2, &tracker);
  absl::StatusOr<std::unique_ptr<LlamaInference>> other =
      LlamaInference::Create(trained, 2, &tracker);
  ASSERT_TRUE(plain.ok() && other.ok());
  ASSERT_TRUE(RunAll(**plain, h, batch.inputs, 2, 6).ok());
  ASSERT_TRUE(RunAll(**other, h, batch.inputs, 2, 6).ok());
  const std::vector<float> a((*plain)->logits()->begin(), (*plain)->logits()->end());
  const std::vector<float> b((*other)->logits()->begin(), (*other)->logits()->end());
  EXPECT_EQ(a, b);
}

TEST(LlamaInferenceTest, APrefixGivesThePrefixLogits) {
  MemoryTracker tracker;
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Create(Config(2), 1, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(9);
  const Batch batch = RandomBatch(1, 6, 11, 3);
  absl::StatusOr<std::unique_ptr<LlamaInference>> forward =
      LlamaInference::Create(Config(2), 1, &tracker);
  ASSERT_TRUE(forward.ok());
  ASSERT_TRUE(RunAll(**forward, h, batch.inputs, 1, 6).ok());
  const std::vector<float> full((*forward)->logits()->begin(), (*forward)->logits()->end());
  for (int len = 1; len <= 6; ++len) {
    std::vector<int32_t> prefix(batch.inputs.begin(), batch.inputs.begin() + len);
    ASSERT_TRUE(RunAll(**forward, h, prefix, 1, len).ok());
    absl::Span<const float> part = *(*forward)->logits();
    for (int v = 0; v < 11; ++v) {
      EXPECT_NEAR(part[(len - 1) * 11 + v], full[(len - 1) * 11 + v], 1e-5) << len << " " << v;
    }
  }
}

TEST(LlamaInferenceTest, RefusesOutOfOrderAndBadShapes) {
  MemoryTracker tracker;
  absl::StatusOr<std::unique_ptr<LlamaInference>> forward =
      LlamaInference::Create(Config(2), 2, &tracker);
  ASSERT_TRUE(forward.ok());
  std::vector<float> params(LlamaUnitSpecs(Config(2))[0].numel());
  EXPECT_EQ((*forward)->RunUnit(0, params).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*forward)->Begin(std::vector<int32_t>(3 * 4), 3, 4).ok());  // batch > 2
  EXPECT_FALSE((*forward)->Begin(std::vector<int32_t>(7), 1, 7).ok());      // seq > 6
  EXPECT_FALSE((*forward)->Begin(std::vector<int32_t>(4, 11), 1, 4).ok());  // token >= vocab
  ASSERT_TRUE((*forward)->Begin(std::vector<int32_t>(4, 1), 1, 4).ok());
  EXPECT_EQ((*forward)->RunUnit(1, params).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*forward)->RunUnit(0, std::vector<float>(3)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*forward)->logits().status().code(), absl::StatusCode::kFailedPrecondition);
  LlamaConfig bad = Config(3);  // 3 does not divide 4 heads
  EXPECT_EQ(LlamaInference::Create(bad, 1, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LlamaInference::Create(Config(2), 0, &tracker).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fsdp
