// File: fsdp/nn/gpt_model.h
//
// A GPT-2-style decoder implementing fsdp::Model (pre-norm blocks, causal
// multi-head attention, tanh-GELU MLP, untied head). Units and parameter
// shapes are GptUnitSpecs(config) (fsdp/nn/gpt_spec.h).
//
//   MemoryTracker tracker;
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<GptModel> model,
//                         GptModel::Create(config, /*micro_batch=*/4, &tracker));
//
// Memory: the backward workspace is allocated once by Create (kWorkspace);
// each unit's forward allocates what it saves for backward (kActivations) and
// its backward frees it, so a forward that does not fit fails with
// ResourceExhausted from the tracker instead of crashing. The byte counts are
// exactly GptActivationBytesByUnit(config, micro_batch).
//
// Activation checkpointing (config.activation_checkpoint_every): a
// checkpointed block's forward allocates everything as usual, computes, and
// keeps only its output (the next unit's input); its backward allocates the
// rest again and recomputes the forward from its input (kept by the unit
// before) up to the last projection, then runs the usual backward. The same
// kernels on the same inputs give the same bits, so results are identical to
// a run without checkpointing. The recomputation uses the parameters the
// backward is given: no strategy gathers anything extra for it.
//
// Initialization (InitUnitParams) follows GPT-2: weights ~ N(0, 0.02), the two
// residual projections (attn.proj, mlp.proj) ~ N(0, 0.02 / sqrt(2 * layers)),
// LayerNorm weights 1, biases 0; each element drawn from a counter-based
// stream keyed by (seed, unit, parameter), see fsdp/nn/init_rng.h.
#ifndef FSDP_NN_GPT_MODEL_H_
#define FSDP_NN_GPT_MODEL_H_

#include <initializer_list>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/unit_order.h"

namespace fsdp {

class GptModel : public Model {
 public:
  // InvalidArgument for a bad config or micro_batch < 1; ResourceExhausted if
  // the workspace does not fit the tracker's budget. `tracker` must outlive
  // the model.
  static absl::StatusOr<std::unique_ptr<GptModel>> Create(const GptConfig& config,
                                                         int micro_batch,
                                                         MemoryTracker* tracker);

  const std::vector<UnitSpec>& units() const override { return units_; }
  void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const override;
  absl::Status ForwardUnit(int unit, absl::Span<const float> params,
                           const Batch& batch) override;
  float loss() const override { return loss_; }
  absl::Status BackwardUnit(int unit, absl::Span<const float> params, absl::Span<float> grads,
                            float loss_scale, GradWrite write) override;
  // config.bf16_params: the parameters come in bf16 through these two (and
  // ForwardUnit / BackwardUnit refuse); otherwise the other way round.
  bool accepts_bf16_params() const override { return config_.bf16_params; }
  absl::Status ForwardUnitBf16(int unit, absl::Span<const uint16_t> params,
                               const Batch& batch) override;
  absl::Status BackwardUnitBf16(int unit, absl::Span<const uint16_t> params,
                                absl::Span<float> grads, float loss_scale,
                                GradWrite write) override;
  // The Linear layers' weight gradients go straight into `grads16` from
  // their products; the rest is computed in `grads` and rounded.
  absl::Status BackwardUnitBf16ToBf16Grads(int unit, absl::Span<const uint16_t> params,
                                           absl::Span<float> grads, absl::Span<uint16_t> grads16,
                                           float loss_scale) override;

  const GptConfig& config() const { return config_; }
  int micro_batch() const { return micro_batch_; }

 private:
  // What one block's forward saves for its backward.
  struct BlockActivations {
    FloatBuffer ln1_out, ln1_mean, ln1_rstd;
    FloatBuffer qkv;        // (B, T, 3C)
    FloatBuffer att_probs;  // (B, H, T, T); standard attention (fp32 compute)
    FloatBuffer lse;        // (B, H, T); flash attention: log-sum-exp per query row
    FloatBuffer att_out;    // (B, T, C) before the output projection
    FloatBuffer res2;       // (B, T, C) residual stream after attention
    FloatBuffer ln2_out, ln2_mean, ln2_rstd;
    FloatBuffer fc_out;     // (B, T, 4C) before GELU
    FloatBuffer gelu_out;   // (B, T, 4C)
    FloatBuffer out;        // (B, T, C) residual stream leaving the block
    // bf16_compute: these replace ln1_out, qkv, att_out, ln2_out and
    // gelu_out, which only feed matrix products, and att_probs, which the
    // products and the softmax backward read rounded (fsdp/nn/attention.h).
    TrackedBuffer<uint16_t> ln1_bf16, qkv_bf16, att_bf16, ln2_bf16, gelu_bf16, att_probs_bf16;
  };
  struct HeadActivations {
    FloatBuffer lnf_out, lnf_mean, lnf_rstd;
    FloatBuffer probs;  // (B, T, V); becomes dlogits in backward
    TrackedBuffer<int32_t> targets;
    TrackedBuffer<uint16_t> lnf_bf16;  // bf16_compute: replaces lnf_out
  };

  // A unit's parameters as the step hands them in: fp32 (ForwardUnit) or
  // bf16 (ForwardUnitBf16).
  struct ParamsIn {
    absl::Span<const float> fp32;
    absl::Span<const uint16_t> bf16;
    bool is_bf16 = false;
    int64_t size() const { return is_bf16 ? bf16.size() : fp32.size(); }
  };
  // What the bf16 kernels read of one unit: every parameter in bf16 and the
  // 1-D ones (LayerNorm, biases) in fp32.
  struct Bf16UnitParams {
    const uint16_t* bf16 = nullptr;  // the whole unit
    std::vector<int64_t> offset;     // per parameter, into bf16
    std::vector<const float*> fp32;  // per parameter; set for the 1-D ones
    const uint16_t* W(int k) const { return bf16 + offset[k]; }
    const float* F(int k) const { return fp32[k]; }
  };

  GptModel(const GptConfig& config, int micro_batch, MemoryTracker* tracker);
  absl::Status AllocateWorkspace();
  absl::StatusOr<FloatBuffer> Activation(int64_t numel, const char* what, int unit);
  absl::StatusOr<TrackedBuffer<uint16_t>> Bf16Activation(int64_t numel, const char* what,
                                                         int unit);
  // bf16_compute: fp32 parameters are converted into params_bf16_ (and read
  // in place for the 1-D ones); bf16 ones are read in place and their 1-D
  // parameters widened into small_params_.
  absl::StatusOr<Bf16UnitParams> PrepareBf16(int unit, const ParamsIn& in);
  absl::Status Forward(int unit, const ParamsIn& params, const Batch& batch);
  // `write` as in BackwardUnit: under kOverwrite the Linear layers write
  // their weight and bias gradients fresh and the rest (LayerNorm, the
  // embedding's scattered rows) is zeroed first. `grads16` is set only by
  // BackwardUnitBf16ToBf16Grads (bf16 parameters, so bf16 compute, and
  // kOverwrite): the gradients end up in bf16 there, as it says.
  absl::Status Backward(int unit, const ParamsIn& params, absl::Span<float> grads,
                        float loss_scale, GradWrite write,
                        absl::Span<uint16_t> grads16 = {});
  // Everything a block's backward reads, in forward order; `with_output`
  // adds the block's output (a checkpointed block allocates that apart: it
  // outlives the rest).
  absl::Status AllocateBlockActivations(int layer, bool with_output);
  // Drops what a checkpointed block does not keep: all but its output.
  void ReleaseRecomputable(int layer);
  // The block's forward into its allocated activations. Without
  // `through_output` it stops before the last projection: the recomputation
  // in the backward needs everything but the output, which it still has.
  absl::Status BlockForwardCompute(int layer, absl::Span<const float> params, bool through_output);
  void BlockForwardComputeBf16(int layer, const Bf16UnitParams& params, bool through_output);
  absl::Status BlockBackwardBf16(int layer, const Bf16UnitParams& params,
                                 absl::Span<float> grads, GradWrite write,
                                 absl::Span<uint16_t> grads16);
  // The residual stream entering unit `unit` (>= 1): the previous unit's output.
  const float* UnitInput(int unit) const;

  absl::Status EmbeddingForward(const ParamsIn& params, const Batch& batch);
  absl::Status BlockForward(int layer, const ParamsIn& params);
  absl::Status HeadForward(const ParamsIn& params, const Batch& batch);
  absl::Status EmbeddingBackward(absl::Span<float> grads);
  // A checkpointed block's backward first recomputes what its forward dropped.
  absl::Status BlockBackward(int layer, const ParamsIn& params, absl::Span<float> grads,
                             GradWrite write, absl::Span<uint16_t> grads16);
  absl::Status HeadBackward(const ParamsIn& params, absl::Span<float> grads, float loss_scale,
                            GradWrite write, absl::Span<uint16_t> grads16);
  // With grads16: rounds unit `unit`'s gradients from `grads` into `grads16`,
  // all but the parameters in `written` (their products wrote them there).
  void RoundGradsExcept(int unit, absl::Span<const float> grads, absl::Span<uint16_t> grads16,
                        std::initializer_list<int> written) const;
  // kOverwrite: zeroes the gradients of unit `unit` that its layers add into
  // (all but the Linear weights and biases).
  absl::Status ZeroAddedGrads(int unit, absl::Span<float> grads);

  const GptConfig config_;
  const int micro_batch_;
  MemoryTracker* const tracker_;
  const std::vector<UnitSpec> units_;
  UnitOrder order_;

  int batch_ = 0;  // B and T of the step in flight
  int seq_ = 0;
  float loss_ = 0.0f;

  // Saved activations, alive from a unit's forward to its backward.
  TrackedBuffer<int32_t> tokens_;
  FloatBuffer embedding_out_;
  std::vector<BlockActivations> blocks_;
  HeadActivations head_;

  // Backward workspace, allocated once (see GptActivationBytesByUnit).
  FloatBuffer d_residual_;  // (B, T, C) gradient of the residual stream
  FloatBuffer d_narrow_;    // (B, T, C)
  FloatBuffer d_wide1_;     // (B, T, 4C)
  FloatBuffer d_wide2_;     // (B, T, 4C); fp32 compute only
  // Attention's backward scratch: (T, T) d scores for the standard one,
  // FlashAttentionScratchFloats for flash (whose forward uses it too).
  FloatBuffer attention_scratch_;
  // bf16_compute workspace: one unit's parameters in bf16 (fp32 parameters)
  // or its 1-D parameters in fp32 (bf16_params), and one output gradient (up
  // to (B, T, 4C)) in bf16.
  TrackedBuffer<uint16_t> params_bf16_;
  FloatBuffer small_params_;
  TrackedBuffer<uint16_t> dout_bf16_;
  TrackedBuffer<uint16_t> probs_bf16_;  // (T, T): one head's probabilities in bf16
};

}  // namespace fsdp

#endif  // FSDP_NN_GPT_MODEL_H_
