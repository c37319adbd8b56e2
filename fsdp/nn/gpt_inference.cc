// File: fsdp/nn/gpt_inference.cc
#include "fsdp/nn/gpt_inference.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/attention.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/inference_steps.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"
#include "fsdp/nn/residual.h"

namespace fsdp {
namespace {

enum BlockParam {
  kLn1Weight, kLn1Bias, kQkvWeight, kQkvBias, kAttnProjWeight, kAttnProjBias,
  kLn2Weight, kLn2Bias, kFcWeight, kFcBias, kMlpProjWeight, kMlpProjBias
};
enum HeadParam { kLnfWeight, kLnfBias, kLmHeadWeight };

}  // namespace

GptInference::GptInference(const GptConfig& config, int max_batch, MemoryTracker* tracker)
    : config_(config), max_batch_(max_batch), tracker_(tracker), units_(GptUnitSpecs(config)) {}

absl::StatusOr<std::unique_ptr<GptInference>> GptInference::Create(const GptConfig& config,
                                                                  int max_batch,
                                                                  MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateGptConfig(config));
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch ", max_batch, " must be >= 1"));
  }
  return std::unique_ptr<GptInference>(new GptInference(config, max_batch, tracker));
}

absl::Status GptInference::Begin(absl::Span<const int32_t> tokens, int batch, int seq) {
  FSDP_RETURN_IF_ERROR(
      CheckInferenceInput(tokens, batch, seq, {max_batch_, config_.seq_len, config_.vocab}));
  next_unit_ = -1;
  batch_ = batch;
  seq_ = seq;
  const int64_t n = int64_t{batch} * seq;
  const int64_t nc = n * config_.d_model;
  MemoryTracker& t = *tracker_;
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, tokens_, n, "tokens"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, x_, nc, "x"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, res2_, nc, "res2"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, norm_, nc, "norm"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, mean_, n, "mean"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, rstd_, n, "rstd"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, qkv_, 3 * nc, "qkv"));
  FSDP_RETURN_IF_ERROR(
      SizeInferenceBuffer(t, probs_, int64_t{batch} * config_.heads * seq * seq, "att_probs"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, att_, nc, "att"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, wide_, 4 * nc, "fc"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, gelu_, 4 * nc, "gelu"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, logits_, n * config_.vocab, "logits"));
  std::memcpy(tokens_.data(), tokens.data(), sizeof(int32_t) * n);
  next_unit_ = 0;
  return absl::OkStatus();
}

absl::Status GptInference::RunUnit(int unit, absl::Span<const float> params) {
  FSDP_RETURN_IF_ERROR(CheckInferenceUnit(unit, next_unit_, units_[unit], params));
  const std::vector<const float*> p = UnitParamPointers(units_[unit], params);
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int64_t nc = int64_t{n} * C;
  const int last = num_units() - 1;
  // out = in w^T + b over the n rows: one product, or (per_sequence_products,
  // docs/exact.md) one per sequence, as the training model computes them.
  const auto Linear = [&](float* out, const float* in, const float* w, const float* b,
                                 int rows, int in_features, int out_features) {
    const int calls = config_.per_sequence_products ? batch_ : 1;
    const int per_call = rows / calls;
    for (int c = 0; c < calls; ++c) {
      const int64_t row0 = int64_t{c} * per_call;
      fsdp::LinearForward(out + row0 * out_features, in + row0 * in_features, w, b, per_call,
                          in_features, out_features);
    }
  };
  if (unit == 0) {
    EmbeddingForward(x_.data(), tokens_.data(), p[0], p[1], batch_, seq_, C);
  } else if (unit == last) {
    LayerNormForward(norm_.data(), mean_.data(), rstd_.data(), x_.data(), p[kLnfWeight],
                     p[kLnfBias], n, C);
    Linear(logits_.data(), norm_.data(), p[kLmHeadWeight], nullptr, n, C, config_.vocab);
  } else {
    // As GptModel::BlockForward, writing the block's output back into x.
    LayerNormForward(norm_.data(), mean_.data(), rstd_.data(), x_.data(), p[kLn1Weight],
                     p[kLn1Bias], n, C);
    Linear(qkv_.data(), norm_.data(), p[kQkvWeight], p[kQkvBias], n, C, 3 * C);
    AttentionForward(att_.data(), probs_.data(), qkv_.data(), batch_, seq_, C, config_.heads);
    Linear(res2_.data(), att_.data(), p[kAttnProjWeight], p[kAttnProjBias], n, C, C);
    ResidualForward(res2_.data(), res2_.data(), x_.data(), nc);
    LayerNormForward(norm_.data(), mean_.data(), rstd_.data(), res2_.data(), p[kLn2Weight],
                     p[kLn2Bias], n, C);
    Linear(wide_.data(), norm_.data(), p[kFcWeight], p[kFcBias], n, C, 4 * C);
    GeluForward(gelu_.data(), wide_.data(), 4 * nc);
    Linear(x_.data(), gelu_.data(), p[kMlpProjWeight], p[kMlpProjBias], n, 4 * C, C);
    ResidualForward(x_.data(), x_.data(), res2_.data(), nc);
  }
  next_unit_ = unit + 1;
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const float>> GptInference::logits() const {
  return FinishedLogits(next_unit_, num_units(), logits_, int64_t{batch_} * seq_ * config_.vocab);
}

}  // namespace fsdp
