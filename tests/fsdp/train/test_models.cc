// File: tests/fsdp/train/test_models.cc
#include "tests/fsdp/train/test_models.h"

#include <algorithm>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fsdp_test {

BigramModel::BigramModel(int vocab, int dim) : vocab_(vocab), dim_(dim) {
  units_.push_back(fsdp::UnitSpec{"embed", {fsdp::ParamSpec{"embed.weight", {vocab, dim}}}});
  units_.push_back(fsdp::UnitSpec{"head",
                                  {fsdp::ParamSpec{"head.weight", {dim, vocab}},
                                   fsdp::ParamSpec{"head.bias", {vocab}}}});
}

void BigramModel::InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + unit + 1;
  for (float& p : params) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p = 0.5f * (static_cast<float>((state >> 40) & 0xffff) / 65535.0f - 0.5f);
  }
}

absl::Status BigramModel::ForwardUnit(int unit, fsdp::ConstDtypeSpan tagged_params,
                                      const fsdp::Batch& batch) {
  const absl::Span<const float> params = tagged_params.as<float>();
  const int n = batch.batch_size * batch.seq_len;
  if (unit == 0) {
    inputs_ = batch.inputs;
    targets_ = batch.targets;
    hidden_.assign(static_cast<size_t>(n) * dim_, 0.0f);
    for (int i = 0; i < n; ++i) {
      for (int d = 0; d < dim_; ++d) hidden_[i * dim_ + d] = params[inputs_[i] * dim_ + d];
    }
    return absl::OkStatus();
  }
  const float* w = params.data();
  const float* b = params.data() + dim_ * vocab_;
  probs_.assign(static_cast<size_t>(n) * vocab_, 0.0f);
  double loss = 0.0;
  for (int i = 0; i < n; ++i) {
    float* p = &probs_[i * vocab_];
    float max_logit = -1e30f;
    for (int v = 0; v < vocab_; ++v) {
      float z = b[v];
      for (int d = 0; d < dim_; ++d) z += hidden_[i * dim_ + d] * w[d * vocab_ + v];
      p[v] = z;
      max_logit = std::max(max_logit, z);
    }
    double sum = 0.0;
    for (int v = 0; v < vocab_; ++v) {
      p[v] = std::exp(p[v] - max_logit);
      sum += p[v];
    }
    for (int v = 0; v < vocab_; ++v) p[v] = static_cast<float>(p[v] / sum);
    loss -= std::log(p[targets_[i]]);
  }
  loss_ = static_cast<float>(loss / n);
  return absl::OkStatus();
}

absl::Status BigramModel::BackwardUnit(int unit, fsdp::ConstDtypeSpan tagged_params,
                                       fsdp::UnitGrads tagged_grads, float loss_scale,
                                       fsdp::GradWrite write) {
  const absl::Span<const float> params = tagged_params.as<float>();
  const absl::Span<float> grads = tagged_grads.values.as<float>();
  // Its loops only add.
  if (write == fsdp::GradWrite::kOverwrite) std::fill(grads.begin(), grads.end(), 0.0f);
  const int n = static_cast<int>(inputs_.size());
  if (unit == 1) {
    const float* w = params.data();
    float* dw = grads.data();
    float* db = grads.data() + dim_ * vocab_;
    dhidden_.assign(static_cast<size_t>(n) * dim_, 0.0f);
    for (int i = 0; i < n; ++i) {
      for (int v = 0; v < vocab_; ++v) {
        const float dz =
            (probs_[i * vocab_ + v] - (v == targets_[i] ? 1.0f : 0.0f)) * loss_scale / n;
        db[v] += dz;
        for (int d = 0; d < dim_; ++d) {
          dw[d * vocab_ + v] += hidden_[i * dim_ + d] * dz;
          dhidden_[i * dim_ + d] += w[d * vocab_ + v] * dz;
        }
      }
    }
    return absl::OkStatus();
  }
  for (int i = 0; i < n; ++i) {
    for (int d = 0; d < dim_; ++d) grads[inputs_[i] * dim_ + d] += dhidden_[i * dim_ + d];
  }
  return absl::OkStatus();
}

OneWeightModel::OneWeightModel(float initial_weight) : initial_weight_(initial_weight) {
  units_.push_back(fsdp::UnitSpec{"w", {fsdp::ParamSpec{"w", {1}}}});
}

void OneWeightModel::InitUnitParams(int, absl::Span<float> params, uint64_t) const {
  params[0] = initial_weight_;
}

absl::Status OneWeightModel::ForwardUnit(int, fsdp::ConstDtypeSpan tagged_params,
                                         const fsdp::Batch& batch) {
  const absl::Span<const float> params = tagged_params.as<float>();
  x_ = static_cast<float>(batch.inputs[0]) / 10.0f;
  loss_ = params[0] * x_;
  return absl::OkStatus();
}

absl::Status OneWeightModel::BackwardUnit(int, fsdp::ConstDtypeSpan, fsdp::UnitGrads tagged_grads,
                                          float loss_scale, fsdp::GradWrite write) {
  const absl::Span<float> grads = tagged_grads.values.as<float>();
  last_local_grad_ = x_ * loss_scale;
  grads[0] = (write == fsdp::GradWrite::kOverwrite ? 0.0f : grads[0]) + last_local_grad_;
  return absl::OkStatus();
}

absl::Status PlainSgd::AddUnit(int unit, int64_t numel, fsdp::MemoryTracker&) {
  if (unit != static_cast<int>(last_grads_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("units must be added in order, got ", unit));
  }
  last_grads_.emplace_back(numel, 0.0f);
  return absl::OkStatus();
}

absl::Status PlainSgd::StepUnit(int unit, absl::Span<float> params,
                                absl::Span<const float> grads, float grad_scale, float lr, int) {
  last_grads_[unit].assign(grads.begin(), grads.end());
  for (float& g : last_grads_[unit]) g *= grad_scale;  // what the step uses
  for (size_t i = 0; i < params.size(); ++i) params[i] -= lr * last_grads_[unit][i];
  return absl::OkStatus();
}

fsdp::Batch MakeBatch(int batch_size, int seq_len, int vocab, uint64_t index) {
  fsdp::Batch batch;
  batch.batch_size = batch_size;
  batch.seq_len = seq_len;
  uint64_t state = index * 0x2545F4914F6CDD1Dull + 7;
  auto next = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((state >> 33) % vocab);
  };
  for (int i = 0; i < batch_size * seq_len; ++i) {
    batch.inputs.push_back(next());
    // A learnable rule: the target mostly follows the input.
    batch.targets.push_back((batch.inputs.back() * 3 + 1) % vocab);
  }
  return batch;
}

std::vector<fsdp::Batch> SliceForRank(const fsdp::Batch& global, int rank, int world,
                                      int accum) {
  const int mb = global.batch_size / (world * accum);
  const int seq_len = global.seq_len;
  std::vector<fsdp::Batch> out;
  for (int m = 0; m < accum; ++m) {
    fsdp::Batch b;
    b.batch_size = mb;
    b.seq_len = seq_len;
    const int first = (m * world + rank) * mb * seq_len;
    b.inputs.assign(global.inputs.begin() + first, global.inputs.begin() + first + mb * seq_len);
    b.targets.assign(global.targets.begin() + first,
                     global.targets.begin() + first + mb * seq_len);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace fsdp_test
