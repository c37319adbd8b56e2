// File: fsdp/nn/llama_inference.cc
//
// One block, as LlamaModel::BlockForwardCompute in fp32 with standard
// attention, writing the block's output back into x:
//   norm = RMSNorm(x); proj = norm [Wq; Wk; Wv]^T; qkv = RotaryQkv(proj)
//   att = Attention(qkv); res2 = x + att Wo^T
//   norm = RMSNorm(res2); gate_up = norm [Wgate; Wup]^T; hidden = SwiGLU(gate_up)
//   x = res2 + hidden Wdown^T
#include "fsdp/nn/llama_inference.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/dtype_layers.h"
#include "fsdp/nn/grouped_query.h"
#include "fsdp/nn/inference_steps.h"
#include "fsdp/nn/residual.h"
#include "fsdp/nn/rms_norm.h"
#include "fsdp/nn/rotary.h"
#include "fsdp/nn/swiglu.h"
#include "fsdp/nn/token_embedding.h"

namespace fsdp {
namespace {

// Parameter indices inside a unit (LlamaUnitSpecs order).
enum BlockParam { kInputNorm, kQ, kK, kV, kO, kPostNorm, kGate, kUp, kDown };
enum HeadParam { kFinalNorm, kLmHead };

}  // namespace

LlamaInference::LlamaInference(const LlamaConfig& config, int max_batch, MemoryTracker* tracker)
    : config_(config), max_batch_(max_batch), tracker_(tracker), units_(LlamaUnitSpecs(config)) {}

absl::StatusOr<std::unique_ptr<LlamaInference>> LlamaInference::Create(const LlamaConfig& config,
                                                                       int max_batch,
                                                                       MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateLlamaConfig(config));
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch ", max_batch, " must be >= 1"));
  }
  std::unique_ptr<LlamaInference> forward(new LlamaInference(config, max_batch, tracker));
  const int hs = config.d_model / config.heads;
  FSDP_ASSIGN_OR_RETURN(
      forward->rope_table_,
      tracker->Allocate<float>(MemoryCategory::kWorkspace, RotaryTableFloats(config.seq_len, hs),
                               "inference rope table"));
  FillRotaryTable(forward->rope_table_.data(), config.seq_len, hs, config.rope_theta);
  if (config.tie_embeddings) {
    FSDP_ASSIGN_OR_RETURN(
        forward->tied_weight_,
        tracker->Allocate<float>(MemoryCategory::kWorkspace, int64_t{config.vocab} * config.d_model,
                                 "inference tied embedding"));
  }
  return forward;
}

absl::Status LlamaInference::Begin(absl::Span<const int32_t> tokens, int batch, int seq) {
  FSDP_RETURN_IF_ERROR(
      CheckInferenceInput(tokens, batch, seq, {max_batch_, config_.seq_len, config_.vocab}));
  next_unit_ = -1;
  batch_ = batch;
  seq_ = seq;
  const int64_t n = int64_t{batch} * seq;
  const int64_t nc = n * config_.d_model;
  const int64_t nf = n * config_.ffn_hidden;
  const int hs = config_.d_model / config_.heads;
  const int64_t proj_width = int64_t{config_.heads + 2 * config_.kv_heads} * hs;
  MemoryTracker& t = *tracker_;
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, tokens_, n, "tokens"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, x_, nc, "x"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, res2_, nc, "res2"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, norm_, nc, "norm"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, rstd_, n, "rstd"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, proj_, n * proj_width, "qkv proj"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, qkv_, 3 * nc, "qkv"));
  FSDP_RETURN_IF_ERROR(
      SizeInferenceBuffer(t, probs_, int64_t{batch} * config_.heads * seq * seq, "att_probs"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, att_, nc, "att"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, gate_up_, 2 * nf, "gate_up"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, hidden_, nf, "swiglu"));
  FSDP_RETURN_IF_ERROR(SizeInferenceBuffer(t, logits_, n * config_.vocab, "logits"));
  std::memcpy(tokens_.data(), tokens.data(), sizeof(int32_t) * n);
  next_unit_ = 0;
  return absl::OkStatus();
}

absl::Status LlamaInference::RunUnit(int unit, absl::Span<const float> params) {
  FSDP_RETURN_IF_ERROR(CheckInferenceUnit(unit, next_unit_, units_[unit], params));
  const std::vector<const float*> p = UnitParamPointers(units_[unit], params);
  const std::vector<ParamSpec>& specs = units_[unit].params;
  // Parameters [k, k + count) as one fp32 operand (they lie next to each other).
  const auto W = [&](int k, int count = 1) {
    int64_t numel = 0;
    for (int i = k; i < k + count; ++i) numel += specs[i].numel();
    return Fp32(p[k], numel);
  };
  const int n = batch_ * seq_;
  const int C = config_.d_model, F = config_.ffn_hidden, V = config_.vocab;
  const int64_t nc = int64_t{n} * C;
  const GroupedQueryShape shape{batch_, seq_, config_.heads, config_.kv_heads, C / config_.heads};
  const int last = num_units() - 1;
  // out = in w^T over the n rows: one product, or (per_sequence_products,
  // docs/exact.md) one per sequence, as the training model computes them.
  const int calls = config_.per_sequence_products ? batch_ : 1;
  const auto Product = [&](DtypeSpan out, ConstDtypeSpan in, ConstDtypeSpan w, int in_features,
                           int out_features) {
    LinearForwardInCalls(out, in, w, nullptr, n, calls, in_features, out_features);
  };
  if (unit == 0) {
    TokenEmbeddingForward(x_.data(), tokens_.data(), W(0), n, C);
    if (config_.tie_embeddings) std::memcpy(tied_weight_.data(), p[0], 4 * tied_weight_.size());
  } else if (unit == last) {
    RmsNormForward(norm_.span(), rstd_.data(), x_.data(), p[kFinalNorm], n, C, config_.norm_eps);
    const ConstDtypeSpan head =
        config_.tie_embeddings
            ? Fp32(static_cast<const float*>(tied_weight_.data()), tied_weight_.size())
            : W(kLmHead);
    Product(Fp32(logits_.data(), int64_t{n} * V), Fp32(norm_.data(), nc), head, C, V);
  } else {
    RmsNormForward(norm_.span(), rstd_.data(), x_.data(), p[kInputNorm], n, C, config_.norm_eps);
    Product(proj_.span(), Fp32(norm_.data(), nc), W(kQ, 3), C,
            static_cast<int>(shape.proj_width()));
    RotaryQkvForward(qkv_.span(), proj_.data(), rope_table_.data(), config_.seq_len, shape);
    AttentionForward(att_.span(), probs_.span(), /*scratch=*/nullptr, /*scratch_bf16=*/nullptr,
                     Fp32(qkv_.data(), 3 * nc), batch_, seq_, C, config_.heads);
    Product(res2_.span(), Fp32(att_.data(), nc), W(kO), C, C);
    ResidualForward(res2_.data(), res2_.data(), x_.data(), nc);
    RmsNormForward(norm_.span(), rstd_.data(), res2_.data(), p[kPostNorm], n, C, config_.norm_eps);
    Product(gate_up_.span(), Fp32(norm_.data(), nc), W(kGate, 2), C, 2 * F);
    SwigluForward(hidden_.span(), gate_up_.data(), n, F);
    Product(x_.span(), Fp32(hidden_.data(), int64_t{n} * F), W(kDown), F, C);
    ResidualForward(x_.data(), x_.data(), res2_.data(), nc);
  }
  next_unit_ = unit + 1;
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const float>> LlamaInference::logits() const {
  return FinishedLogits(next_unit_, num_units(), logits_, int64_t{batch_} * seq_ * config_.vocab);
}

}  // namespace fsdp
