// File: fsdp/nn/gpt_model.cc
//
// One block, forward (x = residual stream in, all (B*T) rows at once):
//   ln1 = LN(x); qkv = ln1 Wqkv^T + b; att = Attention(qkv)
//   res2 = x + att Wproj^T + b
//   ln2 = LN(res2); fc = ln2 Wfc^T + b; g = GELU(fc)
//   out = res2 + g Wmproj^T + b
// Both written once over the compute dtype (config.compute_dtype): the
// activations that only feed products are saved in it, and the layers of
// fsdp/nn/dtype_layers.h pick the fp32 or bf16 kernel from their operands.
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
#include "base/bf16_convert.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/decoder_steps.h"
#include "fsdp/nn/dtype_layers.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/exact_grads.h"
#include "fsdp/nn/flash_attention.h"
#include "fsdp/nn/init_rng.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<GptModel>> GptModel::Create(const GptConfig& config,
                                                           int micro_batch,
                                                           MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateGptConfig(config));
  FSDP_RETURN_IF_ERROR(CheckCreateArguments(micro_batch, tracker, "GptModel"));
  std::unique_ptr<GptModel> model(new GptModel(config, micro_batch, tracker));
  FSDP_RETURN_IF_ERROR(model->AllocateWorkspace());
  return model;
}

GptModel::GptModel(const GptConfig& config, int micro_batch, MemoryTracker* tracker)
    : config_(config),
      param_dtype_(config.param_dtype),
      compute_dtype_(config.compute_dtype),
      micro_batch_(micro_batch),
      tracker_(tracker),
      units_(GptUnitSpecs(config)),
      order_(static_cast<int>(units_.size())),
      blocks_(config.layers) {
  sequence_losses_.reserve(micro_batch);
}

absl::Status GptModel::AllocateWorkspace() {
  const int64_t btc = int64_t{micro_batch_} * config_.seq_len * config_.d_model;
  const int head_size = config_.d_model / config_.heads;
  const bool bf16 = compute_dtype_ == comm::Dtype::kBFloat16;
  attention_ = AttentionScratchOf(config_.flash_attention, bf16, config_.seq_len, head_size,
                                  config_.compute_threads);
  MemoryTracker& tracker = *tracker_;
  const MemoryCategory ws = MemoryCategory::kWorkspace;
  FSDP_ASSIGN_OR_RETURN(d_residual_, tracker.Allocate<float>(ws, btc, "gpt d_residual"));
  FSDP_ASSIGN_OR_RETURN(d_narrow_, tracker.Allocate<float>(ws, btc, "gpt d_narrow"));
  FSDP_ASSIGN_OR_RETURN(d_wide1_, tracker.Allocate<float>(ws, 4 * btc, "gpt d_wide1"));
  FSDP_ASSIGN_OR_RETURN(dout_copy_, DtypeBuffer::Allocate(tracker, ws, compute_dtype_, 4 * btc,
                                                          "gpt dout (compute dtype)"));
  FSDP_ASSIGN_OR_RETURN(attention_scratch_,
                        tracker.Allocate<float>(ws, attention_.floats, "gpt attention scratch"));
  if (!bf16) return absl::OkStatus();
  int64_t max_unit = 0, max_small = 0;
  for (const UnitSpec& u : units_) {
    max_unit = std::max(max_unit, u.numel());
    max_small = std::max(max_small, SmallParamNumel(u));
  }
  if (param_dtype_ == comm::Dtype::kBFloat16) {
    FSDP_ASSIGN_OR_RETURN(small_params_,
                          tracker.Allocate<float>(ws, max_small, "gpt 1-D params fp32"));
  } else {
    FSDP_ASSIGN_OR_RETURN(params_bf16_,
                          tracker.Allocate<uint16_t>(ws, max_unit, "gpt params bf16"));
  }
  FSDP_ASSIGN_OR_RETURN(probs_bf16_,
                        tracker.Allocate<uint16_t>(ws, attention_.bf16_elements, "gpt probs bf16"));
  return absl::OkStatus();
}

absl::StatusOr<FloatBuffer> GptModel::Activation(int64_t numel, const char* what, int unit) {
  // Uninitialized: every activation is written in full by the forward that
  // saves it, so clearing a reused block would be a wasted pass over memory.
  return tracker_->AllocateUninitialized<float>(MemoryCategory::kActivations, numel,
                                                absl::StrCat(units_[unit].name, " ", what));
}

absl::StatusOr<DtypeBuffer> GptModel::ComputeActivation(int64_t numel, const char* what,
                                                        int unit) {
  return DtypeBuffer::AllocateUninitialized(*tracker_, MemoryCategory::kActivations,
                                            compute_dtype_, numel,
                                            absl::StrCat(units_[unit].name, " ", what));
}

absl::StatusOr<GptModel::UnitParams> GptModel::PrepareParams(int unit, ConstDtypeSpan params) {
  const UnitSpec& spec = units_[unit];
  FSDP_RETURN_IF_ERROR(CheckUnitParams(params, param_dtype_, spec));
  UnitParams m;
  m.offset.resize(spec.params.size());
  m.numel.resize(spec.params.size());
  m.fp32.assign(spec.params.size(), nullptr);
  int64_t offset = 0;
  for (size_t k = 0; k < spec.params.size(); ++k) {
    m.offset[k] = offset;
    m.numel[k] = spec.params[k].numel();
    offset += m.numel[k];
  }
  if (params.dtype() == comm::Dtype::kFloat32) {
    const float* fp32 = params.as<float>().data();
    for (size_t k = 0; k < spec.params.size(); ++k) m.fp32[k] = fp32 + m.offset[k];
    m.compute = params;
    if (compute_dtype_ == comm::Dtype::kBFloat16) {  // the products read a bf16 copy
      base::ToBf16(params_bf16_.data(), fp32, spec.numel());
      m.compute = absl::MakeConstSpan(params_bf16_.data(), spec.numel());
    }
    return m;
  }
  m.compute = params;
  const uint16_t* bf16 = params.as<uint16_t>().data();
  float* small = small_params_.data();
  for (size_t k = 0; k < spec.params.size(); ++k) {
    if (spec.params[k].shape.size() != 1) continue;
    base::FromBf16(small, bf16 + m.offset[k], m.numel[k]);
    m.fp32[k] = small;
    small += m.numel[k];
  }
  return m;
}

DtypeSpan GptModel::GradsOut::Product(int k) const {
  if (bf16.empty()) return DtypeSpan(absl::MakeSpan(views[k].data(), views[k].numel()));
  const int64_t offset = views[k].data() - fp32.data();
  return DtypeSpan(bf16.subspan(offset, views[k].numel()));
}

absl::StatusOr<GptModel::GradsOut> GptModel::PrepareGrads(int unit, const UnitGrads& grads) {
  const std::string what = absl::StrCat(units_[unit].name, " gradients");
  const int num_params = static_cast<int>(units_[unit].params.size());
  FSDP_RETURN_IF_ERROR(CheckUnitGrads(grads, GradWrite::kOverwrite, what, num_params));
  const bool exact = grads.values.dtype() == comm::Dtype::kInt64;
  if (exact != config_.per_sequence_products) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", comm::DtypeName(grads.values.dtype()), " gradients, but this model ",
        config_.per_sequence_products
            ? "computes per sequence and writes exact (int64) gradient sums only"
            : "computes over whole micro-batches: exact (int64) gradients need "
              "GptConfig::per_sequence_products (docs/exact.md)"));
  }
  GradsOut g;
  g.spec = &units_[unit];
  if (exact) {
    g.fp32 = grads.fp32_scratch;
    g.exact_sums = grads.values.as<int64_t>();
    g.exact = grads.exact;
  } else if (grads.values.dtype() == comm::Dtype::kFloat32) {
    g.fp32 = grads.values.as<float>();
  } else {
    // Only the bf16 products write bf16 weight gradients.
    if (compute_dtype_ != comm::Dtype::kBFloat16) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bf16 gradients need bf16 compute"));
    }
    g.fp32 = grads.fp32_scratch;
    g.bf16 = grads.values.as<uint16_t>();
  }
  FSDP_ASSIGN_OR_RETURN(g.views, ViewParams(units_[unit], g.fp32));
  return g;
}

DtypeSpan GptModel::CopyOf(float* fp32, int64_t numel) {
  if (compute_dtype_ == comm::Dtype::kFloat32) return Fp32(fp32, numel);
  return dout_copy_.span().subspan(0, numel);
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

absl::Status GptModel::ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) {
  return RunDecoderForward(order_, unit, batch,
                           {micro_batch_, config_.seq_len, config_.vocab, batch_, seq_},
                           [&] { return EmbeddingForward(params, batch); },
                           [&](int layer) { return BlockForward(layer, params); },
                           [&] { return HeadForward(params, batch); });
}

absl::Status GptModel::BackwardUnit(int unit, ConstDtypeSpan params, UnitGrads grads,
                                    float loss_scale, GradWrite write) {
  FSDP_RETURN_IF_ERROR(order_.CheckBackward(unit));
  FSDP_RETURN_IF_ERROR(CheckUnitGrads(grads, write, absl::StrCat("BackwardUnit(", unit, ")"),
                                      static_cast<int>(units_[unit].params.size())));
  if (grads.values.size() != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat("BackwardUnit(", unit, "): ",
                                                   grads.values.size(), " gradients for ",
                                                   params.size(), " parameters"));
  }
  FSDP_ASSIGN_OR_RETURN(const GradsOut g, PrepareGrads(unit, grads));
  if (write == GradWrite::kOverwrite) {
    if (g.exact_sums.empty()) {
      ZeroAddedGrads(unit, g);
    } else {  // the sums are only added into
      std::fill(g.exact_sums.begin(), g.exact_sums.end(), int64_t{0});
    }
  }
  const int last = num_units() - 1;
  if (unit == last) {
    FSDP_RETURN_IF_ERROR(HeadBackward(params, g, loss_scale, write));
  } else if (unit == 0) {
    EmbeddingBackward(g);
    RoundGradsExcept(g, {});
  } else {
    FSDP_RETURN_IF_ERROR(BlockBackward(unit - 1, params, g, write));
  }
  order_.BackwardDone(unit);
  return absl::OkStatus();
}

void GptModel::RoundGradsExcept(const GradsOut& g, std::initializer_list<int> written) const {
  if (g.bf16.empty()) return;
  const std::vector<ParamSpec>& specs = g.spec->params;
  int64_t offset = 0;
  for (int k = 0; k < static_cast<int>(specs.size()); ++k) {
    const int64_t numel = specs[k].numel();
    if (std::find(written.begin(), written.end(), k) == written.end()) {
      base::ToBf16(g.bf16.data() + offset, g.fp32.data() + offset, numel);
    }
    offset += numel;
  }
}

void GptModel::ZeroAddedGrads(int unit, const GradsOut& g) {
  if (unit == 0) {  // the embedding scatters rows by adding them
    std::fill(g.fp32.begin(), g.fp32.end(), 0.0f);
    return;
  }
  auto zero = [&](int k) { std::fill(g.F(k), g.F(k) + g.views[k].numel(), 0.0f); };
  if (unit == num_units() - 1) {
    zero(kLnfWeight);
    zero(kLnfBias);
  } else {
    for (int k : {kLn1Weight, kLn1Bias, kLn2Weight, kLn2Bias}) zero(k);
  }
}

// ---------------------------------------------------------------- embedding

absl::Status GptModel::EmbeddingForward(ConstDtypeSpan params, const Batch& batch) {
  // A new step: drop whatever an unfinished one saved.
  tokens_.Reset();
  embedding_out_.Reset();
  for (BlockActivations& block : blocks_) block = BlockActivations();
  head_ = HeadActivations();

  FSDP_RETURN_IF_ERROR(CheckUnitParams(params, param_dtype_, units_[0]));
  batch_ = batch.batch_size;
  seq_ = batch.seq_len;
  const int64_t bt = int64_t{batch_} * seq_;
  FSDP_ASSIGN_OR_RETURN(tokens_, SaveTokens(*tracker_, batch.inputs, bt, "embedding tokens"));
  FSDP_ASSIGN_OR_RETURN(embedding_out_, Activation(bt * config_.d_model, "output", 0));
  const int64_t wte_numel = units_[0].params[0].numel();
  fsdp::EmbeddingForward(embedding_out_.data(), tokens_.data(), params.subspan(0, wte_numel),
                         params.subspan(wte_numel), batch_, seq_, config_.d_model);
  return absl::OkStatus();
}

void GptModel::EmbeddingBackward(const GradsOut& g) {
  if (g.exact_sums.empty()) {
    fsdp::EmbeddingBackward(g.F(0), g.F(1), d_residual_.data(), tokens_.data(), batch_, seq_,
                            config_.d_model);
  } else {
    const int64_t wte_numel = units_[0].params[0].numel();
    AddEmbeddingRowsToExactSums(g.exact_sums.subspan(0, wte_numel), g.exact.exponents[0],
                                &g.exact.max_abs[0], g.exact_sums.subspan(wte_numel),
                                g.exact.exponents[1], &g.exact.max_abs[1], d_residual_.data(),
                                tokens_.data(), batch_, seq_, config_.d_model);
  }
  tokens_.Reset();
  embedding_out_.Reset();
}

// ---------------------------------------------------------------- block

// What a block's forward saves, in forward order (the tracker's peak follows
// it): what only feeds products in the compute dtype.
absl::Status GptModel::AllocateBlockActivations(int layer, bool with_output) {
  const int unit = layer + 1;
  const int n = batch_ * seq_;
  const int64_t nc = int64_t{n} * config_.d_model;
  const int64_t bh = int64_t{batch_} * config_.heads;
  BlockActivations& a = blocks_[layer];
  FSDP_ASSIGN_OR_RETURN(a.ln1, ComputeActivation(nc, "ln1_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.ln1_mean, Activation(n, "ln1_mean", unit));
  FSDP_ASSIGN_OR_RETURN(a.ln1_rstd, Activation(n, "ln1_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.qkv, ComputeActivation(3 * nc, "qkv", unit));
  if (config_.flash_attention) {
    FSDP_ASSIGN_OR_RETURN(a.lse, Activation(bh * seq_, "att_lse", unit));
  } else {
    FSDP_ASSIGN_OR_RETURN(a.att_probs, ComputeActivation(bh * seq_ * seq_, "att_probs", unit));
  }
  FSDP_ASSIGN_OR_RETURN(a.att, ComputeActivation(nc, "att_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.res2, Activation(nc, "res2", unit));
  FSDP_ASSIGN_OR_RETURN(a.ln2, ComputeActivation(nc, "ln2_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.ln2_mean, Activation(n, "ln2_mean", unit));
  FSDP_ASSIGN_OR_RETURN(a.ln2_rstd, Activation(n, "ln2_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.fc_out, Activation(4 * nc, "fc_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.gelu, ComputeActivation(4 * nc, "gelu_out", unit));
  if (with_output) {
    FSDP_ASSIGN_OR_RETURN(a.out, Activation(nc, "out", unit));
  }
  return absl::OkStatus();
}

absl::Status GptModel::BlockForward(int layer, ConstDtypeSpan params) {
  FSDP_ASSIGN_OR_RETURN(const UnitParams p, PrepareParams(layer + 1, params));
  return RunBlockForward(
      blocks_[layer], IsCheckpointedBlock(config_, layer),
      [&] { return Activation(int64_t{batch_} * seq_ * config_.d_model, "out", layer + 1); },
      [&](bool with_output) { return AllocateBlockActivations(layer, with_output); },
      [&] { BlockForwardCompute(layer, p, /*through_output=*/true); });
}

// In bf16 compute, LayerNorm, attention and GELU compute in fp32 and what
// only feeds a product is saved in bf16, rounded block by block while in L1
// (fsdp/nn/bf16_outputs.h) or, for attention's output, row by row as the
// attention writes it.
void GptModel::BlockForwardCompute(int layer, const UnitParams& p, bool through_output) {
  ForEachProductRange([&](Seqs r) { BlockForwardRows(layer, p, through_output, r); });
}

// Every saved buffer is (B, T, width) or (B, H, T[, T]): sequences r start
// at row r.first * T, or at head row r.first * H.
GptModel::BlockRows GptModel::RowsOf(int layer, Seqs r) {
  BlockActivations& a = blocks_[layer];
  const int C = config_.d_model;
  BlockRows b;
  b.n = r.count * seq_;
  b.nc = int64_t{b.n} * C;
  b.row0 = int64_t{r.first} * seq_;
  const int64_t at = b.row0 * C;
  const int64_t head_rows = int64_t{r.first} * config_.heads * seq_;
  b.x = UnitInput(layer + 1) + at;
  b.ln1 = a.ln1.span().subspan(at, b.nc);
  b.ln1_mean = a.ln1_mean.data() + b.row0;
  b.ln1_rstd = a.ln1_rstd.data() + b.row0;
  b.qkv = a.qkv.span().subspan(3 * at, 3 * b.nc);
  if (config_.flash_attention) {
    b.lse = a.lse.data() + head_rows;
  } else {
    b.att_probs = a.att_probs.span().subspan(head_rows * seq_,
                                             int64_t{r.count} * config_.heads * seq_ * seq_);
  }
  b.att = a.att.span().subspan(at, b.nc);
  b.res2 = a.res2.data() + at;
  b.ln2 = a.ln2.span().subspan(at, b.nc);
  b.ln2_mean = a.ln2_mean.data() + b.row0;
  b.ln2_rstd = a.ln2_rstd.data() + b.row0;
  b.fc_out = a.fc_out.data() + 4 * at;
  b.gelu = a.gelu.span().subspan(4 * at, 4 * b.nc);
  b.out = a.out.empty() ? nullptr : a.out.data() + at;
  b.d_residual = d_residual_.data() + at;
  return b;
}

void GptModel::BlockForwardRows(int layer, const UnitParams& p, bool through_output, Seqs r) {
  const BlockRows b = RowsOf(layer, r);
  const int n = b.n;
  const int64_t nc = b.nc;
  const int C = config_.d_model;
  LayerNormForward(b.ln1, b.ln1_mean, b.ln1_rstd, b.x, p.F(kLn1Weight), p.F(kLn1Bias), n, C);
  LinearForward(b.qkv, b.ln1, p.W(kQkvWeight), p.F(kQkvBias), n, C, 3 * C);
  if (config_.flash_attention) {
    FlashAttentionForward(b.att, b.lse, attention_scratch_.data(), probs_bf16_.data(), b.qkv,
                          r.count, seq_, C, config_.heads, attention_.slots);
  } else {
    AttentionForward(b.att, b.att_probs, attention_scratch_.data(), probs_bf16_.data(), b.qkv,
                     r.count, seq_, C, config_.heads, attention_.slots);
  }
  LinearForward(Fp32(b.res2, nc), b.att, p.W(kAttnProjWeight), p.F(kAttnProjBias), n, C, C);
  ResidualForward(b.res2, b.res2, b.x, nc);
  LayerNormForward(b.ln2, b.ln2_mean, b.ln2_rstd, b.res2, p.F(kLn2Weight), p.F(kLn2Bias), n, C);
  LinearForward(Fp32(b.fc_out, 4 * nc), b.ln2, p.W(kFcWeight), p.F(kFcBias), n, C, 4 * C);
  GeluForward(b.gelu, b.fc_out, 4 * nc);
  if (!through_output) return;
  LinearForward(Fp32(b.out, nc), b.gelu, p.W(kMlpProjWeight), p.F(kMlpProjBias), n, 4 * C, C);
  ResidualForward(b.out, b.out, b.res2, nc);
}

absl::Status GptModel::BlockBackward(int layer, ConstDtypeSpan params, const GradsOut& g,
                                     GradWrite write) {
  const int unit = layer + 1;
  // The backward's parameters may be a new gather: prepare them again (once
  // for the recomputation and the backward).
  FSDP_ASSIGN_OR_RETURN(const UnitParams p, PrepareParams(unit, params));
  if (IsCheckpointedBlock(config_, layer)) {
    FSDP_RETURN_IF_ERROR(AllocateBlockActivations(layer, /*with_output=*/false));
    BlockForwardCompute(layer, p, /*through_output=*/false);
  }
  if (g.exact_sums.empty()) {
    BlockBackwardRows(layer, p, g, write, Seqs{0, batch_}, /*fresh_copy=*/false);
  } else {
    ForEachSequenceIntoExactSums(unit, g, [&](Seqs r) {
      BlockBackwardRows(layer, p, g, GradWrite::kOverwrite, r, /*fresh_copy=*/true);
    });
  }
  RoundGradsExcept(g, {kQkvWeight, kAttnProjWeight, kFcWeight, kMlpProjWeight});
  blocks_[layer] = BlockActivations();
  return absl::OkStatus();
}

void GptModel::ForEachSequenceIntoExactSums(int unit, const GradsOut& g,
                                            absl::FunctionRef<void(Seqs)> backward) {
  for (int s = 0; s < batch_; ++s) {
    ZeroAddedGrads(unit, g);  // in the scratch: the layers that add start from 0
    backward(Seqs{s, 1});
    AddToUnitExactSums(units_[unit], g.fp32, g.exact_sums, g.exact);
  }
}

// The workspace (d_narrow_, d_wide1_, dout_copy_) holds sequences r from its
// start; d_residual_ and the activations are (B, T, ...) and hold them at
// row r.first * T.
void GptModel::BlockBackwardRows(int layer, const UnitParams& p, const GradsOut& g,
                                 GradWrite write, Seqs r, bool fresh_copy) {
  const BlockRows b = RowsOf(layer, r);
  const int n = b.n;
  const int64_t nc = b.nc;
  const int C = config_.d_model;
  const GradWrite fresh = GradWrite::kOverwrite;
  float* dres = b.d_residual;  // enters as d(out)
  // The products read dres through its compute copy: in bf16 its rounding,
  // which the unit above (units run backward in order, fsdp/nn/unit_order.h)
  // wrote in the LayerNorm backward that wrote d(out), the head's ln_f or the
  // block above's LN1; one sequence at a time it is rounded here (the same
  // bits: that LayerNorm backward rounds the same fp32 sums).
  if (fresh_copy) ComputeCopy(dout_copy_.span(), dres, nc);
  const DtypeSpan dres_copy = CopyOf(dres, nc);

  // out = res2 + mlp_proj(gelu): the residual passes dres through to res2 by
  // leaving it in place; the projection branch reads it.
  LinearBackward(d_wide1_.data(), g.Product(kMlpProjWeight), g.F(kMlpProjBias), dres, dres_copy,
                 b.gelu, p.W(kMlpProjWeight), n, 4 * C, C, fresh, write);
  // d(fc_out) in the compute dtype and the fc bias gradient (in bf16 in one
  // pass: its fp32 values exist only block by block).
  const DtypeSpan dfc = dout_copy_.span().subspan(0, 4 * nc);
  GeluBackwardWithBiasGradient(dfc, g.F(kFcBias), b.fc_out, d_wide1_.data(), n, 4 * C, write);
  LinearBackward(d_narrow_.data(), g.Product(kFcWeight), /*dbias=*/nullptr, nullptr, dfc, b.ln2,
                 p.W(kFcWeight), n, C, 4 * C, fresh, write);
  // dres becomes d(res2), and its compute copy with it.
  LayerNormBackward(dres, dres_copy, g.F(kLn2Weight), g.F(kLn2Bias), d_narrow_.data(), b.res2,
                    p.F(kLn2Weight), b.ln2_mean, b.ln2_rstd, n, C);
  // res2 = x + attn_proj(att).
  LinearBackward(d_narrow_.data(), g.Product(kAttnProjWeight), g.F(kAttnProjBias), dres,
                 dres_copy, b.att, p.W(kAttnProjWeight), n, C, C, fresh, write);
  const ConstDtypeSpan datt = ComputeCopy(dout_copy_.span(), d_narrow_.data(), nc);
  if (config_.flash_attention) {
    Zero(d_wide1_, 3 * nc);  // the blocked backward adds into dqkv; the standard one writes it
    FlashAttentionBackward(d_wide1_.data(), attention_scratch_.data(), probs_bf16_.data(), datt,
                           b.qkv, b.att, b.lse, r.count, seq_, C, config_.heads, attention_.slots);
  } else {
    AttentionBackward(d_wide1_.data(), attention_scratch_.data(), probs_bf16_.data(), datt, b.qkv,
                      b.att_probs, r.count, seq_, C, config_.heads, attention_.slots);
  }
  const ConstDtypeSpan dqkv = BiasGradientAndComputeCopy(g.F(kQkvBias), dout_copy_.span(),
                                                         d_wide1_.data(), n, 3 * C, write);
  LinearBackward(d_narrow_.data(), g.Product(kQkvWeight), /*dbias=*/nullptr, nullptr, dqkv,
                 b.ln1, p.W(kQkvWeight), n, C, 3 * C, fresh, write);
  // dres becomes d(x), the gradient for the unit before; its compute copy
  // only if that unit starts with a product (a block, not the embedding).
  LayerNormBackward(dres, layer > 0 ? dres_copy : Fp32(dres, nc), g.F(kLn1Weight),
                    g.F(kLn1Bias), d_narrow_.data(), b.x, p.F(kLn1Weight), b.ln1_mean,
                    b.ln1_rstd, n, C);
}

// ---------------------------------------------------------------- head

absl::Status GptModel::HeadForward(ConstDtypeSpan params, const Batch& batch) {
  const int unit = num_units() - 1;
  FSDP_RETURN_IF_ERROR(ValidateBatch(batch, micro_batch_, config_.seq_len, config_.vocab));
  FSDP_ASSIGN_OR_RETURN(const UnitParams p, PrepareParams(unit, params));
  const int n = batch_ * seq_;
  const int C = config_.d_model;
  const int V = config_.vocab;
  HeadActivations& a = head_;
  FSDP_ASSIGN_OR_RETURN(a.lnf, ComputeActivation(int64_t{n} * C, "lnf_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.lnf_mean, Activation(n, "lnf_mean", unit));
  FSDP_ASSIGN_OR_RETURN(a.lnf_rstd, Activation(n, "lnf_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.probs, Activation(int64_t{n} * V, "probs", unit));
  FSDP_ASSIGN_OR_RETURN(a.targets, SaveTokens(*tracker_, batch.targets, n, "head targets"));

  sequence_losses_.clear();
  ForEachProductRange([&](Seqs r) {
    const int rows = r.count * seq_;
    const int64_t row0 = int64_t{r.first} * seq_;
    const DtypeSpan lnf = a.lnf.span().subspan(row0 * C, int64_t{rows} * C);
    float* logits = a.probs.data() + row0 * V;
    LayerNormForward(lnf, a.lnf_mean.data() + row0, a.lnf_rstd.data() + row0,
                     UnitInput(unit) + row0 * C, p.F(kLnfWeight), p.F(kLnfBias), rows, C);
    LinearForward(Fp32(logits, int64_t{rows} * V), lnf, p.W(kLmHeadWeight), nullptr, rows, C, V);
    const float loss = CrossEntropyForward(logits, a.targets.data() + row0, rows, V);
    if (config_.per_sequence_products) {
      sequence_losses_.push_back(loss);
    } else {
      loss_ = loss;
    }
  });
  if (config_.per_sequence_products) {
    // The mean over the micro-batch's tokens (every sequence has T): for
    // reporting; the exact loss sums sequence_losses_ instead.
    double total = 0.0;
    for (float l : sequence_losses_) total += l;
    loss_ = static_cast<float>(total / batch_);
  }
  return absl::OkStatus();
}

absl::Status GptModel::HeadBackward(ConstDtypeSpan params, const GradsOut& g, float loss_scale,
                                    GradWrite write) {
  const int unit = num_units() - 1;
  // The parameters may live elsewhere than in the forward.
  FSDP_ASSIGN_OR_RETURN(const UnitParams p, PrepareParams(unit, params));
  if (g.exact_sums.empty()) {
    HeadBackwardRows(p, g, loss_scale, write, Seqs{0, batch_});
  } else {
    // Each sequence's contribution is the gradient of loss_scale times the
    // SUM of its token losses: CrossEntropyBackward divides by the rows.
    const float sum_scale = loss_scale * static_cast<float>(seq_);
    ForEachSequenceIntoExactSums(unit, g, [&](Seqs r) {
      HeadBackwardRows(p, g, sum_scale, GradWrite::kOverwrite, r);
    });
  }
  RoundGradsExcept(g, {kLmHeadWeight});
  head_ = HeadActivations();
  return absl::OkStatus();
}

void GptModel::HeadBackwardRows(const UnitParams& p, const GradsOut& g, float loss_scale,
                                GradWrite write, Seqs r) {
  const int unit = num_units() - 1;
  const int n = r.count * seq_;
  const int C = config_.d_model;
  const int V = config_.vocab;
  const int64_t nc = int64_t{n} * C;
  const int64_t row0 = int64_t{r.first} * seq_;
  HeadActivations& a = head_;
  // In bf16, dlogits are rounded in place, row by row as they are computed
  // (the head has no bias, so the fp32 copy is not needed again).
  const ConstDtypeSpan dlogits = CrossEntropyBackward(
      compute_dtype_, a.probs.data() + row0 * V, a.targets.data() + row0, n, V, loss_scale);
  LinearBackward(d_narrow_.data(), g.Product(kLmHeadWeight), nullptr, nullptr, dlogits,
                 a.lnf.span().subspan(row0 * C, nc), p.W(kLmHeadWeight), n, C, V,
                 GradWrite::kOverwrite, write);
  float* dres = d_residual_.data() + row0 * C;
  std::fill(dres, dres + nc, 0.0f);
  // The compute copy of d(out) only if the last block starts with a product
  // and reads it from here (one sequence at a time it rounds its own).
  const bool copy = config_.layers > 0 && !config_.per_sequence_products;
  LayerNormBackward(dres, copy ? CopyOf(dres, nc) : Fp32(dres, nc), g.F(kLnfWeight),
                    g.F(kLnfBias), d_narrow_.data(), UnitInput(unit) + row0 * C,
                    p.F(kLnfWeight), a.lnf_mean.data() + row0, a.lnf_rstd.data() + row0, n, C);
}

}  // namespace fsdp
