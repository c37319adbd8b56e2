// File: tests/fsdp/nn/mlp_model_test.cc
#include "fsdp/nn/mlp_model.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"
#include "tests/fsdp/nn/model_harness.h"

namespace fsdp {
namespace {

using testing_util::ModelHarness;
using testing_util::NumericGrad;
using testing_util::RandomBatch;

MlpConfig TinyConfig() { return MlpConfig{2, 6, 10, 9, 4}; }

TEST(MlpModelTest, UnitsAndValidation) {
  const std::vector<UnitSpec> units = MlpUnitSpecs(TinyConfig());
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[1].name, "mlp0");
  EXPECT_EQ(units[1].numel(), 10 * 6 + 10 + 6 * 10 + 6);
  EXPECT_EQ(units[3].numel(), 9 * 6 + 9);
  MlpConfig bad = TinyConfig();
  bad.hidden = 0;
  EXPECT_EQ(ValidateMlpConfig(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MlpModelTest, GradientsThroughTheModelInterfaceMatchFiniteDifferences) {
  MemoryTracker tracker;
  auto model = MlpModel::Create(TinyConfig(), 3, &tracker);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelHarness h(model->get());
  h.Randomize(11, 0.4f);
  const Batch batch = RandomBatch(3, 4, 9, 12);
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.5f).ok());
  auto loss = [&]() -> double { return 1.5 * *h.Forward(batch); };
  for (int u = 0; u < h.model->num_units(); ++u) {
    int failures = 0;
    for (size_t i = 0; i < h.params[u].size(); ++i) {
      const double numeric = NumericGrad(loss, h.params[u].data(), i, 1e-2f);
      const double analytic = h.grads[u][i];
      if (std::fabs(numeric - analytic) >
              1e-3 + 3e-2 * std::max(std::fabs(numeric), std::fabs(analytic)) &&
          ++failures <= 5) {
        ADD_FAILURE() << h.model->units()[u].name << "[" << i << "]: analytic " << analytic
                      << " numeric " << numeric;
      }
    }
    EXPECT_EQ(failures, 0) << h.model->units()[u].name;
  }
}

// kOverwrite writes every element whatever the buffer held, with the bits
// of adding into zeros.
TEST(MlpModelTest, OverwrittenGradientsEqualGradientsAddedIntoZeros) {
  MemoryTracker tracker;
  auto model = MlpModel::Create(TinyConfig(), 3, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Randomize(12, 0.4f);
  const Batch batch = RandomBatch(3, 4, 9, 13);
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.0f).ok());
  const std::vector<std::vector<float>> added = h.grads;
  for (auto& g : h.grads) std::fill(g.begin(), g.end(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(h.Forward(batch).ok());
  ASSERT_TRUE(h.Backward(1.0f, GradWrite::kOverwrite).ok());
  for (size_t u = 0; u < added.size(); ++u) {
    EXPECT_EQ(0, std::memcmp(h.grads[u].data(), added[u].data(), added[u].size() * sizeof(float)))
        << h.model->units()[u].name;
  }
}

TEST(MlpModelTest, ActivationsAreFreedByBackward) {
  MemoryTracker tracker;
  auto model = MlpModel::Create(TinyConfig(), 3, &tracker);
  ASSERT_TRUE(model.ok());
  ModelHarness h(model->get());
  h.Init(1);
  ASSERT_TRUE(h.Forward(RandomBatch(3, 4, 9, 1)).ok());
  const int64_t BT = 12;
  // tokens + embedding out + per layer (fc, gelu, out) + probs + targets
  const int64_t expected = 4 * (BT + BT * 6 + 2 * (2 * BT * 10 + BT * 6) + BT * 9 + BT);
  EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), expected);
  ASSERT_TRUE(h.Backward(1.0f).ok());
  EXPECT_EQ(tracker.Snapshot().current(MemoryCategory::kActivations), 0);
}

}  // namespace
}  // namespace fsdp
