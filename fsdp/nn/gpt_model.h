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

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/attention_layout.h"
#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/tensor.h"
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
  // config.param_dtype.
  comm::Dtype param_dtype() const override { return param_dtype_; }
  absl::Status ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) override;
  float loss() const override { return loss_; }
  // bf16 gradients (bf16 parameters, so bf16 compute): the Linear layers'
  // weight gradients go straight into them from their products; the rest is
  // computed in the fp32 scratch and rounded.
  absl::Status BackwardUnit(int unit, ConstDtypeSpan params, UnitGrads grads, float loss_scale,
                            GradWrite write) override;

  // config.per_sequence_products: every product over one sequence, and the
  // gradients exact (int64) sums of per-sequence contributions (the
  // embedding's per token), each the gradient of loss_scale times the sum of
  // the sequence's token losses (UnitGrads).
  bool per_sequence_products() const override { return config_.per_sequence_products; }
  absl::Span<const float> sequence_losses() const override { return sequence_losses_; }

  const GptConfig& config() const { return config_; }
  int micro_batch() const { return micro_batch_; }

 private:
  // What one block's forward saves for its backward. The DtypeBuffers are in
  // the compute dtype: they only feed matrix products (and, for att_probs,
  // the softmax backward, which reads them rounded: fsdp/nn/attention.h).
  struct BlockActivations {
    DtypeBuffer ln1;
    FloatBuffer ln1_mean, ln1_rstd;
    DtypeBuffer qkv;        // (B, T, 3C)
    DtypeBuffer att_probs;  // (B, H, T, T); standard attention
    FloatBuffer lse;        // (B, H, T); flash attention: log-sum-exp per query row
    DtypeBuffer att;        // (B, T, C) before the output projection
    FloatBuffer res2;       // (B, T, C) residual stream after attention
    DtypeBuffer ln2;
    FloatBuffer ln2_mean, ln2_rstd;
    FloatBuffer fc_out;     // (B, T, 4C) before GELU
    DtypeBuffer gelu;       // (B, T, 4C)
    FloatBuffer out;        // (B, T, C) residual stream leaving the block
  };
  struct HeadActivations {
    DtypeBuffer lnf;  // compute dtype
    FloatBuffer lnf_mean, lnf_rstd;
    FloatBuffer probs;  // (B, T, V); becomes dlogits in backward
    TrackedBuffer<int32_t> targets;
  };

  // What the kernels read of one unit: every parameter in the compute dtype
  // (the products' operands) and the 1-D ones (LayerNorm, biases) in fp32.
  struct UnitParams {
    ConstDtypeSpan compute;          // the whole unit
    std::vector<int64_t> offset;     // per parameter, into compute
    std::vector<int64_t> numel;      // per parameter
    std::vector<const float*> fp32;  // per parameter; set for the 1-D ones at least
    ConstDtypeSpan W(int k) const { return compute.subspan(offset[k], numel[k]); }
    const float* F(int k) const { return fp32[k]; }
  };
  // A unit's gradients as the backward writes them: `fp32` (the caller's
  // fp32 gradients, or the scratch for bf16 ones) and `bf16` (empty unless
  // the gradients are bf16).
  struct GradsOut {
    absl::Span<float> fp32;
    absl::Span<uint16_t> bf16;
    // Exact gradients: the unit's int64 sums (fp32 is then the scratch one
    // sequence's gradients are computed in) and their exponents and maxima.
    absl::Span<int64_t> exact_sums;
    ExactGradSums exact;
    std::vector<TensorView> views;  // fp32, per parameter
    const UnitSpec* spec = nullptr;
    float* F(int k) const { return views[k].data(); }
    // Where a product writes the weight gradient of parameter k: in bf16
    // straight from its accumulator when the gradients are bf16.
    DtypeSpan Product(int k) const;
  };

  // Sequences [first, first + count) of the micro-batch in flight: what one
  // call of a layer computes (all of them, or one at a time with
  // per_sequence_products).
  struct Seqs {
    int first = 0;
    int count = 0;
  };

  GptModel(const GptConfig& config, int micro_batch, MemoryTracker* tracker);
  // The ranges the products run over: {0, B}, or {s, 1} for every s.
  template <typename Fn>
  void ForEachProductRange(Fn&& fn) const {
    if (!config_.per_sequence_products) return fn(Seqs{0, batch_});
    for (int s = 0; s < batch_; ++s) fn(Seqs{s, 1});
  }
  absl::Status AllocateWorkspace();
  absl::StatusOr<FloatBuffer> Activation(int64_t numel, const char* what, int unit);
  absl::StatusOr<DtypeBuffer> ComputeActivation(int64_t numel, const char* what, int unit);
  // Checks the unit's parameters and makes them readable as UnitParams: in
  // bf16 compute, fp32 parameters are converted into params_bf16_ (and read
  // in place for the 1-D ones); bf16 ones are read in place and their 1-D
  // parameters widened into small_params_.
  absl::StatusOr<UnitParams> PrepareParams(int unit, ConstDtypeSpan params);
  absl::StatusOr<GradsOut> PrepareGrads(int unit, const UnitGrads& grads);
  // The compute copy (fsdp/nn/dtype_layers.h) of the fp32 gradient at
  // `fp32`: itself in fp32, the bf16 workspace dout_copy_ in bf16.
  DtypeSpan CopyOf(float* fp32, int64_t numel);
  // Everything a block's backward reads, in forward order; `with_output`
  // adds the block's output (a checkpointed block allocates that apart: it
  // outlives the rest).
  absl::Status AllocateBlockActivations(int layer, bool with_output);
  // The block's forward into its allocated activations. Without
  // `through_output` it stops before the last projection: the recomputation
  // in the backward needs everything but the output, which it still has.
  void BlockForwardCompute(int layer, const UnitParams& params, bool through_output);
  void BlockForwardRows(int layer, const UnitParams& params, bool through_output, Seqs r);
  // Block `layer`'s saved buffers (and the residual gradient) for sequences
  // r only: what its forward and backward over r read and write.
  struct BlockRows {
    int n = 0;          // rows: r.count * T
    int64_t nc = 0;     // n * C
    int64_t row0 = 0;   // the first row
    const float* x = nullptr;  // the block's input
    DtypeSpan ln1, qkv, att_probs, att, ln2, gelu;
    float *ln1_mean = nullptr, *ln1_rstd = nullptr, *lse = nullptr, *res2 = nullptr;
    float *ln2_mean = nullptr, *ln2_rstd = nullptr, *fc_out = nullptr;
    float* out = nullptr;         // null when not allocated (a checkpointed recomputation)
    float* d_residual = nullptr;  // d_residual_'s rows
  };
  BlockRows RowsOf(int layer, Seqs r);
  // The residual stream entering unit `unit` (>= 1): the previous unit's output.
  const float* UnitInput(int unit) const;

  absl::Status EmbeddingForward(ConstDtypeSpan params, const Batch& batch);
  absl::Status BlockForward(int layer, ConstDtypeSpan params);
  absl::Status HeadForward(ConstDtypeSpan params, const Batch& batch);
  void EmbeddingBackward(const GradsOut& g);
  // The backwards write their gradients as `write` says (BackwardUnit):
  // under kOverwrite the Linear layers write their weight and bias gradients
  // fresh and the rest (LayerNorm, the embedding's scattered rows) is zeroed
  // first. A checkpointed block's backward first recomputes what its
  // forward dropped.
  absl::Status BlockBackward(int layer, ConstDtypeSpan params, const GradsOut& g,
                             GradWrite write);
  absl::Status HeadBackward(ConstDtypeSpan params, const GradsOut& g, float loss_scale,
                            GradWrite write);
  // The backwards over sequences `r`. The block's products read d(out)
  // through its compute copy: written by the unit above, or (`fresh_copy`,
  // one sequence at a time) rounded here first.
  void BlockBackwardRows(int layer, const UnitParams& p, const GradsOut& g, GradWrite write,
                         Seqs r, bool fresh_copy);
  void HeadBackwardRows(const UnitParams& p, const GradsOut& g, float loss_scale,
                        GradWrite write, Seqs r);
  // Exact gradients: for every sequence, `backward` computes its gradients
  // into the fp32 scratch (kOverwrite; the added ones zeroed first), which
  // then go into the unit's exact sums.
  void ForEachSequenceIntoExactSums(int unit, const GradsOut& g,
                                    absl::FunctionRef<void(Seqs)> backward);
  // With bf16 gradients: rounds unit `unit`'s gradients from g.fp32 into
  // g.bf16, all but the parameters in `written` (their products wrote them
  // there).
  void RoundGradsExcept(const GradsOut& g, std::initializer_list<int> written) const;
  // kOverwrite: zeroes the gradients of unit `unit` that its layers add into
  // (all but the Linear weights and biases).
  void ZeroAddedGrads(int unit, const GradsOut& g);

  const GptConfig config_;
  const comm::Dtype param_dtype_;    // what ForwardUnit and BackwardUnit take
  const comm::Dtype compute_dtype_;  // the products' operands and what feeds only them
  const int micro_batch_;
  MemoryTracker* const tracker_;
  const std::vector<UnitSpec> units_;
  UnitOrder order_;

  int batch_ = 0;  // B and T of the step in flight
  int seq_ = 0;
  float loss_ = 0.0f;
  std::vector<float> sequence_losses_;  // per_sequence_products: per sequence

  // Saved activations, alive from a unit's forward to its backward.
  TrackedBuffer<int32_t> tokens_;
  FloatBuffer embedding_out_;
  std::vector<BlockActivations> blocks_;
  HeadActivations head_;

  // Backward workspace, allocated once (see GptActivationBytesByUnit).
  FloatBuffer d_residual_;  // (B, T, C) gradient of the residual stream
  FloatBuffer d_narrow_;    // (B, T, C)
  FloatBuffer d_wide1_;     // (B, T, 4C)
  // (B, T, 4C) in the compute dtype: GELU's input gradient, and in bf16 the
  // compute copies of the other gradients the products read.
  DtypeBuffer dout_copy_;
  // Attention's backward scratch: (T, T) d scores for the standard one,
  // FlashAttentionScratchFloats for flash (whose forward uses it too).
  AttentionScratch attention_;  // its sizes and slots (fsdp/nn/attention_layout.h)
  FloatBuffer attention_scratch_;
  // bf16 compute workspace: one unit's parameters in bf16 (fp32 parameters)
  // or its 1-D parameters in fp32 (bf16 parameters), and one head's
  // probabilities in bf16.
  TrackedBuffer<uint16_t> params_bf16_;
  FloatBuffer small_params_;
  TrackedBuffer<uint16_t> probs_bf16_;
};

}  // namespace fsdp

#endif  // FSDP_NN_GPT_MODEL_H_
