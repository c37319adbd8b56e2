// File: fsdp/nn/llama_inference.h
//
// The Llama's forward pass alone, for validation and text generation: the
// same layer kernels in the same order as LlamaModel's fp32 forward with
// standard attention, so the logits are LlamaModel's bit for bit, but
// nothing is saved for a backward: one residual stream and one set of
// scratch buffers serve every block. Parameters arrive in fp32 (the master
// copy of a bf16 run, or an exported file), one unit at a time, and are
// never kept, as for GptInference (fsdp/nn/gpt_inference.h).
//
//   FSDP_ASSIGN_OR_RETURN(auto forward, LlamaInference::Create(config, /*max_batch=*/8, &tracker));
//   FSDP_RETURN_IF_ERROR(forward->Begin(tokens, batch, seq));      // (batch, seq) inputs
//   for (int u = 0; u < forward->num_units(); ++u)
//     FSDP_RETURN_IF_ERROR(forward->RunUnit(u, params[u]));
//   absl::Span<const float> logits = *forward->logits();           // (batch, seq, vocab)
//
// Memory (kActivations, taken in Begin and held until the next Begin or the
// destructor; kWorkspace for the rotary table, taken by Create), B = batch,
// T = seq, C = d_model, H = heads, hs = C / H, W = (H + 2 kv_heads) hs,
// F = ffn_hidden, V = vocab:
//   4 (6 BTC + BT + BT W + 2 BTF + B H T T + BTV) + 4 BT (tokens)
//   + 4 T_max hs (the rotary table) + 4 V C with tied embeddings (the
//   embedding's weight, copied at unit 0 for the head),
// less than one training micro-batch's saved activations of the same shape.
#ifndef FSDP_NN_LLAMA_INFERENCE_H_
#define FSDP_NN_LLAMA_INFERENCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/inference_model.h"
#include "fsdp/nn/llama_spec.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

class LlamaInference final : public InferenceModel {
 public:
  // InvalidArgument for a bad config or max_batch < 1; ResourceExhausted if
  // the rotary table does not fit the tracker's budget. The config's
  // dtypes, checkpointing and attention kind are training choices and are
  // ignored: the forward is fp32 with standard attention; its products run
  // one sequence at a time under per_sequence_products (the exact mode's
  // val_loss: a sequence's logits then do not depend on its neighbours). `tracker` must
  // outlive this object.
  static absl::StatusOr<std::unique_ptr<LlamaInference>> Create(const LlamaConfig& config,
                                                                int max_batch,
                                                                MemoryTracker* tracker);

  int num_units() const override { return static_cast<int>(units_.size()); }
  int vocab() const override { return config_.vocab; }
  int max_seq_len() const override { return config_.seq_len; }
  const LlamaConfig& config() const { return config_; }

  absl::Status Begin(absl::Span<const int32_t> tokens, int batch, int seq) override;
  absl::Status RunUnit(int unit, absl::Span<const float> params) override;
  absl::StatusOr<absl::Span<const float>> logits() const override;

 private:
  LlamaInference(const LlamaConfig& config, int max_batch, MemoryTracker* tracker);

  const LlamaConfig config_;
  const int max_batch_;
  MemoryTracker* const tracker_;
  const std::vector<UnitSpec> units_;

  int batch_ = 0;
  int seq_ = 0;
  int next_unit_ = -1;      // -1: no Begin yet
  FloatBuffer rope_table_;  // RotaryTableFloats(seq_len, hs)
  TrackedBuffer<int32_t> tokens_;
  FloatBuffer x_;        // (B, T, C) residual stream
  FloatBuffer res2_;     // (B, T, C) after attention
  FloatBuffer norm_;     // (B, T, C) an RMSNorm's output
  FloatBuffer rstd_;     // (B, T)
  FloatBuffer proj_;     // (B, T, W) the q, k, v projection
  FloatBuffer qkv_;      // (B, T, 3C) q, k rotated, kv heads repeated
  FloatBuffer probs_;    // (B, H, T, T)
  FloatBuffer att_;      // (B, T, C)
  FloatBuffer gate_up_;  // (B, T, 2F)
  FloatBuffer hidden_;   // (B, T, F) SwiGLU's output
  FloatBuffer logits_;   // (B, T, V)
  FloatBuffer tied_weight_;  // (V, C) tied embeddings: unit 0's weight, for the head
};

}  // namespace fsdp

#endif  // FSDP_NN_LLAMA_INFERENCE_H_
