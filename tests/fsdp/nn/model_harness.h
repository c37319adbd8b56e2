// File: tests/fsdp/nn/model_harness.h
//
// Owns a full (unsharded) copy of every unit's parameters and gradients and
// drives a Model through one step, as the training loop does on one rank. A
// model that takes bf16 parameters (Model::param_dtype) gets `params`
// rounded to bf16 on every call, as the trainer's bf16 layout hands them.
#ifndef TESTS_FSDP_NN_MODEL_HARNESS_H_
#define TESTS_FSDP_NN_MODEL_HARNESS_H_

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/bf16_convert.h"
#include "fsdp/nn/model.h"
#include "gtest/gtest.h"
#include "tests/fsdp/nn/grad_check.h"

namespace fsdp {
namespace testing_util {

struct ModelHarness {
  explicit ModelHarness(Model* m) : model(m) {
    for (const UnitSpec& u : model->units()) {
      params.emplace_back(u.numel());
      grads.emplace_back(u.numel());
    }
  }

  void Init(uint64_t seed) {
    for (int u = 0; u < model->num_units(); ++u) {
      model->InitUnitParams(u, absl::MakeSpan(params[u]), seed);
    }
  }

  // Replaces every parameter by N(0, stddev) noise: bigger than GPT-2's init
  // so that finite differences see a clearly nonlinear function.
  void Randomize(uint32_t seed, float stddev) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, stddev);
    for (auto& p : params)
      for (float& x : p) x = normal(rng);
  }

  absl::StatusOr<float> Forward(const Batch& batch) {
    for (int u = 0; u < model->num_units(); ++u) {
      absl::Status s = model->ForwardUnit(u, Params(u), batch);
      if (!s.ok()) return s;
    }
    return model->loss();
  }

  // Adds into grads (kAdd), or writes them whatever they held (kOverwrite).
  absl::Status Backward(float loss_scale, GradWrite write = GradWrite::kAdd) {
    for (int u = model->num_units() - 1; u >= 0; --u) {
      absl::Status s =
          model->BackwardUnit(u, Params(u), {absl::MakeSpan(grads[u])}, loss_scale, write);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // params[u] as the model takes them: in bf16 rounded.
  ConstDtypeSpan Params(int u) {
    if (model->param_dtype() == comm::Dtype::kBFloat16) return Bf16Params(u);
    return absl::MakeConstSpan(params[u]);
  }

  // params[u] rounded to bf16.
  absl::Span<const uint16_t> Bf16Params(int u) {
    params16.resize(params.size());
    params16[u].resize(params[u].size());
    base::ToBf16(params16[u].data(), params[u].data(), static_cast<int64_t>(params[u].size()));
    return params16[u];
  }

  void ZeroGrads() {
    for (auto& g : grads) std::fill(g.begin(), g.end(), 0.0f);
  }

  Model* model;
  std::vector<std::vector<float>> params;
  std::vector<std::vector<float>> grads;
  std::vector<std::vector<uint16_t>> params16;
};

// After h.Forward(batch) and h.Backward(1) into zeroed gradients: each
// unit's gradients against central differences (step 1e-2) of the loss on
// `batch`, at about `samples` elements per unit; within 1e-3 + 5e-2
// relative. `what` names the case in failures.
inline void ExpectGradientsMatchFiniteDifferences(ModelHarness& h, const Batch& batch,
                                                  int64_t samples, const std::string& what) {
  auto loss = [&]() -> double { return *h.Forward(batch); };
  for (int u = 0; u < h.model->num_units(); ++u) {
    const int64_t n = h.params[u].size();
    int failures = 0;
    for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / samples)) {
      const double numeric = NumericGrad(loss, h.params[u].data(), i, 1e-2f);
      const double analytic = h.grads[u][i];
      if (std::fabs(numeric - analytic) >
              1e-3 + 5e-2 * std::max(std::fabs(numeric), std::fabs(analytic)) &&
          ++failures <= 5) {
        ADD_FAILURE() << what << " " << h.model->units()[u].name << "[" << i << "]: analytic "
                      << analytic << " numeric " << numeric;
      }
    }
    EXPECT_EQ(failures, 0) << what << " " << h.model->units()[u].name;
  }
}

inline Batch RandomBatch(int batch_size, int seq_len, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  Batch b;
  b.batch_size = batch_size;
  b.seq_len = seq_len;
  for (int i = 0; i < batch_size * seq_len; ++i) {
    b.inputs.push_back(token(rng));
    b.targets.push_back(token(rng));
  }
  return b;
}

}  // namespace testing_util
}  // namespace fsdp

#endif  // TESTS_FSDP_NN_MODEL_HARNESS_H_
