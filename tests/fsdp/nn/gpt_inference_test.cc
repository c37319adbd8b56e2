// File: tests/fsdp/nn/gpt_inference_test.cc
//
// The forward-only GPT computes GptModel's logits bit for bit (checked
// through the cross-entropy of the training forward), in less memory, and
// causally: a position's logits do not depend on later tokens, which is what
// generation over a growing prefix relies on.
#include "fsdp/nn/gpt_inference.h"

#include <cmath>
#include <vector>

#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/gpt_model.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::RandomBatch;

GptConfig Config() {
  GptConfig c;
  c.layers = 2;
  c.d_model = 16;
  c.heads = 4;
  c.vocab = 37;
  c.seq_len = 12;
  return c;
}

absl::Status RunAll(GptInference& forward, const ModelHarness& h, const std::vector<int32_t>& tokens,
                    int batch, int seq) {
  absl::Status s = forward.Begin(tokens, batch, seq);
  for (int u = 0; s.ok() && u < forward.num_units(); ++u) s = forward.RunUnit(u, h.params[u]);
  return s;
}

TEST(GptInferenceTest, LogitsAreTheTrainingForwardsBitForBit) {
  MemoryTracker model_tracker, inference_tracker;
  absl::StatusOr<std::unique_ptr<GptModel>> model = GptModel::Create(Config(), 3, &model_tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(5);
  const Batch batch = RandomBatch(3, 12, 37, 7);
  absl::StatusOr<float> loss = h.Forward(batch);
  ASSERT_TRUE(loss.ok());
  absl::StatusOr<std::unique_ptr<GptInference>> forward =
      GptInference::Create(Config(), 3, &inference_tracker);
  ASSERT_TRUE(forward.ok());
  ASSERT_TRUE(RunAll(**forward, h, batch.inputs, 3, 12).ok());
  absl::StatusOr<absl::Span<const float>> logits = (*forward)->logits();
  ASSERT_TRUE(logits.ok());
  std::vector<float> copy(logits->begin(), logits->end());
  EXPECT_EQ(CrossEntropyForward(copy.data(), batch.targets.data(), 36, 37), *loss);
  // Less memory than the training forward's saved activations.
  EXPECT_LT(inference_tracker.Snapshot().peak_total_bytes,
            GptActivationBytesByUnit(Config(), 3).saved_bytes());
}

TEST(GptInferenceTest, APrefixGivesThePrefixLogits) {
  MemoryTracker tracker;
  absl::StatusOr<std::unique_ptr<GptModel>> model = GptModel::Create(Config(), 1, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(9);
  const Batch batch = RandomBatch(1, 12, 37, 3);
  absl::StatusOr<std::unique_ptr<GptInference>> forward = GptInference::Create(Config(), 1, &tracker);
  ASSERT_TRUE(forward.ok());
  ASSERT_TRUE(RunAll(**forward, h, batch.inputs, 1, 12).ok());
  const std::vector<float> full((*forward)->logits()->begin(), (*forward)->logits()->end());
  for (int len = 1; len <= 12; ++len) {
    std::vector<int32_t> prefix(batch.inputs.begin(), batch.inputs.begin() + len);
    ASSERT_TRUE(RunAll(**forward, h, prefix, 1, len).ok());
    absl::Span<const float> part = *(*forward)->logits();
    for (int v = 0; v < 37; ++v) {
      EXPECT_NEAR(part[(len - 1) * 37 + v], full[(len - 1) * 37 + v], 1e-5) << len << " " << v;
    }
  }
}

TEST(GptInferenceTest, RefusesOutOfOrderAndBadShapes) {
  MemoryTracker tracker;
  absl::StatusOr<std::unique_ptr<GptInference>> forward = GptInference::Create(Config(), 2, &tracker);
  ASSERT_TRUE(forward.ok());
  std::vector<float> params(GptUnitSpecs(Config())[0].numel());
  EXPECT_EQ((*forward)->RunUnit(0, params).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*forward)->Begin(std::vector<int32_t>(3 * 4), 3, 4).ok());   // batch > 2
  EXPECT_FALSE((*forward)->Begin(std::vector<int32_t>(13), 1, 13).ok());     // seq > 12
  EXPECT_FALSE((*forward)->Begin(std::vector<int32_t>(4, 37), 1, 4).ok());   // token >= vocab
  ASSERT_TRUE((*forward)->Begin(std::vector<int32_t>(4, 1), 1, 4).ok());
  EXPECT_EQ((*forward)->RunUnit(1, params).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*forward)->logits().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fsdp
