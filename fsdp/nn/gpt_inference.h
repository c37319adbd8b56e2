// File: fsdp/nn/gpt_inference.h
//
// The GPT's forward pass alone, for evaluation and text generation: the
// same layer kernels in the same order as GptModel::ForwardUnit, so the
// logits are GptModel's bit for bit, but nothing is saved for a backward:
// one residual stream and one set of scratch buffers are reused by every
// block. Like GptModel it computes only; whoever drives it hands it each
// unit's parameters while that unit runs (gathered one unit at a time under
// sharding) and never keeps them.
//
//   FSDP_ASSIGN_OR_RETURN(auto forward, GptInference::Create(config, /*max_batch=*/8, &tracker));
//   FSDP_RETURN_IF_ERROR(forward->Begin(tokens, batch, seq));      // (batch, seq) inputs
//   for (int u = 0; u < forward->num_units(); ++u)
//     FSDP_RETURN_IF_ERROR(forward->RunUnit(u, params[u]));
//   absl::Span<const float> logits = forward->logits();            // (batch, seq, vocab)
//
// Memory (kActivations, taken in Begin and held until the next Begin or
// the destructor), B = batch, T = seq, C = d_model, H = heads, V = vocab:
//   4 (15 BTC + 3 BT + B H T T + BTV) bytes (tokens as int32),
// less than the saved activations of one training micro-batch of the same
// shape (GptActivationBytesByUnit), which hold 16 BTC per block.
#ifndef FSDP_NN_GPT_INFERENCE_H_
#define FSDP_NN_GPT_INFERENCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/inference_model.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

class GptInference final : public InferenceModel {
 public:
  // InvalidArgument for a bad config or max_batch < 1. `tracker` must
  // outlive this object.
  static absl::StatusOr<std::unique_ptr<GptInference>> Create(const GptConfig& config,
                                                             int max_batch,
                                                             MemoryTracker* tracker);

  int num_units() const override { return static_cast<int>(units_.size()); }
  int vocab() const override { return config_.vocab; }
  int max_seq_len() const override { return config_.seq_len; }
  const std::vector<UnitSpec>& units() const { return units_; }
  const GptConfig& config() const { return config_; }

  // Starts a forward over `tokens`, (batch, seq) row-major: 1 <= batch <=
  // max_batch, 1 <= seq <= config.seq_len, tokens in [0, vocab).
  // InvalidArgument otherwise; ResourceExhausted if the buffers do not fit
  // the tracker's budget.
  absl::Status Begin(absl::Span<const int32_t> tokens, int batch, int seq) override;

  // Runs unit `unit` with its parameters (units()[unit].numel() floats).
  // Units run in order 0..n-1 after Begin; FailedPrecondition otherwise.
  absl::Status RunUnit(int unit, absl::Span<const float> params) override;

  // After the last unit: the logits, (batch, seq, vocab).
  absl::StatusOr<absl::Span<const float>> logits() const override;

 private:
  GptInference(const GptConfig& config, int max_batch, MemoryTracker* tracker);

  const GptConfig config_;
  const int max_batch_;
  MemoryTracker* const tracker_;
  const std::vector<UnitSpec> units_;

  int batch_ = 0;
  int seq_ = 0;
  int next_unit_ = -1;  // -1: no Begin yet
  TrackedBuffer<int32_t> tokens_;
  FloatBuffer x_;       // (B, T, C) residual stream
  FloatBuffer res2_;    // (B, T, C) after attention
  FloatBuffer norm_;    // (B, T, C) a layer norm's output
  FloatBuffer mean_, rstd_;  // (B, T)
  FloatBuffer qkv_;     // (B, T, 3C)
  FloatBuffer probs_;   // (B, H, T, T)
  FloatBuffer att_;     // (B, T, C)
  FloatBuffer wide_;    // (B, T, 4C) fc output
  FloatBuffer gelu_;    // (B, T, 4C)
  FloatBuffer logits_;  // (B, T, V)
};

}  // namespace fsdp

#endif  // FSDP_NN_GPT_INFERENCE_H_
