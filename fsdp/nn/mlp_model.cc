// File: fsdp/nn/mlp_model.cc
#include "fsdp/nn/mlp_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/batch_checks.h"
#include "fsdp/nn/decoder_steps.h"
#include "fsdp/nn/cross_entropy.h"
#include "fsdp/nn/embedding.h"
#include "fsdp/nn/gelu.h"
#include "fsdp/nn/init_rng.h"
#include "fsdp/nn/linear.h"
#include "fsdp/nn/residual.h"
#include "fsdp/nn/tensor.h"

namespace fsdp {
namespace {

enum LayerParam { kFcWeight, kFcBias, kProjWeight, kProjBias };
enum HeadParam { kHeadWeight, kHeadBias };

}  // namespace

absl::Status ValidateMlpConfig(const MlpConfig& c) {
  const struct { const char* name; int value; } fields[] = {
      {"layers", c.layers}, {"d_model", c.d_model}, {"hidden", c.hidden},
      {"vocab", c.vocab},   {"seq_len", c.seq_len},
  };
  for (const auto& f : fields) {
    if (f.value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("MLP config: ", f.name, " must be positive, got ", f.value));
    }
  }
  return absl::OkStatus();
}

std::vector<UnitSpec> MlpUnitSpecs(const MlpConfig& config) {
  const int64_t C = config.d_model, H = config.hidden, V = config.vocab, T = config.seq_len;
  std::vector<UnitSpec> units;
  units.push_back({"embedding", {{"embedding.wte", {V, C}}, {"embedding.wpe", {T, C}}}});
  for (int l = 0; l < config.layers; ++l) {
    const std::string m = absl::StrCat("mlp", l);
    units.push_back({m,
                     {{m + ".fc.weight", {H, C}},
                      {m + ".fc.bias", {H}},
                      {m + ".proj.weight", {C, H}},
                      {m + ".proj.bias", {C}}}});
  }
  units.push_back({"head", {{"head.weight", {V, C}}, {"head.bias", {V}}}});
  return units;
}

absl::StatusOr<std::unique_ptr<MlpModel>> MlpModel::Create(const MlpConfig& config,
                                                           int micro_batch,
                                                           MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateMlpConfig(config));
  FSDP_RETURN_IF_ERROR(CheckCreateArguments(micro_batch, tracker, "MlpModel"));
  std::unique_ptr<MlpModel> model(new MlpModel(config, micro_batch, tracker));
  const int64_t bt = int64_t{micro_batch} * config.seq_len;
  const MemoryCategory ws = MemoryCategory::kWorkspace;
  FSDP_ASSIGN_OR_RETURN(model->d_residual_,
                        tracker->Allocate<float>(ws, bt * config.d_model, "mlp d_residual"));
  FSDP_ASSIGN_OR_RETURN(model->d_wide1_,
                        tracker->Allocate<float>(ws, bt * config.hidden, "mlp d_wide1"));
  FSDP_ASSIGN_OR_RETURN(model->d_wide2_,
                        tracker->Allocate<float>(ws, bt * config.hidden, "mlp d_wide2"));
  return model;
}

MlpModel::MlpModel(const MlpConfig& config, int micro_batch, MemoryTracker* tracker)
    : config_(config),
      micro_batch_(micro_batch),
      tracker_(tracker),
      units_(MlpUnitSpecs(config)),
      order_(static_cast<int>(units_.size())),
      layers_(config.layers) {}

absl::StatusOr<FloatBuffer> MlpModel::Activation(int64_t numel, const char* what, int unit) {
  return tracker_->Allocate<float>(MemoryCategory::kActivations, numel,
                                   absl::StrCat(units_[unit].name, " ", what));
}

const float* MlpModel::UnitInput(int unit) const {
  return unit == 1 ? embedding_out_.data() : layers_[unit - 2].out.data();
}

void MlpModel::InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const {
  FSDP_CHECK(unit >= 0 && unit < num_units());
  FSDP_CHECK(static_cast<int64_t>(params.size()) == units_[unit].numel());
  const float proj_std = 0.02f / std::sqrt(2.0f * config_.layers);
  int64_t offset = 0;
  const std::vector<ParamSpec>& specs = units_[unit].params;
  for (int p = 0; p < static_cast<int>(specs.size()); ++p) {
    absl::Span<float> out = params.subspan(offset, specs[p].numel());
    offset += specs[p].numel();
    const std::string& name = specs[p].name;
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      std::fill(out.begin(), out.end(), 0.0f);
    } else {
      const bool is_proj = name.find("proj.weight") != std::string::npos;
      FillNormal(out, is_proj ? proj_std : 0.02f, InitStreamKey(seed, unit, p));
    }
  }
}

absl::Status MlpModel::ForwardUnit(int unit, ConstDtypeSpan tagged_params, const Batch& batch) {
  FSDP_RETURN_IF_ERROR(CheckParamDtype(tagged_params, param_dtype(), "MlpModel::ForwardUnit"));
  const absl::Span<const float> params = tagged_params.as<float>();
  FSDP_RETURN_IF_ERROR(order_.CheckForward(unit));
  if (unit != 0 && (batch.batch_size != batch_ || batch.seq_len != seq_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ForwardUnit(", unit, ") got a ", batch.batch_size, "x", batch.seq_len,
        " batch but the step started with ", batch_, "x", seq_));
  }
  FSDP_ASSIGN_OR_RETURN(std::vector<ConstTensorView> p, ViewParams(units_[unit], params));
  const int C = config_.d_model, H = config_.hidden, V = config_.vocab;
  const int last = num_units() - 1;
  if (unit == 0) {
    FSDP_RETURN_IF_ERROR(ValidateBatch(batch, micro_batch_, config_.seq_len, V));
    tokens_.Reset();
    embedding_out_.Reset();
    for (LayerActivations& layer : layers_) layer = LayerActivations();
    probs_.Reset();
    targets_.Reset();
    batch_ = batch.batch_size;
    seq_ = batch.seq_len;
    const int64_t bt = int64_t{batch_} * seq_;
    FSDP_ASSIGN_OR_RETURN(tokens_, tracker_->Allocate<int32_t>(MemoryCategory::kActivations, bt,
                                                               "embedding tokens"));
    std::memcpy(tokens_.data(), batch.inputs.data(), sizeof(int32_t) * bt);
    FSDP_ASSIGN_OR_RETURN(embedding_out_, Activation(bt * C, "output", 0));
    EmbeddingForward(embedding_out_.data(), tokens_.data(), p[0].data(), p[1].data(), batch_,
                     seq_, C);
  } else if (unit == last) {
    FSDP_RETURN_IF_ERROR(ValidateBatch(batch, micro_batch_, config_.seq_len, V));
    const int n = batch_ * seq_;
    FSDP_ASSIGN_OR_RETURN(probs_, Activation(int64_t{n} * V, "probs", unit));
    FSDP_ASSIGN_OR_RETURN(
        targets_, tracker_->Allocate<int32_t>(MemoryCategory::kActivations, n, "head targets"));
    std::memcpy(targets_.data(), batch.targets.data(), sizeof(int32_t) * n);
    LinearForward(probs_.data(), UnitInput(unit), p[kHeadWeight].data(), p[kHeadBias].data(), n,
                  C, V);
    loss_ = CrossEntropyForward(probs_.data(), targets_.data(), n, V);
  } else {
    const int n = batch_ * seq_;
    LayerActivations& a = layers_[unit - 1];
    FSDP_ASSIGN_OR_RETURN(a.fc_out, Activation(int64_t{n} * H, "fc_out", unit));
    FSDP_ASSIGN_OR_RETURN(a.gelu_out, Activation(int64_t{n} * H, "gelu_out", unit));
    FSDP_ASSIGN_OR_RETURN(a.out, Activation(int64_t{n} * C, "out", unit));
    const float* x = UnitInput(unit);
    LinearForward(a.fc_out.data(), x, p[kFcWeight].data(), p[kFcBias].data(), n, C, H);
    GeluForward(a.gelu_out.data(), a.fc_out.data(), int64_t{n} * H);
    LinearForward(a.out.data(), a.gelu_out.data(), p[kProjWeight].data(), p[kProjBias].data(), n,
                  H, C);
    ResidualForward(a.out.data(), a.out.data(), x, int64_t{n} * C);
  }
  order_.ForwardDone(unit);
  return absl::OkStatus();
}

absl::Status MlpModel::BackwardUnit(int unit, ConstDtypeSpan tagged_params, UnitGrads unit_grads,
                                    float loss_scale, GradWrite write) {
  FSDP_RETURN_IF_ERROR(CheckParamDtype(tagged_params, param_dtype(), "MlpModel::BackwardUnit"));
  // Its layers write fp32 gradients only; bf16 ones come with bf16
  // parameters, which this model does not take.
  FSDP_RETURN_IF_ERROR(CheckParamDtype(unit_grads.values, comm::Dtype::kFloat32,
                                       "MlpModel::BackwardUnit (gradients)"));
  const absl::Span<const float> params = tagged_params.as<float>();
  const absl::Span<float> grads = unit_grads.values.as<float>();
  FSDP_RETURN_IF_ERROR(order_.CheckBackward(unit));
  FSDP_ASSIGN_OR_RETURN(std::vector<ConstTensorView> p, ViewParams(units_[unit], params));
  FSDP_ASSIGN_OR_RETURN(std::vector<TensorView> g, ViewParams(units_[unit], grads));
  const int C = config_.d_model, H = config_.hidden, V = config_.vocab;
  const int n = batch_ * seq_;
  const int last = num_units() - 1;
  float* dres = d_residual_.data();
  if (unit == last) {
    CrossEntropyBackward(probs_.data(), targets_.data(), n, V, loss_scale);
    LinearBackward(dres, g[kHeadWeight].data(), g[kHeadBias].data(), probs_.data(),
                   UnitInput(unit), p[kHeadWeight].data(), n, C, V, GradWrite::kOverwrite, write);
    probs_.Reset();
    targets_.Reset();
  } else if (unit == 0) {
    // The embedding's backward scatters rows by adding them.
    if (write == GradWrite::kOverwrite) std::fill(grads.begin(), grads.end(), 0.0f);
    EmbeddingBackward(g[0].data(), g[1].data(), dres, tokens_.data(), batch_, seq_, C);
    tokens_.Reset();
    embedding_out_.Reset();
  } else {
    // out = x + proj(gelu(fc(x))): dres is d(out) and, once the branch has
    // added its share through fc's backward, d(x).
    LayerActivations& a = layers_[unit - 1];
    LinearBackward(d_wide1_.data(), g[kProjWeight].data(), g[kProjBias].data(), dres,
                   a.gelu_out.data(), p[kProjWeight].data(), n, H, C,
                   GradWrite::kOverwrite, write);
    GeluBackwardOverwrite(d_wide2_.data(), a.fc_out.data(), d_wide1_.data(), int64_t{n} * H);
    LinearBackward(dres, g[kFcWeight].data(), g[kFcBias].data(), d_wide2_.data(),
                   UnitInput(unit), p[kFcWeight].data(), n, C, H, GradWrite::kAdd, write);
    a = LayerActivations();
  }
  order_.BackwardDone(unit);
  return absl::OkStatus();
}

}  // namespace fsdp
