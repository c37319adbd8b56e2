// File: fsdp/nn/llama_model.h
//
// A Llama decoder implementing fsdp::Model: pre-norm blocks with RMSNorm,
// grouped-query causal attention with rotary positions (Hugging Face's
// rotate-half pairing), a SwiGLU MLP, no biases, an untied head. Units and
// parameter names are LlamaUnitSpecs(config) (fsdp/nn/llama_spec.h), the
// equations docs/model.md ("Llama").
//
//   MemoryTracker tracker;
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
//                         LlamaModel::Create(config, /*micro_batch=*/4, &tracker));
//
// Built like GptModel (fsdp/nn/gpt_model.h), whose notes hold here: the
// backward workspace is allocated once by Create (kWorkspace), each unit's
// forward allocates what it saves (kActivations) and its backward frees it;
// activation checkpointing keeps a checkpointed block's output only and
// recomputes the rest from its input at the start of its backward, with
// the parameters the backward is given; fp32 or bf16 compute (products on
// bf16 operands with fp32 accumulation, what only feeds them saved in
// bf16), parameters in fp32 or bf16; standard or flash attention.
//
// With tied embeddings (config.tie_embeddings) the head's product reads
// the embedding's weight, which no strategy keeps gathered past unit 0's
// forward: the model keeps its own copy of it, in the compute dtype, from
// the embedding's forward to the head's backward, and the head's gradient
// of it in fp32 until the embedding's backward adds it to the scattered
// rows (in that order, so every strategy sums the same way). Two more
// kWorkspace buffers of V x C, comparable to what PyTorch FSDP spends keeping a tied
// weight's unit gathered.
//
// Initialization follows Hugging Face's LlamaPreTrainedModel: every weight
// ~ N(0, 0.02), RMSNorm weights 1; each element drawn from a counter-based
// stream keyed by (seed, unit, parameter) (fsdp/nn/init_rng.h).
#ifndef FSDP_NN_LLAMA_MODEL_H_
#define FSDP_NN_LLAMA_MODEL_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/attention_layout.h"
#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/grouped_query.h"
#include "fsdp/nn/llama_spec.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/unit_operands.h"
#include "fsdp/nn/unit_order.h"

namespace fsdp {

class LlamaModel : public Model {
 public:
  // InvalidArgument for a bad config or micro_batch < 1; ResourceExhausted if
  // the workspace does not fit the tracker's budget. `tracker` must outlive
  // the model.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const LlamaConfig& config,
                                                           int micro_batch,
                                                           MemoryTracker* tracker);

  const std::vector<UnitSpec>& units() const override { return units_; }
  void InitUnitParams(int unit, absl::Span<float> params, uint64_t seed) const override;
  comm::Dtype param_dtype() const override { return config_.param_dtype; }
  bool per_sequence_products() const override { return config_.per_sequence_products; }
  absl::Span<const float> sequence_losses() const override { return sequence_losses_; }
  absl::Status ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) override;
  float loss() const override { return loss_; }
  absl::Status BackwardUnit(int unit, ConstDtypeSpan params, UnitGrads grads, float loss_scale,
                            GradWrite write) override;

  const LlamaConfig& config() const { return config_; }
  int micro_batch() const { return micro_batch_; }

 private:
  // What one block's forward saves for its backward; the DtypeBuffers in the
  // compute dtype (they only feed products, and the probabilities the
  // softmax backward, as in GptModel).
  struct BlockActivations {
    DtypeBuffer rms1;         // (B, T, C)
    FloatBuffer rms1_rstd;    // (B, T)
    DtypeBuffer qkv;          // (B, T, 3C): q, k rotated, kv heads repeated
    DtypeBuffer att_probs;    // (B, H, T, T); standard attention
    FloatBuffer lse;          // (B, H, T); flash attention
    DtypeBuffer att;          // (B, T, C) before o_proj
    FloatBuffer res2;         // (B, T, C) residual stream after attention
    DtypeBuffer rms2;         // (B, T, C)
    FloatBuffer rms2_rstd;    // (B, T)
    FloatBuffer gate_up;      // (B, T, 2F) before SwiGLU
    DtypeBuffer hidden;       // (B, T, F) SwiGLU's output
    FloatBuffer out;          // (B, T, C) residual stream leaving the block
  };
  // Sequences [first, first + count) of the micro-batch in flight.
  struct Seqs {
    int first = 0;
    int count = 0;
  };
  struct HeadActivations {
    DtypeBuffer rmsf;
    FloatBuffer rmsf_rstd;
    FloatBuffer probs;  // (B, T, V); becomes dlogits in backward
    TrackedBuffer<int32_t> targets;
  };

  LlamaModel(const LlamaConfig& config, int micro_batch, MemoryTracker* tracker);
  absl::Status AllocateWorkspace();
  absl::StatusOr<FloatBuffer> Activation(int64_t numel, const char* what, int unit);
  absl::StatusOr<DtypeBuffer> ComputeActivation(int64_t numel, const char* what, int unit);
  absl::StatusOr<UnitOperands> Operands(int unit, ConstDtypeSpan params);
  // The compute copy (fsdp/nn/dtype_layers.h) of the fp32 gradient at
  // `fp32`: itself in fp32, the start of dout_copy_ in bf16.
  DtypeSpan CopyOf(float* fp32, int64_t numel);
  // Where ComputeCopy writes a compute copy: dout_copy_ in bf16, nothing in
  // fp32 (the copy is the fp32 buffer itself).
  DtypeSpan CopyScratch();
  GroupedQueryShape AttentionShape() const;
  // The sizes a block's forward and backward use, for the step in flight.
  struct BlockDims {
    int n;           // B T rows
    int C, F, H;     // d_model, ffn_hidden, heads
    int64_t nc;      // n C
    GroupedQueryShape attention;
    int proj_width;  // (H + 2 kv_heads) hs: the q, k, v projection
  };
  BlockDims Dims() const;
  const float* UnitInput(int unit) const;
  // The head's product weight: lm_head's, or the embedding's kept copy.
  ConstDtypeSpan HeadWeight(const UnitOperands& p) const;

  absl::Status EmbeddingForward(ConstDtypeSpan params, const Batch& batch);
  absl::Status AllocateBlockActivations(int layer, bool with_output);
  void BlockForwardCompute(int layer, const UnitOperands& p, bool through_output);
  absl::Status BlockForward(int layer, ConstDtypeSpan params);
  absl::Status HeadForward(ConstDtypeSpan params, const Batch& batch);
  void EmbeddingBackward(const UnitGradTargets& g);
  absl::Status BlockBackward(int layer, ConstDtypeSpan params, const UnitGradTargets& g,
                             GradWrite write);
  // The block's backward over sequences r: their rows of the activations
  // and of d_residual_, the workspace from its start; with `fresh_copy` the
  // compute copy of d(out) is rounded here from d_residual_ (one sequence
  // at a time, the unit above's copy of it is gone).
  void BlockBackwardRows(int layer, const UnitOperands& p, const UnitGradTargets& g,
                         GradWrite write, Seqs r, bool fresh_copy);
  absl::Status HeadBackward(ConstDtypeSpan params, const UnitGradTargets& g, float loss_scale,
                            GradWrite write);
  void HeadBackwardRows(const UnitOperands& p, const UnitGradTargets& g, float loss_scale,
                        GradWrite write, Seqs r);
  // out = in w^T over all rows of the micro-batch: one product, or one per
  // sequence (per_sequence_products).
  void Product(DtypeSpan out, ConstDtypeSpan in, ConstDtypeSpan weight, int in_features,
               int out_features);
  // Exact gradients: for each sequence, `backward` into the zeroed scratch
  // (g.fp32), then added to the unit's sums.
  void ForEachSequenceIntoExactSums(int unit, const UnitGradTargets& g,
                                    absl::FunctionRef<void(Seqs)> backward);

  const LlamaConfig config_;
  const int micro_batch_;
  MemoryTracker* const tracker_;
  const std::vector<UnitSpec> units_;
  UnitOrder order_;

  int batch_ = 0;  // B and T of the step in flight
  int seq_ = 0;
  float loss_ = 0.0f;
  std::vector<float> sequence_losses_;  // per_sequence_products only

  TrackedBuffer<int32_t> tokens_;
  FloatBuffer embedding_out_;
  std::vector<BlockActivations> blocks_;
  HeadActivations head_;

  // Allocated once (kWorkspace).
  FloatBuffer rope_table_;   // RotaryTableFloats(seq_len, head size)
  FloatBuffer d_residual_;   // (B, T, C)
  FloatBuffer d_narrow_;     // (B, T, C)
  FloatBuffer d_hidden_;     // (B, T, F): SwiGLU's output gradient
  FloatBuffer d_wide_;       // (B, T, max(2F, 3C)): d gate_up, then d qkv
  FloatBuffer proj_;         // (B, T, (H + 2 KV) hs): the q, k, v projection, then its gradient
  DtypeBuffer dout_copy_;    // (B, T, max(2F, 3C)) bf16 compute only: the products' output gradients
  AttentionScratch attention_;  // its sizes and slots (fsdp/nn/attention_layout.h)
  FloatBuffer attention_scratch_;
  TrackedBuffer<uint16_t> params_bf16_;  // bf16 compute, fp32 parameters
  FloatBuffer small_params_;             // bf16 parameters: one unit's 1-D ones in fp32
  TrackedBuffer<uint16_t> probs_bf16_;   // bf16 compute: the attention's bf16 scratch
  DtypeBuffer tied_weight_;              // (V, C) compute dtype, tied embeddings only
  FloatBuffer tied_grad_;                // (V, C) the head's gradient of it
};

}  // namespace fsdp

#endif  // FSDP_NN_LLAMA_MODEL_H_
