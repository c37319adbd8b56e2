// File: fsdp/nn/llama_model.cc
//
// One block, forward (x = residual stream in, all B*T rows at once;
// C = d_model, F = ffn_hidden):
//   rms1 = RMSNorm(x); proj = rms1 [Wq; Wk; Wv]^T            (fp32, workspace)
//   qkv = RotaryQkv(proj)   q, k rotated, kv heads repeated   (fsdp/nn/grouped_query.h)
//   att = Attention(qkv); res2 = x + att Wo^T
//   rms2 = RMSNorm(res2); gate_up = rms2 [Wgate; Wup]^T; h = SwiGLU(gate_up)
//   out = res2 + h Wdown^T
// written once over the compute dtype with the layers of
// fsdp/nn/dtype_layers.h and the Llama's own (rms_norm.h, swiglu.h, ...).
// Backward keeps one gradient of the residual stream, d_residual_, and adds
// into it in place, as GptModel does: d(out), then d(res2) once the second
// RMSNorm's backward has added its share, then d(x).
#include "fsdp/nn/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/attention.h"
#include "fsdp/nn/attention_layout.h"
#include "fsdp/nn/batch_checks.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/decoder_steps.h"
#include "fsdp/nn/dtype_layers.h"
#include "fsdp/nn/exact_grads.h"
#include "fsdp/nn/flash_attention.h"
#include "fsdp/nn/init_rng.h"
#include "fsdp/nn/residual.h"
#include "fsdp/nn/rms_norm.h"
#include "fsdp/nn/rotary.h"
#include "fsdp/nn/swiglu.h"
#include "fsdp/nn/token_embedding.h"

namespace fsdp {
namespace {

// Parameter indices inside a block unit (LlamaUnitSpecs order).
enum BlockParam { kInputNorm, kQ, kK, kV, kO, kPostNorm, kGate, kUp, kDown };
enum HeadParam { kFinalNorm, kLmHead };

bool IsBf16(comm::Dtype dtype) { return dtype == comm::Dtype::kBFloat16; }

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const LlamaConfig& config,
                                                               int micro_batch,
                                                               MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateLlamaConfig(config));
  FSDP_RETURN_IF_ERROR(CheckCreateArguments(micro_batch, tracker, "LlamaModel"));
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, micro_batch, tracker));
  FSDP_RETURN_IF_ERROR(model->AllocateWorkspace());
  return model;
}

LlamaModel::LlamaModel(const LlamaConfig& config, int micro_batch, MemoryTracker* tracker)
    : config_(config),
      micro_batch_(micro_batch),
      tracker_(tracker),
      units_(LlamaUnitSpecs(config)),
      order_(static_cast<int>(units_.size())),
      blocks_(config.layers) {}

GroupedQueryShape LlamaModel::AttentionShape() const {
  return {batch_, seq_, config_.heads, config_.kv_heads, config_.d_model / config_.heads};
}

LlamaModel::BlockDims LlamaModel::Dims() const {
  const GroupedQueryShape attention = AttentionShape();
  const int n = batch_ * seq_;
  return {n, config_.d_model, config_.ffn_hidden, config_.heads, int64_t{n} * config_.d_model,
          attention, static_cast<int>(attention.proj_width())};
}

absl::Status LlamaModel::AllocateWorkspace() {
  const int T = config_.seq_len;
  const int hs = config_.d_model / config_.heads;
  const int64_t bt = int64_t{micro_batch_} * T;
  const int64_t C = config_.d_model, F = config_.ffn_hidden;
  const int64_t proj_width = int64_t{config_.heads + 2 * config_.kv_heads} * hs;
  const int64_t wide = std::max(2 * F, 3 * C);
  const bool bf16 = IsBf16(config_.compute_dtype);
  attention_ = AttentionScratchOf(config_.flash_attention, bf16, T, hs, config_.compute_threads);
  MemoryTracker& tracker = *tracker_;
  const MemoryCategory ws = MemoryCategory::kWorkspace;
  FSDP_ASSIGN_OR_RETURN(rope_table_,
                        tracker.Allocate<float>(ws, RotaryTableFloats(T, hs), "llama rope table"));
  FillRotaryTable(rope_table_.data(), T, hs, config_.rope_theta);
  FSDP_ASSIGN_OR_RETURN(d_residual_, tracker.Allocate<float>(ws, bt * C, "llama d_residual"));
  FSDP_ASSIGN_OR_RETURN(d_narrow_, tracker.Allocate<float>(ws, bt * C, "llama d_narrow"));
  FSDP_ASSIGN_OR_RETURN(d_hidden_, tracker.Allocate<float>(ws, bt * F, "llama d_hidden"));
  FSDP_ASSIGN_OR_RETURN(d_wide_, tracker.Allocate<float>(ws, bt * wide, "llama d_wide"));
  FSDP_ASSIGN_OR_RETURN(proj_, tracker.Allocate<float>(ws, bt * proj_width, "llama qkv proj"));
  FSDP_ASSIGN_OR_RETURN(attention_scratch_,
                        tracker.Allocate<float>(ws, attention_.floats, "llama attention scratch"));
  if (config_.tie_embeddings) {
    const int64_t vc = int64_t{config_.vocab} * C;
    FSDP_ASSIGN_OR_RETURN(tied_weight_, DtypeBuffer::Allocate(tracker, ws, config_.compute_dtype,
                                                              vc, "llama tied embedding"));
    FSDP_ASSIGN_OR_RETURN(tied_grad_, tracker.Allocate<float>(ws, vc, "llama tied head grad"));
  }
  if (!bf16) return absl::OkStatus();
  FSDP_ASSIGN_OR_RETURN(dout_copy_, DtypeBuffer::Allocate(tracker, ws, comm::Dtype::kBFloat16,
                                                          bt * wide, "llama dout bf16"));
  int64_t max_unit = 0, max_small = 0;
  for (const UnitSpec& u : units_) {
    max_unit = std::max(max_unit, u.numel());
    int64_t small = 0;
    for (const ParamSpec& p : u.params) small += p.shape.size() == 1 ? p.numel() : 0;
    max_small = std::max(max_small, small);
  }
  if (IsBf16(config_.param_dtype)) {
    FSDP_ASSIGN_OR_RETURN(small_params_,
                          tracker.Allocate<float>(ws, max_small, "llama 1-D params fp32"));
  } else {
    FSDP_ASSIGN_OR_RETURN(params_bf16_,
                          tracker.Allocate<uint16_t>(ws, max_unit, "llama params bf16"));
  }
  FSDP_ASSIGN_OR_RETURN(probs_bf16_, tracker.Allocate<uint16_t>(ws, attention_.bf16_elements,
                                                                "llama attention bf16"));
  return absl::OkStatus();
}

absl::StatusOr<FloatBuffer> LlamaModel::Activation(int64_t numel, const char* what, int unit) {
  // Uninitialized: the forward that saves an activation writes all of it.
  return tracker_->AllocateUninitialized<float>(MemoryCategory::kActivations, numel,
                                                absl::StrCat(units_[unit].name, " ", what));
}

absl::StatusOr<DtypeBuffer> LlamaModel::ComputeActivation(int64_t numel, const char* what,
                                                          int unit) {
  return DtypeBuffer::AllocateUninitialized(*tracker_, MemoryCategory::kActivations,
                                            config_.compute_dtype, numel,
                                            absl::StrCat(units_[unit].name, " ", what));
}

absl::StatusOr<UnitOperands> LlamaModel::Operands(int unit, ConstDtypeSpan params) {
  return PrepareUnitOperands(units_[unit], params, config_.param_dtype, config_.compute_dtype,
                             {params_bf16_.span(), small_params_.span()});
}

DtypeSpan LlamaModel::CopyScratch() {
  if (!IsBf16(config_.compute_dtype)) return Fp32(static_cast<float*>(nullptr), 0);
  return dout_copy_.span();
}

DtypeSpan LlamaModel::CopyOf(float* fp32, int64_t numel) {
  if (!IsBf16(config_.compute_dtype)) return Fp32(fp32, numel);
  return dout_copy_.span().subspan(0, numel);
}

ConstDtypeSpan LlamaModel::HeadWeight(const UnitOperands& p) const {
  if (config_.tie_embeddings) return tied_weight_.span();
  return p.W(kLmHead);
}

const float* LlamaModel::UnitInput(int unit) const {
  return unit == 1 ? embedding_out_.data() : blocks_[unit - 2].out.data();
}

void LlamaModel::InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const {
  FSDP_CHECK(unit >= 0 && unit < num_units());
  FSDP_CHECK(static_cast<int64_t>(params.size()) == units_[unit].numel());
  int64_t offset = 0;
  const std::vector<ParamSpec>& specs = units_[unit].params;
  for (int p = 0; p < static_cast<int>(specs.size()); ++p) {
    absl::Span<float> out = params.subspan(offset, specs[p].numel());
    offset += specs[p].numel();
    if (specs[p].shape.size() == 1) {  // the RMSNorm weights
      std::fill(out.begin(), out.end(), 1.0f);
    } else {
      FillNormal(out, 0.02f, InitStreamKey(seed, unit, p));
    }
  }
}

absl::Status LlamaModel::ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) {
  return RunDecoderForward(order_, unit, batch,
                           {micro_batch_, config_.seq_len, config_.vocab, batch_, seq_},
                           [&] { return EmbeddingForward(params, batch); },
                           [&](int layer) { return BlockForward(layer, params); },
                           [&] { return HeadForward(params, batch); });
}

absl::Status LlamaModel::BackwardUnit(int unit, ConstDtypeSpan params, UnitGrads grads,
                                      float loss_scale, GradWrite write) {
  FSDP_RETURN_IF_ERROR(order_.CheckBackward(unit));
  FSDP_RETURN_IF_ERROR(CheckUnitGrads(grads, write, absl::StrCat("BackwardUnit(", unit, ")"),
                                      static_cast<int>(units_[unit].params.size())));
  FSDP_ASSIGN_OR_RETURN(const UnitGradTargets g,
                        PrepareUnitGradTargets(units_[unit], grads, config_.compute_dtype));
  const bool exact = !g.exact_sums.empty();
  if (exact != config_.per_sequence_products) {
    return absl::InvalidArgumentError(
        absl::StrCat(units_[unit].name, " gradients: ", comm::DtypeName(grads.values.dtype()),
                     " gradients, but this model ",
                     config_.per_sequence_products
                         ? "computes per sequence and writes exact (int64) gradient sums only"
                         : "computes over whole micro-batches: exact (int64) gradients need "
                           "LlamaConfig::per_sequence_products (docs/exact.md)"));
  }
  if (exact && write == GradWrite::kOverwrite) {  // the sums are only added into
    std::fill(g.exact_sums.begin(), g.exact_sums.end(), int64_t{0});
  }
  const bool zero = write == GradWrite::kOverwrite && !exact;
  const int last = num_units() - 1;
  if (unit == last) {
    if (zero) g.Zero({kFinalNorm});
    FSDP_RETURN_IF_ERROR(HeadBackward(params, g, loss_scale, write));
  } else if (unit == 0) {
    if (zero) g.Zero({0});  // rows are scattered by adding
    EmbeddingBackward(g);
  } else {
    if (zero) g.Zero({kInputNorm, kPostNorm});
    FSDP_RETURN_IF_ERROR(BlockBackward(unit - 1, params, g, write));
  }
  order_.BackwardDone(unit);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- embedding

absl::Status LlamaModel::EmbeddingForward(ConstDtypeSpan params, const Batch& batch) {
  // A new step: drop whatever an unfinished one saved.
  tokens_.Reset();
  embedding_out_.Reset();
  for (BlockActivations& block : blocks_) block = BlockActivations();
  head_ = HeadActivations();

  FSDP_RETURN_IF_ERROR(CheckUnitParams(params, config_.param_dtype, units_[0]));
  batch_ = batch.batch_size;
  seq_ = batch.seq_len;
  const int64_t bt = int64_t{batch_} * seq_;
  FSDP_ASSIGN_OR_RETURN(tokens_, SaveTokens(*tracker_, batch.inputs, bt, "embedding tokens"));
  FSDP_ASSIGN_OR_RETURN(embedding_out_, Activation(bt * config_.d_model, "output", 0));
  TokenEmbeddingForward(embedding_out_.data(), tokens_.data(), params, bt, config_.d_model);
  if (config_.tie_embeddings) {  // the head's weight, as its product reads it
    FSDP_ASSIGN_OR_RETURN(const UnitOperands p, Operands(0, params));
    const ConstDtypeSpan weight = p.W(0);
    std::memcpy(tied_weight_.span().bytes().data(), weight.bytes().data(), weight.bytes().size());
  }
  return absl::OkStatus();
}

void LlamaModel::EmbeddingBackward(const UnitGradTargets& g) {
  if (!g.exact_sums.empty()) {  // every token's row its own contribution
    AddTokenRowsToExactSums(g.exact_sums, g.exact.exponents[0], &g.exact.max_abs[0],
                            d_residual_.data(), tokens_.data(), int64_t{batch_} * seq_,
                            config_.d_model);
    tokens_.Reset();
    embedding_out_.Reset();
    return;
  }
  TokenEmbeddingBackward(g.F(0), d_residual_.data(), tokens_.data(), int64_t{batch_} * seq_,
                         config_.d_model);
  if (config_.tie_embeddings) {  // the head's share, after the rows
    float* dw = g.F(0);
    const float* head = tied_grad_.data();
    for (int64_t i = 0; i < tied_grad_.size(); ++i) dw[i] += head[i];
  }
  g.RoundAllExcept({});
  tokens_.Reset();
  embedding_out_.Reset();
}

// ---------------------------------------------------------------- block

// What a block's forward saves, in forward order (the tracker's peak follows
// it).
absl::Status LlamaModel::AllocateBlockActivations(int layer, bool with_output) {
  const int unit = layer + 1;
  const int n = batch_ * seq_;
  const int64_t nc = int64_t{n} * config_.d_model;
  const int64_t nf = int64_t{n} * config_.ffn_hidden;
  const int64_t bh = int64_t{batch_} * config_.heads;
  BlockActivations& a = blocks_[layer];
  FSDP_ASSIGN_OR_RETURN(a.rms1, ComputeActivation(nc, "rms1_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.rms1_rstd, Activation(n, "rms1_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.qkv, ComputeActivation(3 * nc, "qkv", unit));
  if (config_.flash_attention) {
    FSDP_ASSIGN_OR_RETURN(a.lse, Activation(bh * seq_, "att_lse", unit));
  } else {
    FSDP_ASSIGN_OR_RETURN(a.att_probs, ComputeActivation(bh * seq_ * seq_, "att_probs", unit));
  }
  FSDP_ASSIGN_OR_RETURN(a.att, ComputeActivation(nc, "att_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.res2, Activation(nc, "res2", unit));
  FSDP_ASSIGN_OR_RETURN(a.rms2, ComputeActivation(nc, "rms2_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.rms2_rstd, Activation(n, "rms2_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.gate_up, Activation(2 * nf, "gate_up", unit));
  FSDP_ASSIGN_OR_RETURN(a.hidden, ComputeActivation(nf, "swiglu_out", unit));
  if (with_output) {
    FSDP_ASSIGN_OR_RETURN(a.out, Activation(nc, "out", unit));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::BlockForward(int layer, ConstDtypeSpan params) {
  FSDP_ASSIGN_OR_RETURN(const UnitOperands p, Operands(layer + 1, params));
  return RunBlockForward(
      blocks_[layer], IsCheckpointedLlamaBlock(config_, layer),
      [&] { return Activation(int64_t{batch_} * seq_ * config_.d_model, "out", layer + 1); },
      [&](bool with_output) { return AllocateBlockActivations(layer, with_output); },
      [&] { BlockForwardCompute(layer, p, /*through_output=*/true); });
}

void LlamaModel::BlockForwardCompute(int layer, const UnitOperands& p, bool through_output) {
  const auto [n, C, F, H, nc, shape, proj_width] = Dims();
  BlockActivations& a = blocks_[layer];
  const float* x = UnitInput(layer + 1);
  RmsNormForward(a.rms1.span(), a.rms1_rstd.data(), x, p.F(kInputNorm), n, C, config_.norm_eps);
  Product(Fp32(proj_.data(), n * shape.proj_width()), a.rms1.span(), p.W(kQ, 3), C, proj_width);
  RotaryQkvForward(a.qkv.span(), proj_.data(), rope_table_.data(), config_.seq_len, shape);
  if (config_.flash_attention) {
    FlashAttentionForward(a.att.span(), a.lse.data(), attention_scratch_.data(), probs_bf16_.data(),
                          a.qkv.span(), batch_, seq_, C, H, attention_.slots);
  } else {
    AttentionForward(a.att.span(), a.att_probs.span(), attention_scratch_.data(),
                     probs_bf16_.data(), a.qkv.span(), batch_, seq_, C, H, attention_.slots);
  }
  Product(Fp32(a.res2.data(), nc), a.att.span(), p.W(kO), C, C);
  ResidualForward(a.res2.data(), a.res2.data(), x, nc);
  RmsNormForward(a.rms2.span(), a.rms2_rstd.data(), a.res2.data(), p.F(kPostNorm), n, C,
                 config_.norm_eps);
  Product(Fp32(a.gate_up.data(), 2 * int64_t{n} * F), a.rms2.span(), p.W(kGate, 2), C, 2 * F);
  SwigluForward(a.hidden.span(), a.gate_up.data(), n, F);
  if (!through_output) return;
  Product(Fp32(a.out.data(), nc), a.hidden.span(), p.W(kDown), F, C);
  ResidualForward(a.out.data(), a.out.data(), a.res2.data(), nc);
}

absl::Status LlamaModel::BlockBackward(int layer, ConstDtypeSpan params,
                                       const UnitGradTargets& g, GradWrite write) {
  const int unit = layer + 1;
  // The backward's parameters may be a new gather: prepare them again (once
  // for the recomputation and the backward).
  FSDP_ASSIGN_OR_RETURN(const UnitOperands p, Operands(unit, params));
  if (IsCheckpointedLlamaBlock(config_, layer)) {
    FSDP_RETURN_IF_ERROR(AllocateBlockActivations(layer, /*with_output=*/false));
    BlockForwardCompute(layer, p, /*through_output=*/false);
  }
  if (g.exact_sums.empty()) {
    BlockBackwardRows(layer, p, g, write, Seqs{0, batch_}, /*fresh_copy=*/false);
  } else {
    ForEachSequenceIntoExactSums(unit, g, [&](Seqs r) {
      g.Zero({kInputNorm, kPostNorm});  // the RMSNorm weights' gradients are added into
      BlockBackwardRows(layer, p, g, GradWrite::kOverwrite, r, /*fresh_copy=*/true);
    });
  }
  g.RoundAllExcept({kQ, kK, kV, kO, kGate, kUp, kDown});
  blocks_[layer] = BlockActivations();
  return absl::OkStatus();
}

void LlamaModel::BlockBackwardRows(int layer, const UnitOperands& p, const UnitGradTargets& g,
                                   GradWrite write, Seqs r, bool fresh_copy) {
  const int unit = layer + 1;
  const auto [all_rows, C, F, H, all_nc, all_shape, proj_width] = Dims();
  const int n = r.count * seq_;
  const int64_t nc = int64_t{n} * C;
  const int64_t row0 = int64_t{r.first} * seq_;
  const int64_t at = row0 * C;
  const int64_t head_rows = int64_t{r.first} * H * seq_;
  const GroupedQueryShape shape{r.count, seq_, config_.heads, config_.kv_heads, C / H};
  BlockActivations& a = blocks_[layer];
  const ConstDtypeSpan rms1 = a.rms1.span().subspan(at, nc);
  const ConstDtypeSpan qkv = a.qkv.span().subspan(3 * at, 3 * nc);
  const ConstDtypeSpan att = a.att.span().subspan(at, nc);
  const ConstDtypeSpan rms2 = a.rms2.span().subspan(at, nc);
  const ConstDtypeSpan hidden = a.hidden.span().subspan(row0 * F, int64_t{n} * F);
  const float* gate_up = a.gate_up.data() + row0 * 2 * F;
  const float* res2 = a.res2.data() + at;
  const GradWrite fresh = GradWrite::kOverwrite;
  float* dres = d_residual_.data() + at;  // enters as d(out)
  // In bf16 its rounding, written by the unit above's RMSNorm backward, or
  // here for one sequence at a time (the same bits: the same fp32 values
  // rounded).
  if (fresh_copy) ComputeCopy(CopyScratch(), dres, nc);
  const DtypeSpan dres_copy = CopyOf(dres, nc);

  // out = res2 + down(h): dres passes through to res2 in place.
  LinearBackward(d_hidden_.data(), g.Product(kDown), nullptr, nullptr, dres_copy, hidden,
                 p.W(kDown), n, F, C, fresh, write);
  SwigluBackward(d_wide_.data(), d_hidden_.data(), gate_up, n, F);
  const ConstDtypeSpan dgate_up = ComputeCopy(CopyScratch(), d_wide_.data(), 2 * int64_t{n} * F);
  LinearBackward(d_narrow_.data(), g.Product(kGate, 2), nullptr, nullptr, dgate_up, rms2,
                 p.W(kGate, 2), n, C, 2 * F, fresh, write);
  // dres becomes d(res2), and its compute copy with it.
  RmsNormBackward(dres, dres_copy, g.F(kPostNorm), d_narrow_.data(), res2, p.F(kPostNorm),
                  a.rms2_rstd.data() + row0, n, C);
  // res2 = x + o_proj(att).
  LinearBackward(d_narrow_.data(), g.Product(kO), nullptr, nullptr, dres_copy, att, p.W(kO), n, C,
                 C, fresh, write);
  const ConstDtypeSpan datt = ComputeCopy(CopyScratch(), d_narrow_.data(), nc);
  if (config_.flash_attention) {
    // The blocked backward adds into dqkv; the standard one writes it.
    std::fill(d_wide_.data(), d_wide_.data() + 3 * nc, 0.0f);
    FlashAttentionBackward(d_wide_.data(), attention_scratch_.data(), probs_bf16_.data(), datt, qkv,
                           att, a.lse.data() + head_rows, r.count, seq_, C, H, attention_.slots);
  } else {
    const ConstDtypeSpan probs =
        a.att_probs.span().subspan(head_rows * seq_, int64_t{r.count} * H * seq_ * seq_);
    AttentionBackward(d_wide_.data(), attention_scratch_.data(), probs_bf16_.data(), datt, qkv,
                      probs, r.count, seq_, C, H, attention_.slots);
  }
  RotaryQkvBackward(proj_.data(), d_wide_.data(), rope_table_.data(), config_.seq_len, shape);
  const ConstDtypeSpan dproj = ComputeCopy(CopyScratch(), proj_.data(), n * shape.proj_width());
  LinearBackward(d_narrow_.data(), g.Product(kQ, 3), nullptr, nullptr, dproj, rms1, p.W(kQ, 3), n,
                 C, proj_width, fresh, write);
  // dres becomes d(x); its compute copy only if the unit before starts with
  // a product (a block, not the embedding) and reads it from here.
  const bool copy = layer > 0 && !fresh_copy;
  RmsNormBackward(dres, copy ? dres_copy : Fp32(dres, nc), g.F(kInputNorm), d_narrow_.data(),
                  UnitInput(unit) + at, p.F(kInputNorm), a.rms1_rstd.data() + row0, n, C);
}

void LlamaModel::ForEachSequenceIntoExactSums(int unit, const UnitGradTargets& g,
                                              absl::FunctionRef<void(Seqs)> backward) {
  for (int s = 0; s < batch_; ++s) {
    backward(Seqs{s, 1});
    AddToUnitExactSums(units_[unit], g.fp32, g.exact_sums, g.exact);
  }
}

void LlamaModel::Product(DtypeSpan out, ConstDtypeSpan in, ConstDtypeSpan weight, int in_features,
                         int out_features) {
  LinearForwardInCalls(out, in, weight, nullptr, batch_ * seq_,
                       config_.per_sequence_products ? batch_ : 1, in_features, out_features);
}

// ---------------------------------------------------------------- head

absl::Status LlamaModel::HeadForward(ConstDtypeSpan params, const Batch& batch) {
  const int unit = num_units() - 1;
  // The targets are read here: checked again (unit 0 checked the inputs).
  FSDP_RETURN_IF_ERROR(ValidateBatch(batch, micro_batch_, config_.seq_len, config_.vocab));
  FSDP_ASSIGN_OR_RETURN(const UnitOperands p, Operands(unit, params));
  const int n = batch_ * seq_;
  const int C = config_.d_model, V = config_.vocab;
  HeadActivations& a = head_;
  FSDP_ASSIGN_OR_RETURN(a.rmsf, ComputeActivation(int64_t{n} * C, "norm_out", unit));
  FSDP_ASSIGN_OR_RETURN(a.rmsf_rstd, Activation(n, "norm_rstd", unit));
  FSDP_ASSIGN_OR_RETURN(a.probs, Activation(int64_t{n} * V, "probs", unit));
  FSDP_ASSIGN_OR_RETURN(a.targets, SaveTokens(*tracker_, batch.targets, n, "head targets"));

  RmsNormForward(a.rmsf.span(), a.rmsf_rstd.data(), UnitInput(unit), p.F(kFinalNorm), n, C,
                 config_.norm_eps);
  // One product and loss per sequence under per_sequence_products: what the
  // exact loss sums is each sequence's mean.
  const int calls = config_.per_sequence_products ? batch_ : 1;
  const int rows = n / calls;
  sequence_losses_.clear();
  double total = 0.0;
  for (int c = 0; c < calls; ++c) {
    const int64_t row0 = int64_t{c} * rows;
    float* logits = a.probs.data() + row0 * V;
    LinearForward(Fp32(logits, int64_t{rows} * V),
                  a.rmsf.span().subspan(row0 * C, int64_t{rows} * C), HeadWeight(p), nullptr, rows,
                  C, V);
    loss_ = CrossEntropyForward(logits, a.targets.data() + row0, rows, V);
    if (config_.per_sequence_products) {
      sequence_losses_.push_back(loss_);
      total += loss_;
    }
  }
  // The mean over the micro-batch's tokens (every sequence has T).
  if (config_.per_sequence_products) loss_ = static_cast<float>(total / batch_);
  return absl::OkStatus();
}

absl::Status LlamaModel::HeadBackward(ConstDtypeSpan params, const UnitGradTargets& g,
                                      float loss_scale, GradWrite write) {
  const int unit = num_units() - 1;
  FSDP_ASSIGN_OR_RETURN(const UnitOperands p, Operands(unit, params));
  if (g.exact_sums.empty()) {
    HeadBackwardRows(p, g, loss_scale, write, Seqs{0, batch_});
  } else {
    // Each sequence's contribution is the gradient of loss_scale times the
    // SUM of its token losses: CrossEntropyBackward divides by the rows.
    const float sum_scale = loss_scale * static_cast<float>(seq_);
    ForEachSequenceIntoExactSums(unit, g, [&](Seqs r) {
      g.Zero({kFinalNorm});
      HeadBackwardRows(p, g, sum_scale, GradWrite::kOverwrite, r);
    });
  }
  if (config_.tie_embeddings) {
    g.RoundAllExcept({});
  } else {
    g.RoundAllExcept({kLmHead});
  }
  head_ = HeadActivations();
  return absl::OkStatus();
}

void LlamaModel::HeadBackwardRows(const UnitOperands& p, const UnitGradTargets& g, float loss_scale,
                                  GradWrite write, Seqs r) {
  const int unit = num_units() - 1;
  const int n = r.count * seq_;
  const int C = config_.d_model, V = config_.vocab;
  const int64_t nc = int64_t{n} * C;
  const int64_t row0 = int64_t{r.first} * seq_;
  HeadActivations& a = head_;
  const ConstDtypeSpan rmsf = a.rmsf.span().subspan(row0 * C, nc);
  const ConstDtypeSpan dlogits = CrossEntropyBackward(
      config_.compute_dtype, a.probs.data() + row0 * V, a.targets.data() + row0, n, V, loss_scale);
  if (config_.tie_embeddings) {  // the embedding's backward adds it in (never exact)
    LinearBackward(d_narrow_.data(), tied_grad_.span(), nullptr, nullptr, dlogits, rmsf,
                   tied_weight_.span(), n, C, V, GradWrite::kOverwrite, GradWrite::kOverwrite);
  } else {
    LinearBackward(d_narrow_.data(), g.Product(kLmHead), nullptr, nullptr, dlogits, rmsf,
                   p.W(kLmHead), n, C, V, GradWrite::kOverwrite, write);
  }
  float* dres = d_residual_.data() + row0 * C;
  std::fill(dres, dres + nc, 0.0f);
  // The compute copy of d(out) only if the last block starts with a product
  // and reads it from here (one sequence at a time it rounds its own).
  const bool copy = config_.layers > 0 && !config_.per_sequence_products;
  RmsNormBackward(dres, copy ? CopyOf(dres, nc) : Fp32(dres, nc), g.F(kFinalNorm), d_narrow_.data(),
                  UnitInput(unit) + row0 * C, p.F(kFinalNorm), a.rmsf_rstd.data() + row0, n, C);
}

}  // namespace fsdp
