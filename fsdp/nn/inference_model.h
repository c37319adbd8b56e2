// File: fsdp/nn/inference_model.h
//
// A model's forward pass alone, for evaluation and text generation, as the
// run layer drives it without naming the model (fsdp/run/model_registry.h
// builds one; fsdp/nn/gpt_inference.h is the GPT's). Like fsdp::Model it
// computes only: whoever drives it hands it each unit's parameters while
// that unit runs and never has it keep them.
//
//   FSDP_RETURN_IF_ERROR(forward.Begin(tokens, batch, seq));   // (batch, seq) inputs
//   for (int u = 0; u < forward.num_units(); ++u)
//     FSDP_RETURN_IF_ERROR(forward.RunUnit(u, params[u]));
//   absl::Span<const float> logits = *forward.logits();        // (batch, seq, vocab)
#ifndef FSDP_NN_INFERENCE_MODEL_H_
#define FSDP_NN_INFERENCE_MODEL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fsdp {

class InferenceModel {
 public:
  virtual ~InferenceModel() = default;

  virtual int num_units() const = 0;
  // Logits per position.
  virtual int vocab() const = 0;
  // The longest sequence Begin takes (the model's context).
  virtual int max_seq_len() const = 0;

  // Starts a forward over `tokens`, (batch, seq) row-major. InvalidArgument
  // for a shape or token the model does not take; ResourceExhausted if its
  // buffers do not fit the tracker's budget.
  virtual absl::Status Begin(absl::Span<const int32_t> tokens, int batch, int seq) = 0;

  // Runs unit `unit` with its parameters; units run in order 0..n-1 after
  // Begin (FailedPrecondition otherwise).
  virtual absl::Status RunUnit(int unit, absl::Span<const float> params) = 0;

  // After the last unit: the logits, (batch, seq, vocab).
  virtual absl::StatusOr<absl::Span<const float>> logits() const = 0;
};

}  // namespace fsdp

#endif  // FSDP_NN_INFERENCE_MODEL_H_
