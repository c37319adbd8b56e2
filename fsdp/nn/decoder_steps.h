// File: fsdp/nn/decoder_steps.h
//
// The steps every decoder model (GptModel, LlamaModel; MlpModel in part)
// takes around its own layers, written once: the arguments of Create, the
// checks and dispatch of ForwardUnit over its units (embedding, blocks,
// head), a unit's parameters checked against its spec, and token ids saved
// for the backward.
//
//   absl::Status GptModel::ForwardUnit(int unit, ConstDtypeSpan params, const Batch& batch) {
//     return RunDecoderForward(order_, unit, batch, {micro_batch_, seq_len, vocab, batch_, seq_},
//                              [&] { return EmbeddingForward(params, batch); },
//                              [&](int layer) { return BlockForward(layer, params); },
//                              [&] { return HeadForward(params, batch); });
//   }
#ifndef FSDP_NN_DECODER_STEPS_H_
#define FSDP_NN_DECODER_STEPS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "comm/dtype.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/dtype_buffer.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/param_spec.h"
#include "fsdp/nn/unit_order.h"

namespace fsdp {

// InvalidArgument unless micro_batch >= 1 and a tracker is given; `model`
// names the class in the message.
absl::Status CheckCreateArguments(int micro_batch, const MemoryTracker* tracker,
                                  absl::string_view model);

// What a decoder was built for, and the B x T of the step in flight.
struct DecoderBatchShape {
  int micro_batch = 0;
  int seq_len = 0;
  int vocab = 0;
  int step_batch = 0;
  int step_seq = 0;
};

// ForwardUnit of a decoder whose units are the embedding (0), blocks
// (1..n-2, layer = unit - 1) and the head (n-1): the order check, the
// batch validated at unit 0 (later units must get the step's B x T), the
// unit's forward, then order.ForwardDone.
absl::Status RunDecoderForward(UnitOrder& order, int unit, const Batch& batch,
                               const DecoderBatchShape& shape,
                               absl::FunctionRef<absl::Status()> embedding,
                               absl::FunctionRef<absl::Status(int layer)> block,
                               absl::FunctionRef<absl::Status()> head);

// FailedPrecondition unless `params` are `dtype`, InvalidArgument unless they
// hold the unit's numel; both name the unit.
absl::Status CheckUnitParams(ConstDtypeSpan params, comm::Dtype dtype, const UnitSpec& unit);

// The first n of `tokens`, copied into a tracked activation (`label`).
absl::StatusOr<TrackedBuffer<int32_t>> SaveTokens(MemoryTracker& tracker,
                                                  const std::vector<int32_t>& tokens, int64_t n,
                                                  absl::string_view label);

// A block's forward with activation checkpointing (as the header of
// fsdp/nn/gpt_model.h describes it): a checkpointed block allocates its output
// first (all that stays), then the rest (allocate(false)), computes, and
// drops the rest; any other block allocates everything (allocate(true)) and
// keeps it. `Activations` is the model's struct of one block's saved
// buffers, its output a FloatBuffer `out`.
template <typename Activations>
absl::Status RunBlockForward(Activations& a, bool checkpointed,
                             absl::FunctionRef<absl::StatusOr<FloatBuffer>()> allocate_output,
                             absl::FunctionRef<absl::Status(bool with_output)> allocate,
                             absl::FunctionRef<void()> compute) {
  if (checkpointed) {
    FSDP_ASSIGN_OR_RETURN(a.out, allocate_output());
  }
  FSDP_RETURN_IF_ERROR(allocate(/*with_output=*/!checkpointed));
  compute();
  if (checkpointed) {
    FloatBuffer out = std::move(a.out);
    a = Activations();
    a.out = std::move(out);
  }
  return absl::OkStatus();
}

}  // namespace fsdp

#endif  // FSDP_NN_DECODER_STEPS_H_
