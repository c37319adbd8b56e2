// File: tests/fsdp/optim/gpt_learns_test.cc
//
// End to end on one process: GPT + AdamW + cosine schedule + clipping on the
// Markov source. The loss must fall from ln(vocab) towards the chain's
// entropy, which only happens if forward, backward and the optimizer agree.
#include <cmath>
#include <cstdio>
#include <vector>

#include "fsdp/data/batcher.h"
#include "fsdp/data/markov_source.h"
#include "fsdp/nn/gpt_model.h"
#include "fsdp/optim/adamw.h"
#include "fsdp/optim/grad_clip.h"
#include "fsdp/optim/lr_schedule.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

TEST(GptLearnsTest, LossApproachesTheMarkovChainEntropy) {
  const GptConfig config{2, 32, 4, 32, 16};
  const int micro_batch = 8, steps = 150;
  MemoryTracker tracker;
  auto model = GptModel::Create(config, micro_batch, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  testing_util::ModelHarness h(model->get());
  h.Init(1234);
  auto source = MarkovTokenSource::Create(config.vocab, 99);
  ASSERT_TRUE(source.ok());
  std::vector<AdamW> optimizers;
  for (int u = 0; u < h.model->num_units(); ++u) {
    auto adam = AdamW::Create(AdamWOptions{0.9f, 0.95f, 1e-8f, 0.0f}, h.params[u].size(),
                              &tracker);
    ASSERT_TRUE(adam.ok());
    optimizers.push_back(std::move(*adam));
  }
  LrScheduleOptions lr_options;
  lr_options.base_lr = 1e-2f;
  lr_options.min_lr = 1e-3f;
  lr_options.warmup_steps = 10;
  lr_options.total_steps = steps;
  auto schedule = LrSchedule::Create(lr_options);
  ASSERT_TRUE(schedule.ok());
  const BatchLayout layout{micro_batch, config.seq_len, 1, 0, micro_batch, 1};

  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    auto batch = MakeMicroBatch(**source, layout, step, 0);
    ASSERT_TRUE(batch.ok());
    h.ZeroGrads();
    auto loss = h.Forward(*batch);
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(h.Backward(1.0f).ok());
    double sq = 0;
    for (const auto& g : h.grads) sq += SumOfSquares(g);
    const float scale = ClipScale(sq, 1.0f);
    for (int u = 0; u < h.model->num_units(); ++u) {
      ScaleInPlace(absl::MakeSpan(h.grads[u]), scale);
      ASSERT_TRUE(optimizers[u].Step(schedule->At(step), absl::MakeSpan(h.params[u]),
                                     h.grads[u]).ok());
    }
    losses.push_back(*loss);
  }
  const double floor = (*source)->EntropyNats();
  double last = 0;
  for (int i = steps - 10; i < steps; ++i) last += losses[i] / 10;
  std::printf("loss: first %.3f, last-10 mean %.3f, ln(vocab) %.3f, entropy floor %.3f\n",
              losses[0], last, std::log(double(config.vocab)), floor);
  EXPECT_NEAR(losses[0], std::log(double(config.vocab)), 0.2);
  EXPECT_LT(last, floor + 0.35);
  EXPECT_GT(last, floor - 0.2);  // cannot beat the chain's entropy by much
}

}  // namespace
}  // namespace fsdp
