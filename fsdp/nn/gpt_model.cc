// File: fsdp/nn/gpt_model.cc
//
// One block, forward (x = residual stream in, all (B*T) rows at once):
//   ln1 = LN(x); qkv = ln1 Wqkv^T + b; att = Attention(qkv)
//   res2 = x + att Wproj^T + b
//   ln2 = LN(res2); fc = ln2 Wfc^T + b; g = GELU(fc)
//   out = res2 + g Wmproj^T + b
// Backward keeps ONE gradient of the residual stream, d_residual_, and adds
// into it in place: it enters a block as d(out), becomes d(res2) once LN2's
// backward has added its share, and leaves as d(x) after LN1's.
#include "fsdp/nn/gpt_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/attention.h"
#include "fsdp/nn/batch_checks.h"
#include "fsdp/nn/bf16_convert.h"
#include "fsdp/nn/bf16_outputs.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/flash_attention.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/init_rng.h"
#include "fsdp/nn/layer_norm.h"
#include "fsdp/nn/linear.h"
#include "fsdp/nn/residual.h"
#include "fsdp/nn/tensor.h"

namespace fsdp {
namespace {

// Parameter indices inside a block unit (GptUnitSpecs order).
enum BlockParam {
  kLn1Weight, kLn1Bias, kQkvWeight, kQkvBias, kAttnProjWeight, kAttnProjBias,
  kLn2Weight, kLn2Bias, kFcWeight, kFcBias, kMlpProjWeight, kMlpProjBias,
};
enum HeadParam { kLnfWeight, kLnfBias, kLmHeadWeight };

void Zero(FloatBuffer& buffer, int64_t numel) {
  std::memset(buffer.data(), 0, sizeof(float) * numel);
}

// Where a product writes the gradient of the parameter at `offset` in bf16:
// there in `grads16`, or nowhere (null) when the gradients go to fp32.
uint16_t* Bf16GradAt(absl::Span<uint16_t> grads16, int64_t offset) {
  return grads16.empty() ? nullptr : grads16.data() + offset;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GptModel>> GptModel::Create(const GptConfig& config,
                                                           int micro_batch,
                                                           MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateGptConfig(config));
  if (micro_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batch must be at least 1, got ", micro_batch));
  }
  if (tracker == nullptr) return absl::InvalidArgumentError("GptModel needs a MemoryTracker");
  std::unique_ptr<GptModel> model(new GptModel(config, micro_batch, tracker));
  FSDP_RETURN_IF_ERROR(model->AllocateWorkspace());
  return model;
}

GptModel::GptModel(const GptConfig& config, int micro_batch, MemoryTracker* tracker)
    : config_(config),
      micro_batch_(micro_batch),
      tracker_(tracker),
      units_(GptUnitSpecs(config)),
      order_(static_cast<int>(units_.size())),
      blocks_(config.layers) {}

absl::Status GptModel::AllocateWorkspace() {
  const int64_t btc = int64_t{micro_batch_} * config_.seq_len * config_.d_model;
  const int64_t tt = AttentionBackwardScratchFloats(config_.seq_len);
  const int head_size = config_.d_model / config_.heads;
  const int64_t attention_scratch =
      config_.flash_attention
          ? (config_.bf16_compute ? FlashAttentionBf16ScratchFloats(config_.seq_len, head_size)
                                  : FlashAttentionScratchFloats(config_.seq_len, head_size))
      : config_.bf16_compute ? AttentionBf16ScratchFloats(config_.seq_len, head_size)
                             : tt;
  const MemoryCategory ws = MemoryCategory::kWorkspace;
  FSDP_ASSIGN_OR_RETURN(d_residual_, tracker_->Allocate<float>(ws, btc, "gpt d_residual"));
  FSDP_ASSIGN_OR_RETURN(d_narrow_, tracker_->Allocate<float>(ws, btc, "gpt d_narrow"));
  FSDP_ASSIGN_OR_RETURN(d_wide1_, tracker_->Allocate<float>(ws, 4 * btc, "gpt d_wide1"));
  if (!config_.bf16_compute) {  // bf16's GELU backward never writes its fp32 gradient
    FSDP_ASSIGN_OR_RETURN(d_wide2_, tracker_->Allocate<float>(ws, 4 * btc, "gpt d_wide2"));
  }
  FSDP_ASSIGN_OR_RETURN(attention_scratch_, tracker_->Allocate<float>(ws, attention_scratch,
                                                                     "gpt attention scratch"));
  if (config_.bf16_compute) {
    int64_t max_unit = 0, max_small = 0;
    for (const UnitSpec& u : units_) {
      max_unit = std::max(max_unit, u.numel());
      max_small = std::max(max_small, SmallParamNumel(u));
    }
    if (config_.bf16_params) {
      FSDP_ASSIGN_OR_RETURN(small_params_, tracker_->Allocate<float>(ws, max_small,
                                                                     "gpt 1-D params fp32"));
    } else {
      FSDP_ASSIGN_OR_RETURN(params_bf16_,
                            tracker_->Allocate<uint16_t>(ws, max_unit, "gpt params bf16"));
    }
    FSDP_ASSIGN_OR_RETURN(dout_bf16_,
                          tracker_->Allocate<uint16_t>(ws, 4 * btc, "gpt dout bf16"));
    const int64_t probs_bf16 = config_.flash_attention
                                   ? FlashAttentionBf16ScratchElements(config_.seq_len, head_size)
                                   : AttentionBf16ScratchElements(config_.seq_len, head_size);
    FSDP_ASSIGN_OR_RETURN(probs_bf16_,
                          tracker_->Allocate<uint16_t>(ws, probs_bf16, "gpt probs bf16"));
  }
  return absl::OkStatus();
}

absl::StatusOr<FloatBuffer> GptModel::Activation(int64_t numel, const char* what, int unit) {
  // Uninitialized: every activation is written in full by the forward that
  // saves it, so clearing a reused block would be a wasted pass over memory.
  return tracker_->AllocateUninitialized<float>(MemoryCategory::kActivations, numel,
                                                absl::StrCat(units_[unit].name, " ", what));
}

absl::StatusOr<TrackedBuffer<uint16_t>> GptModel::Bf16Activation(int64_t numel, const char* what,
                                                                  int unit) {
  return tracker_->AllocateUninitialized<uint16_t>(MemoryCategory::kActivations, numel,
                                                   absl::StrCat(units_[unit].name, " ", what));
}

absl::StatusOr<GptModel::Bf16UnitParams> GptModel::PrepareBf16(int unit, const ParamsIn& in) {
  const UnitSpec& spec = units_[unit];
  if (in.size() != spec.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name, ": got ", in.size(),
                                                   " parameters, the unit has ", spec.numel()));
  }
  Bf16UnitParams m;
  m.offset.resize(spec.params.size());
  m.fp32.assign(spec.params.size(), nullptr);
  int64_t offset = 0;
  for (size_t k = 0; k < spec.params.size(); ++k) {
    m.offset[k] = offset;
    offset += spec.params[k].numel();
  }
  if (!in.is_bf16) {
    ToBf16(params_bf16_.data(), in.fp32.data(), spec.numel());
    m.bf16 = params_bf16_.data();
    for (size_t k = 0; k < spec.params.size(); ++k) m.fp32[k] = in.fp32.data() + m.offset[k];
    return m;
  }
  m.bf16 = in.bf16.data();
  float* small = small_params_.data();
  for (size_t k = 0; k < spec.params.size(); ++k) {
    if (spec.params[k].shape.size() != 1) continue;
    const int64_t n = spec.params[k].numel();
    FromBf16(small, m.bf16 + m.offset[k], n);
    m.fp32[k] = small;
    small += n;
  }
  return m;
}

const float* GptModel::UnitInput(int unit) const {
  return unit == 1 ? embedding_out_.data() : blocks_[unit - 2].out.data();
}

void GptModel::InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const {
  FSDP_CHECK(unit >= 0 && unit < num_units());
  FSDP_CHECK(static_cast<int64_t>(params.size()) == units_[unit].numel());
  const float residual_std = 0.02f / std::sqrt(2.0f * config_.layers);
  int64_t offset = 0;
  const std::vector<ParamSpec>& specs = units_[unit].params;
  for (int p = 0; p < static_cast<int>(specs.size()); ++p) {
    absl::Span<float> out = params.subspan(offset, specs[p].numel());
    offset += specs[p].numel();
    const std::string& name = specs[p].name;
    const bool is_norm = name.find(".ln") != std::string::npos;
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_bias) {
      std::fill(out.begin(), out.end(), 0.0f);
    } else if (is_norm) {
      std::fill(out.begin(), out.end(), 1.0f);
    } else {
      const bool is_residual_projection = name.find("proj.weight") != std::string::npos;
      FillNormal(out, is_residual_projection ? residual_std : 0.02f,
                 InitStreamKey(seed, unit, p));
    }
  }
}

absl::Status GptModel::ForwardUnit(int unit, absl::Span<const float> params,
                                   const Batch& batch) {
  if (config_.bf16_params) {
    return absl::FailedPreconditionError(
        "this GptModel takes bf16 parameters (config.bf16_params): call ForwardUnitBf16");
  }
  return Forward(unit, {params, {}, false}, batch);
}

absl::Status GptModel::ForwardUnitBf16(int unit, absl::Span<const uint16_t> params,
                                       const Batch& batch) {
  if (!config_.bf16_params) {
    return absl::FailedPreconditionError(
        "this GptModel takes fp32 parameters (config.bf16_params is off): call ForwardUnit");
  }
  return Forward(unit, {{}, params, true}, batch);
}

absl::Status GptModel::BackwardUnit(int unit, absl::Span<const float> params,
                                    absl::Span<float> grads, float loss_scale,
                                    GradWrite write) {
  if (config_.bf16_params) {
    return absl::FailedPreconditionError(
        "this GptModel takes bf16 parameters (config.bf16_params): call BackwardUnitBf16");
  }
  return Backward(unit, {params, {}, false}, grads, loss_scale, write);
}

absl::Status GptModel::BackwardUnitBf16(int unit, absl::Span<const uint16_t> params,
                                        absl::Span<float> grads, float loss_scale,
                                        GradWrite write) {
  if (!config_.bf16_params) {
    return absl::FailedPreconditionError(
        "this GptModel takes fp32 parameters (config.bf16_params is off): call BackwardUnit");
  }
  return Backward(unit, {{}, params, true}, grads, loss_scale, write);
}

absl::Status GptModel::BackwardUnitBf16ToBf16Grads(int unit, absl::Span<const uint16_t> params,
                                                   absl::Span<float> grads,
                                                   absl::Span<uint16_t> grads16,
                                                   float loss_scale) {
  if (!config_.bf16_params) {
    return absl::FailedPreconditionError(
        "this GptModel takes fp32 parameters (config.bf16_params is off): call BackwardUnit");
  }
  if (grads16.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("BackwardUnitBf16ToBf16Grads(", unit, "): ",
                                                   grads16.size(), " bf16 gradients for ",
                                                   grads.size(), " fp32 ones"));
  }
  return Backward(unit, {{}, params, true}, grads, loss_scale, GradWrite::kOverwrite, grads16);
}

absl::Status GptModel::Forward(int unit, const ParamsIn& params, const Batch& batch) {
  FSDP_RETURN_IF_ERROR(order_.CheckForward(unit));
  if (unit == 0) {
    FSDP_RETURN_IF_ERROR(ValidateBatch(batch, micro_batch_, config_.seq_len, config_.vocab));
  } else if (batch.batch_size != batch_ || batch.seq_len != seq_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ForwardUnit(", unit, ") got a ", batch.batch_size, "x", batch.seq_len,
        " batch but the step started with ", batch_, "x", seq_));
  }
  const int last = num_units() - 1;
  if (unit == 0) {
    FSDP_RETURN_IF_ERROR(EmbeddingForward(params, batch));
  } else if (unit == last) {
    FSDP_RETURN_IF_ERROR(HeadForward(params, batch));
  } else {
    FSDP_RETURN_IF_ERROR(BlockForward(unit - 1, params));
  }
  order_.ForwardDone(unit);
  return absl::OkStatus();
}

absl::Status GptModel::Backward(int unit, const ParamsIn& params, absl::Span<float> grads,
                                float loss_scale, GradWrite write,
                                absl::Span<uint16_t> grads16) {
  FSDP_RETURN_IF_ERROR(order_.CheckBackward(unit));
  if (static_cast<int64_t>(grads.size()) != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat("BackwardUnit(", unit, "): ", grads.size(),
                                                   " gradients for ", params.size(),
                                                   " parameters"));
  }
  if (write == GradWrite::kOverwrite) FSDP_RETURN_IF_ERROR(ZeroAddedGrads(unit, grads));
  const int last = num_units() - 1;
  if (unit == last) {
    FSDP_RETURN_IF_ERROR(HeadBackward(params, grads, loss_scale, write, grads16));
  } else if (unit == 0) {
    FSDP_RETURN_IF_ERROR(EmbeddingBackward(grads));
    RoundGradsExcept(unit, grads, grads16, {});
  } else {
    FSDP_RETURN_IF_ERROR(BlockBackward(unit - 1, params, grads, write, grads16));
  }
  order_.BackwardDone(unit);
  return absl::OkStatus();
}

void GptModel::RoundGradsExcept(int unit, absl::Span<const float> grads,
                                absl::Span<uint16_t> grads16,
                                std::initializer_list<int> written) const {
  if (grads16.empty()) return;
  const std::vector<ParamSpec>& specs = units_[unit].params;
  int64_t offset = 0;
  for (int k = 0; k < static_cast<int>(specs.size()); ++k) {
    const int64_t numel = specs[k].numel();
    if (std::find(written.begin(), written.end(), k) == written.end()) {
      ToBf16(grads16.data() + offset, grads.data() + offset, numel);
    }
    offset += numel;
  }
}

absl::Status GptModel::ZeroAddedGrads(int unit, absl::Span<float> grads) {
  if (unit == 0) {  // the embedding scatters rows by adding them
    std::fill(grads.begin(), grads.end(), 0.0f);
    return absl::OkStatus();
  }
  FSDP_ASSIGN_OR_RETURN(std::vector<TensorView> g, ViewParams(units_[unit], grads));
  auto zero = [&](int k) { std::fill(g[k].data(), g[k].data() + g[k].numel(), 0.0f); };
  if (unit == num_units() - 1) {
    zero(kLnfWeight);
    zero(kLnfBias);
  } else {
    for (int k : {kLn1Weight, kLn1Bias, kLn2Weight, kLn2Bias}) zero(k);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- embedding

absl::Status GptModel::EmbeddingForward(const ParamsIn& params, const Batch& batch) {
  // A new step: drop whatever an unfinished one saved.
  tokens_.Reset();
  embedding_out_.Reset();
  for (BlockActivations& block : blocks_) block = BlockActivations();
  head_ = HeadActivations();

  if (params.size() != units_[0].numel()) {
    return absl::InvalidArgumentError(absl::StrCat("embedding: got ", params.size(),
                                                   " parameters, the unit has ",
                                                   units_[0].numel()));
  }
  batch_ = batch.batch_size;
  seq_ = batch.seq_len;
  const int64_t bt = int64_t{batch_} * seq_;
  FSDP_ASSIGN_OR_RETURN(tokens_, tracker_->Allocate<int32_t>(MemoryCategory::kActivations, bt,
                                                             "embedding tokens"));
  std::memcpy(tokens_.data(), batch.inputs.data(), sizeof(int32_t) * bt);
  FSDP_ASSIGN_OR_RETURN(embedding_out_, Activation(bt * config_.d_model, "output", 0));
  const int64_t wpe_offset = units_[0].params[0].numel();
  if (params.is_bf16) {
    fsdp::EmbeddingForwardBf16(embedding_out_.data(), tokens_.data(), params.bf16.data(),
                               params.bf16.data() + wpe_offset, batch_, seq_, config_.d_model);
  } else {
    fsdp::EmbeddingForward(embedding_out_.data(), tokens_.data(), params.fp32.data(),
                           params.fp32.data() + wpe_offset, batch_, seq_, config_.d_model);
  }
  return absl::OkStatus();
}

absl::Status GptModel::EmbeddingBackward(absl::Span<float> grads) {
  FSDP_ASSIGN_OR_RETURN(std::vector<TensorView> g, ViewParams(units_[0], grads));
  fsdp::EmbeddingBackward(g[0].data(), g[1].data(), d_residual_.data(), tokens_.data(), batch_,
                          seq_, config_.d_model);
  tokens_.Reset();
  embedding_out_.Reset();
  return absl::OkStatus();
}

// ---------------------------------------------------------------- block

// What a block's forward saves, in forward order (the tracker's peak follows
// it): with bf16_compute the tensors that only feed products in bf16.
absl::Status GptModel::AllocateBlockActivations(int layer, bool with_output) {
  const int unit = layer + 1;
  const int n = batch_ * seq_;
  const int64_t nc = int64_t{n} * config_.d_model;
  const int64_t bh = int64_t{batch_} * config_.heads;
  const bool bf16 = config_.bf16_compute;
  BlockActivations& a = blocks_[layer];
  auto saved = [&](FloatBuffer& fp32, TrackedBuffer<uint16_t>& half, int64_t numel,
                   const char* what) -> absl::Status {
    if (bf16) {
      FSDP_ASSIGN_OR_RETURN(half, Bf16Activation(numel, what, unit));
    } else {
      FSDP_ASSIGN_OR_RETURN(fp32, Activation(numel, what, unit));
    }
    return absl::OkStatus();
  };
  FSDP_RETURN_IF_ERROR(saved(a.ln1_out, a.ln1_bf16, nc, "ln1_out"));
  FSDP_ASSIGN_OR_RETURN(a.ln1_mean, Activation(n, "ln1_mean", unit));
  FSDP_ASSIGN_OR_RETURN(a.ln1_rstd, Activation(n, "ln1_rstd", unit));
  FSDP_RETURN_IF_ERROR(saved(a.qkv, a.qkv_bf16, 3 * nc, "qkv"));
  if (config_.flash_attention) {
    FSDP_ASSIGN_OR_RETURN(a.lse, Activation(bh * seq_, "att_lse", unit));
  } else {
    FSDP_RETURN_IF_ERROR(saved(a.att_probs, a.att_probs_bf16, bh * seq_ * seq_, "att_probs"));
  }
  FSDP_RETURN_IF_ERROR(saved(a.att_out, a.att_bf16, nc, "att_out"));
  FSDP_ASSIGN_OR_RETURN(a.res2, Activation(nc, "res2", unit));
  FSDP_RETURN_IF_ERROR(saved(a.ln2_out, a.ln2_bf16, nc, "ln2_out"));
  FSDP_ASSIGN_OR_RETURN(a.ln2_mean, Activation(n, "ln2_mean", unit));
  FSDP_ASSIGN_OR_RETURN(a.ln2_rstd, Activation(n, "ln2_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.fc_out, Activation(4 * nc, "fc_out", unit));
  FSDP_RETURN_IF_ERROR(saved(a.gelu_out, a.gelu_bf16, 4 * nc, "gelu_out"));
  if (with_output) {
    FSDP_ASSIGN_OR_RETURN(a.out, Activation(nc, "out", unit));
  }
  return absl::OkStatus();
}

void GptModel::ReleaseRecomputable(int layer) {
  BlockActivations& a = blocks_[layer];
  FloatBuffer out = std::move(a.out);
  a = BlockActivations();
  a.out = std::move(out);
}

absl::Status GptModel::BlockForward(int layer, const ParamsIn& params) {
  const bool checkpointed = IsCheckpointedBlock(config_, layer);
  BlockActivations& a = blocks_[layer];
  if (checkpointed) {
    // The output first: it is all that stays once the forward is done.
    FSDP_ASSIGN_OR_RETURN(
        a.out, Activation(int64_t{batch_} * seq_ * config_.d_model, "out", layer + 1));
  }
  FSDP_RETURN_IF_ERROR(AllocateBlockActivations(layer, /*with_output=*/!checkpointed));
  if (config_.bf16_compute) {
    FSDP_ASSIGN_OR_RETURN(const Bf16UnitParams p, PrepareBf16(layer + 1, params));
    BlockForwardComputeBf16(layer, p, /*through_output=*/true);
  } else {
    FSDP_RETURN_IF_ERROR(BlockForwardCompute(layer, params.fp32, /*through_output=*/true));
  }
  if (checkpointed) ReleaseRecomputable(layer);
  return absl::OkStatus();
}

absl::Status GptModel::BlockForwardCompute(int layer, absl::Span<const float> params,
                                           bool through_output) {
  const int unit = layer + 1;
  FSDP_ASSIGN_OR_RETURN(std::vector<ConstTensorView> p, ViewParams(units_[unit], params));
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int64_t nc = int64_t{n} * C;
  BlockActivations& a = blocks_[layer];

  const float* x = UnitInput(unit);
  LayerNormForward(a.ln1_out.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x,
                   p[kLn1Weight].data(), p[kLn1Bias].data(), n, C);
  LinearForward(a.qkv.data(), a.ln1_out.data(), p[kQkvWeight].data(), p[kQkvBias].data(), n, C,
                3 * C);
  if (config_.flash_attention) {
    FlashAttentionForward(a.att_out.data(), a.lse.data(), attention_scratch_.data(), a.qkv.data(),
                          batch_, seq_, C, config_.heads);
  } else {
    AttentionForward(a.att_out.data(), a.att_probs.data(), a.qkv.data(), batch_, seq_, C,
                     config_.heads);
  }
  LinearForward(a.res2.data(), a.att_out.data(), p[kAttnProjWeight].data(),
                p[kAttnProjBias].data(), n, C, C);
  ResidualForward(a.res2.data(), a.res2.data(), x, nc);
  LayerNormForward(a.ln2_out.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                   p[kLn2Weight].data(), p[kLn2Bias].data(), n, C);
  LinearForward(a.fc_out.data(), a.ln2_out.data(), p[kFcWeight].data(), p[kFcBias].data(), n, C,
                4 * C);
  GeluForward(a.gelu_out.data(), a.fc_out.data(), 4 * nc);
  if (!through_output) return absl::OkStatus();
  LinearForward(a.out.data(), a.gelu_out.data(), p[kMlpProjWeight].data(),
                p[kMlpProjBias].data(), n, 4 * C, C);
  ResidualForward(a.out.data(), a.out.data(), a.res2.data(), nc);
  return absl::OkStatus();
}

absl::Status GptModel::BlockBackward(int layer, const ParamsIn& params,
                                     absl::Span<float> grads, GradWrite write,
                                     absl::Span<uint16_t> grads16) {
  const bool checkpointed = IsCheckpointedBlock(config_, layer);
  const int unit = layer + 1;
  if (config_.bf16_compute) {
    // The backward's parameters may be a new gather: prepare them again (once
    // for the recomputation and the backward).
    FSDP_ASSIGN_OR_RETURN(const Bf16UnitParams p, PrepareBf16(unit, params));
    if (checkpointed) {
      FSDP_RETURN_IF_ERROR(AllocateBlockActivations(layer, /*with_output=*/false));
      BlockForwardComputeBf16(layer, p, /*through_output=*/false);
    }
    return BlockBackwardBf16(layer, p, grads, write, grads16);
  }
  if (checkpointed) {
    FSDP_RETURN_IF_ERROR(AllocateBlockActivations(layer, /*with_output=*/false));
    FSDP_RETURN_IF_ERROR(BlockForwardCompute(layer, params.fp32, /*through_output=*/false));
  }
  FSDP_ASSIGN_OR_RETURN(std::vector<ConstTensorView> p, ViewParams(units_[unit], params.fp32));
  FSDP_ASSIGN_OR_RETURN(std::vector<TensorView> g, ViewParams(units_[unit], grads));
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int64_t nc = int64_t{n} * C;
  BlockActivations& a = blocks_[layer];
  float* dres = d_residual_.data();  // enters as d(out)

  // out = res2 + mlp_proj(gelu): the residual passes dres through to res2 by
  // leaving it in place; the projection branch reads it.
  LinearBackward(d_wide1_.data(), g[kMlpProjWeight].data(), g[kMlpProjBias].data(), dres,
                 a.gelu_out.data(), p[kMlpProjWeight].data(), n, 4 * C, C,
                 GradWrite::kOverwrite, write);
  GeluBackwardOverwrite(d_wide2_.data(), a.fc_out.data(), d_wide1_.data(), 4 * nc);
  LinearBackward(d_narrow_.data(), g[kFcWeight].data(), g[kFcBias].data(), d_wide2_.data(),
                 a.ln2_out.data(), p[kFcWeight].data(), n, C, 4 * C,
                 GradWrite::kOverwrite, write);
  LayerNormBackward(dres, g[kLn2Weight].data(), g[kLn2Bias].data(), d_narrow_.data(),
                    a.res2.data(), p[kLn2Weight].data(), a.ln2_mean.data(), a.ln2_rstd.data(), n,
                    C);
  // dres now holds d(res2); res2 = x + attn_proj(att).
  LinearBackward(d_narrow_.data(), g[kAttnProjWeight].data(), g[kAttnProjBias].data(), dres,
                 a.att_out.data(), p[kAttnProjWeight].data(), n, C, C,
                 GradWrite::kOverwrite, write);
  if (config_.flash_attention) {
    Zero(d_wide1_, 3 * nc);  // the blocked backward adds into dqkv; the standard one writes it
    FlashAttentionBackward(d_wide1_.data(), attention_scratch_.data(), d_narrow_.data(),
                           a.qkv.data(), a.att_out.data(), a.lse.data(), batch_, seq_, C,
                           config_.heads);
  } else {
    AttentionBackward(d_wide1_.data(), attention_scratch_.data(), d_narrow_.data(), a.qkv.data(),
                      a.att_probs.data(), batch_, seq_, C, config_.heads);
  }
  LinearBackward(d_narrow_.data(), g[kQkvWeight].data(), g[kQkvBias].data(), d_wide1_.data(),
                 a.ln1_out.data(), p[kQkvWeight].data(), n, C, 3 * C,
                 GradWrite::kOverwrite, write);
  LayerNormBackward(dres, g[kLn1Weight].data(), g[kLn1Bias].data(), d_narrow_.data(),
                    UnitInput(unit), p[kLn1Weight].data(), a.ln1_mean.data(), a.ln1_rstd.data(),
                    n, C);
  // dres now holds d(x), the gradient for the unit before.
  a = BlockActivations();
  return absl::OkStatus();
}

// ---------------------------------------------------------------- block, bf16

// The fp32 block with its four matrix products on bf16 operands. LayerNorm,
// attention and GELU compute in fp32; what only feeds a product is saved in
// bf16, rounded block by block while in L1 (fsdp/nn/bf16_outputs.h) or, for
// attention's output, row by row as the attention writes it.
void GptModel::BlockForwardComputeBf16(int layer, const Bf16UnitParams& p, bool through_output) {
  const int unit = layer + 1;
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int64_t nc = int64_t{n} * C;
  BlockActivations& a = blocks_[layer];
  auto w = [&](BlockParam k) { return p.W(k); };

  const float* x = UnitInput(unit);
  LayerNormForwardToBf16(a.ln1_bf16.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x,
                         p.F(kLn1Weight), p.F(kLn1Bias), n, C);
  LinearForwardBf16Out(a.qkv_bf16.data(), a.ln1_bf16.data(), w(kQkvWeight), p.F(kQkvBias),
                       n, C, 3 * C);
  if (config_.flash_attention) {
    FlashAttentionForwardBf16(a.att_bf16.data(), a.lse.data(), attention_scratch_.data(),
                              probs_bf16_.data(), a.qkv_bf16.data(), batch_, seq_, C,
                              config_.heads);
  } else {
    AttentionForwardBf16(a.att_bf16.data(), a.att_probs_bf16.data(), attention_scratch_.data(),
                         probs_bf16_.data(), a.qkv_bf16.data(), batch_, seq_, C, config_.heads);
  }
  LinearForwardBf16(a.res2.data(), a.att_bf16.data(), w(kAttnProjWeight),
                    p.F(kAttnProjBias), n, C, C);
  ResidualForward(a.res2.data(), a.res2.data(), x, nc);
  LayerNormForwardToBf16(a.ln2_bf16.data(), a.ln2_mean.data(), a.ln2_rstd.data(),
                         a.res2.data(), p.F(kLn2Weight), p.F(kLn2Bias), n, C);
  LinearForwardBf16(a.fc_out.data(), a.ln2_bf16.data(), w(kFcWeight), p.F(kFcBias), n, C,
                    4 * C);
  GeluForwardToBf16(a.gelu_bf16.data(), a.fc_out.data(), 4 * nc);
  if (!through_output) return;
  LinearForwardBf16(a.out.data(), a.gelu_bf16.data(), w(kMlpProjWeight), p.F(kMlpProjBias), n,
                    4 * C, C);
  ResidualForward(a.out.data(), a.out.data(), a.res2.data(), nc);
}

absl::Status GptModel::BlockBackwardBf16(int layer, const Bf16UnitParams& p,
                                         absl::Span<float> grads, GradWrite write,
                                         absl::Span<uint16_t> grads16) {
  const int unit = layer + 1;
  FSDP_ASSIGN_OR_RETURN(std::vector<TensorView> g, ViewParams(units_[unit], grads));
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int64_t nc = int64_t{n} * C;
  BlockActivations& a = blocks_[layer];
  auto w = [&](BlockParam k) { return p.W(k); };
  // With grads16, where the products write their weight gradients in bf16.
  auto w16 = [&](BlockParam k) { return Bf16GradAt(grads16, p.offset[k]); };
  float* dres = d_residual_.data();  // enters as d(out)
  // Enters as bf16(d(out)): the unit above (units run backward in order,
  // fsdp/nn/unit_order.h) rounded it in the LayerNorm backward that wrote
  // d(out), the head's ln_f or the block above's LN1.
  uint16_t* dout16 = dout_bf16_.data();

  LinearBackwardBf16(d_wide1_.data(), g[kMlpProjWeight].data(), g[kMlpProjBias].data(), dres,
                     dout16, a.gelu_bf16.data(), w(kMlpProjWeight), n, 4 * C, C,
                     GradWrite::kOverwrite, write, w16(kMlpProjWeight));
  // d(fc_out) in bf16 and the fc bias gradient in one pass; its fp32 values
  // exist only block by block.
  GeluBackwardToBf16WithBiasGradient(g[kFcBias].data(), dout16, a.fc_out.data(), d_wide1_.data(),
                                     n, 4 * C, write);
  LinearBackwardBf16(d_narrow_.data(), g[kFcWeight].data(), /*dbias=*/nullptr, nullptr, dout16,
                     a.ln2_bf16.data(), w(kFcWeight), n, C, 4 * C, GradWrite::kOverwrite,
                     write, w16(kFcWeight));
  // dres becomes d(res2), dout16 its rounding.
  LayerNormBackwardWithBf16(dres, dout16, g[kLn2Weight].data(), g[kLn2Bias].data(),
                            d_narrow_.data(), a.res2.data(), p.F(kLn2Weight), a.ln2_mean.data(),
                            a.ln2_rstd.data(), n, C);
  LinearBackwardBf16(d_narrow_.data(), g[kAttnProjWeight].data(), g[kAttnProjBias].data(), dres,
                     dout16, a.att_bf16.data(), w(kAttnProjWeight), n, C, C,
                     GradWrite::kOverwrite, write, w16(kAttnProjWeight));
  ToBf16(dout16, d_narrow_.data(), nc);
  if (config_.flash_attention) {
    Zero(d_wide1_, 3 * nc);  // the blocked backward adds into dqkv; the standard one writes it
    FlashAttentionBackwardBf16(d_wide1_.data(), attention_scratch_.data(), probs_bf16_.data(),
                               dout16, a.qkv_bf16.data(), a.att_bf16.data(), a.lse.data(), batch_,
                               seq_, C, config_.heads);
  } else {
    AttentionBackwardBf16(d_wide1_.data(), attention_scratch_.data(), probs_bf16_.data(), dout16,
                          a.qkv_bf16.data(), a.att_probs_bf16.data(), batch_, seq_, C,
                          config_.heads);
  }
  BiasGradientWithBf16(g[kQkvBias].data(), dout16, d_wide1_.data(), n, 3 * C, write);
  LinearBackwardBf16(d_narrow_.data(), g[kQkvWeight].data(), /*dbias=*/nullptr, nullptr, dout16,
                     a.ln1_bf16.data(), w(kQkvWeight), n, C, 3 * C, GradWrite::kOverwrite,
                     write, w16(kQkvWeight));
  if (layer > 0) {  // the block below starts with a product of d(x) in bf16
    LayerNormBackwardWithBf16(dres, dout16, g[kLn1Weight].data(), g[kLn1Bias].data(),
                              d_narrow_.data(), UnitInput(unit), p.F(kLn1Weight),
                              a.ln1_mean.data(), a.ln1_rstd.data(), n, C);
  } else {
    LayerNormBackward(dres, g[kLn1Weight].data(), g[kLn1Bias].data(), d_narrow_.data(),
                      UnitInput(unit), p.F(kLn1Weight), a.ln1_mean.data(), a.ln1_rstd.data(),
                      n, C);
  }
  RoundGradsExcept(unit, grads, grads16,
                   {kQkvWeight, kAttnProjWeight, kFcWeight, kMlpProjWeight});
  a = BlockActivations();
  return absl::OkStatus();
}

// ---------------------------------------------------------------- head

absl::Status GptModel::HeadForward(const ParamsIn& params, const Batch& batch) {
  const int unit = num_units() - 1;
  FSDP_RETURN_IF_ERROR(ValidateBatch(batch, micro_batch_, config_.seq_len, config_.vocab));
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int V = config_.vocab;
  HeadActivations& a = head_;
  if (config_.bf16_compute) {
    FSDP_ASSIGN_OR_RETURN(a.lnf_bf16, Bf16Activation(int64_t{n} * C, "lnf_out", unit));
  } else {
    FSDP_ASSIGN_OR_RETURN(a.lnf_out, Activation(int64_t{n} * C, "lnf_out", unit));
  }
  FSDP_ASSIGN_OR_RETURN(a.lnf_mean, Activation(n, "lnf_mean", unit));
  FSDP_ASSIGN_OR_RETURN(a.lnf_rstd, Activation(n, "lnf_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.probs, Activation(int64_t{n} * V, "probs", unit));
  FSDP_ASSIGN_OR_RETURN(
      a.targets, tracker_->Allocate<int32_t>(MemoryCategory::kActivations, n, "head targets"));
  std::memcpy(a.targets.data(), batch.targets.data(), sizeof(int32_t) * n);

  if (config_.bf16_compute) {
    FSDP_ASSIGN_OR_RETURN(const Bf16UnitParams p, PrepareBf16(unit, params));
    // ln_f rounded to bf16 block by block (it only feeds the head's product).
    LayerNormForwardToBf16(a.lnf_bf16.data(), a.lnf_mean.data(), a.lnf_rstd.data(),
                           UnitInput(unit), p.F(kLnfWeight), p.F(kLnfBias), n, C);
    LinearForwardBf16(a.probs.data(), a.lnf_bf16.data(), p.W(kLmHeadWeight), nullptr, n, C, V);
  } else {
    FSDP_ASSIGN_OR_RETURN(std::vector<ConstTensorView> p, ViewParams(units_[unit], params.fp32));
    LayerNormForward(a.lnf_out.data(), a.lnf_mean.data(), a.lnf_rstd.data(), UnitInput(unit),
                     p[kLnfWeight].data(), p[kLnfBias].data(), n, C);
    LinearForward(a.probs.data(), a.lnf_out.data(), p[kLmHeadWeight].data(), nullptr, n, C, V);
  }
  loss_ = CrossEntropyForward(a.probs.data(), a.targets.data(), n, V);
  return absl::OkStatus();
}

absl::Status GptModel::HeadBackward(const ParamsIn& params, absl::Span<float> grads,
                                    float loss_scale, GradWrite write,
                                    absl::Span<uint16_t> grads16) {
  const int unit = num_units() - 1;
  FSDP_ASSIGN_OR_RETURN(std::vector<TensorView> g, ViewParams(units_[unit], grads));
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int V = config_.vocab;
  HeadActivations& a = head_;
  const float* lnf_weight = nullptr;
  if (config_.bf16_compute) {
    // dlogits rounded to bf16 in place, row by row as they are computed (the
    // head has no bias, so the fp32 copy is not needed again); the parameters
    // may live elsewhere than in the forward.
    FSDP_ASSIGN_OR_RETURN(const Bf16UnitParams p, PrepareBf16(unit, params));
    CrossEntropyBackwardToBf16(a.probs.data(), a.targets.data(), n, V, loss_scale);
    const uint16_t* dlogits = reinterpret_cast<const uint16_t*>(a.probs.data());
    LinearBackwardBf16(d_narrow_.data(), g[kLmHeadWeight].data(), nullptr, nullptr, dlogits,
                       a.lnf_bf16.data(), p.W(kLmHeadWeight), n, C, V,
                       GradWrite::kOverwrite, write,
                       Bf16GradAt(grads16, p.offset[kLmHeadWeight]));
    lnf_weight = p.F(kLnfWeight);
  } else {
    CrossEntropyBackward(a.probs.data(), a.targets.data(), n, V, loss_scale);
    FSDP_ASSIGN_OR_RETURN(std::vector<ConstTensorView> p, ViewParams(units_[unit], params.fp32));
    LinearBackward(d_narrow_.data(), g[kLmHeadWeight].data(), nullptr, a.probs.data(),
                   a.lnf_out.data(), p[kLmHeadWeight].data(), n, C, V,
                   GradWrite::kOverwrite, write);
    lnf_weight = p[kLnfWeight].data();
  }
  Zero(d_residual_, int64_t{n} * C);
  if (config_.bf16_compute && config_.layers > 0) {  // the last block starts with a bf16 product
    LayerNormBackwardWithBf16(d_residual_.data(), dout_bf16_.data(), g[kLnfWeight].data(),
                              g[kLnfBias].data(), d_narrow_.data(), UnitInput(unit), lnf_weight,
                              a.lnf_mean.data(), a.lnf_rstd.data(), n, C);
  } else {
    LayerNormBackward(d_residual_.data(), g[kLnfWeight].data(), g[kLnfBias].data(),
                      d_narrow_.data(), UnitInput(unit), lnf_weight, a.lnf_mean.data(),
                      a.lnf_rstd.data(), n, C);
  }
  RoundGradsExcept(unit, grads, grads16, {kLmHeadWeight});
  head_ = HeadActivations();
  return absl::OkStatus();
}

}  // namespace fsdp
