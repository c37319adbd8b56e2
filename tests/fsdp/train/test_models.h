// File: tests/fsdp/train/test_models.h
//
// testonly: small fsdp::Model implementations with gradients that are easy to
// reason about, independent of fsdp/nn/, and a plain SGD UnitOptimizer.
//
//   BigramModel  two units: embedding E (V x D), then logits = h W + b with a
//                mean cross-entropy loss. Unit sizes are odd on purpose, so
//                padding to the world size is exercised.
//   OneWeightModel  one unit holding one weight w; loss = w * x with
//                x = inputs[0] / 10, so d(loss)/dw = x: a batch whose first
//                token is 8 gives gradient 0.8 (the worked example).
#ifndef TESTS_FSDP_TRAIN_TEST_MODELS_H_
#define TESTS_FSDP_TRAIN_TEST_MODELS_H_

#include <cstdint>
#include <vector>

#include "fsdp/nn/model.h"
#include "fsdp/train/unit_optimizer.h"

namespace fsdp_test {

class BigramModel : public fsdp::Model {
 public:
  BigramModel(int vocab, int dim);
  const std::vector<fsdp::UnitSpec>& units() const override { return units_; }
  void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const override;
  absl::Status ForwardUnit(int unit, fsdp::ConstDtypeSpan params,
                           const fsdp::Batch& batch) override;
  float loss() const override { return loss_; }
  absl::Status BackwardUnit(int unit, fsdp::ConstDtypeSpan params, fsdp::UnitGrads grads,
                            float loss_scale, fsdp::GradWrite write) override;

 private:
  int vocab_, dim_;
  std::vector<fsdp::UnitSpec> units_;
  std::vector<int32_t> inputs_, targets_;
  std::vector<float> hidden_;  // (N, D)
  std::vector<float> probs_;   // (N, V)
  std::vector<float> dhidden_; // (N, D)
  float loss_ = 0.0f;
};

class OneWeightModel : public fsdp::Model {
 public:
  explicit OneWeightModel(float initial_weight);
  const std::vector<fsdp::UnitSpec>& units() const override { return units_; }
  void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const override;
  absl::Status ForwardUnit(int unit, fsdp::ConstDtypeSpan params,
                           const fsdp::Batch& batch) override;
  float loss() const override { return loss_; }
  absl::Status BackwardUnit(int unit, fsdp::ConstDtypeSpan params, fsdp::UnitGrads grads,
                            float loss_scale, fsdp::GradWrite write) override;
  // The gradient the last BackwardUnit added (before averaging).
  float last_local_grad() const { return last_local_grad_; }

 private:
  float initial_weight_;
  std::vector<fsdp::UnitSpec> units_;
  float x_ = 0.0f;
  float loss_ = 0.0f;
  float last_local_grad_ = 0.0f;
};

// params -= lr * grad_scale * grads, element by element. Records every
// gradient it used (times the clip scale), so tests can see what reached the
// optimizer.
class PlainSgd : public fsdp::UnitOptimizer {
 public:
  absl::Status AddUnit(int unit, int64_t numel, fsdp::MemoryTracker& tracker) override;
  absl::Status StepUnit(int unit, absl::Span<float> params, absl::Span<const float> grads,
                        float grad_scale, float lr, int step) override;
  // Stateless: nothing to checkpoint.
  std::string kind() const override { return "plain_sgd"; }
  std::vector<std::string> StateNames() const override { return {}; }
  absl::StatusOr<std::vector<absl::Span<float>>> MutableUnitState(int) override {
    return std::vector<absl::Span<float>>{};
  }
  absl::Status SetUnitStep(int, int64_t) override { return absl::OkStatus(); }
  float weight_decay() const override { return 0.0f; }
  const std::vector<std::vector<float>>& last_grads() const { return last_grads_; }

 private:
  std::vector<std::vector<float>> last_grads_;
};

// A deterministic batch of `batch_size` sequences of `seq_len` tokens below
// `vocab`, different for every `index`.
fsdp::Batch MakeBatch(int batch_size, int seq_len, int vocab, uint64_t index);

// Rank `rank` of `world`'s micro-batches of `global` with `accum` steps:
// micro-batch m is sequences [(m * world + rank) * mb, +mb), mb =
// global.batch_size / (world * accum), so the concatenation over (m, rank)
// is the global batch.
std::vector<fsdp::Batch> SliceForRank(const fsdp::Batch& global, int rank, int world, int accum);

}  // namespace fsdp_test

#endif  // TESTS_FSDP_TRAIN_TEST_MODELS_H_
