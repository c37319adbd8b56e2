// File: fsdp/nn/mlp_model.h
//
// A small residual MLP language model implementing fsdp::Model, for tests of
// the training loop that want something cheaper than attention:
//   "embedding": embedding.wte {V, C}, embedding.wpe {T, C}
//   "mlp<l>":    mlp<l>.fc.{weight {H, C}, bias {H}}, mlp<l>.proj.{weight {C, H}, bias {C}}
//                out = x + proj(GELU(fc(x)))
//   "head":      head.weight {V, C}, head.bias {V}; softmax cross-entropy
// Each position predicts its next token from its own token and position only,
// which is enough to learn a first-order Markov chain (fsdp/data/).
// Memory follows GptModel: workspace once at Create, saved activations from a
// unit's forward to its backward. Init: weights N(0, 0.02), proj weights
// N(0, 0.02 / sqrt(2 * layers)), biases 0, counter-based in (seed, unit).
#ifndef FSDP_NN_MLP_MODEL_H_
#define FSDP_NN_MLP_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/unit_order.h"

namespace fsdp {

struct MlpConfig {
  int layers = 2;
  int d_model = 32;
  int hidden = 128;
  int vocab = 64;
  int seq_len = 16;
};

// InvalidArgument naming the first non-positive field.
absl::Status ValidateMlpConfig(const MlpConfig& config);
std::vector<UnitSpec> MlpUnitSpecs(const MlpConfig& config);

class MlpModel : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<MlpModel>> Create(const MlpConfig& config,
                                                         int micro_batch,
                                                         MemoryTracker* tracker);

  const std::vector<UnitSpec>& units() const override { return units_; }
  void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const override;
  // fp32 parameters and gradients only (Model::param_dtype's default).
  absl::Status ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) override;
  float loss() const override { return loss_; }
  absl::Status BackwardUnit(int unit, ConstDtypeSpan params, UnitGrads grads, float loss_scale,
                            GradWrite write) override;

 private:
  struct LayerActivations {
    FloatBuffer fc_out;    // (B, T, H)
    FloatBuffer gelu_out;  // (B, T, H)
    FloatBuffer out;       // (B, T, C)
  };

  MlpModel(const MlpConfig& config, int micro_batch, MemoryTracker* tracker);
  absl::StatusOr<FloatBuffer> Activation(int64_t numel, const char* what, int unit);
  const float* UnitInput(int unit) const;

  const MlpConfig config_;
  const int micro_batch_;
  MemoryTracker* const tracker_;
  const std::vector<UnitSpec> units_;
  UnitOrder order_;

  int batch_ = 0;
  int seq_ = 0;
  float loss_ = 0.0f;

  TrackedBuffer<int32_t> tokens_;
  FloatBuffer embedding_out_;
  std::vector<LayerActivations> layers_;
  FloatBuffer probs_;  // (B, T, V); becomes dlogits in backward
  TrackedBuffer<int32_t> targets_;

  FloatBuffer d_residual_;  // (B, T, C)
  FloatBuffer d_wide1_;     // (B, T, H)
  FloatBuffer d_wide2_;     // (B, T, H)
};

}  // namespace fsdp

#endif  // FSDP_NN_MLP_MODEL_H_
