// File: fsdp/nn/inference_steps.h
//
// What every forward-only model (fsdp/nn/inference_model.h) does around its
// layers, written once: the checks of Begin's inputs and of RunUnit's order
// and size, buffers sized to the forward in flight, and a unit's flat
// parameters cut into pointers in spec order.
#ifndef FSDP_NN_INFERENCE_STEPS_H_
#define FSDP_NN_INFERENCE_STEPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

// The most a model takes: sequences per forward, tokens per sequence,
// vocabulary.
struct InferenceLimits {
  int max_batch;
  int max_seq;
  int vocab;
};

// InvalidArgument naming what is wrong: batch or seq out of range, a token
// count other than batch x seq, a token outside the vocabulary.
absl::Status CheckInferenceInput(absl::Span<const int32_t> tokens, int batch, int seq,
                                 const InferenceLimits& limits);

// FailedPrecondition unless `unit` is `next_unit` (-1: Begin has not run);
// InvalidArgument unless `params` has the unit's size.
absl::Status CheckInferenceUnit(int unit, int next_unit, const UnitSpec& spec,
                                absl::Span<const float> params);

// `buffer` holds exactly `numel` elements of kActivations afterwards: kept
// when it already does (a forward of the same shape), reallocated
// otherwise. ResourceExhausted if the tracker's budget refuses.
template <typename T>
absl::Status SizeInferenceBuffer(MemoryTracker& tracker, TrackedBuffer<T>& buffer, int64_t numel,
                                 const char* what);

// The first `numel` logits once every unit has run (next_unit ==
// num_units); FailedPrecondition before.
absl::StatusOr<absl::Span<const float>> FinishedLogits(int next_unit, int num_units,
                                                       const FloatBuffer& logits, int64_t numel);

// Each parameter's first element in a unit's flat buffer, in spec order.
std::vector<const float*> UnitParamPointers(const UnitSpec& unit, absl::Span<const float> params);

// ---------------------------------------------------------------- template

template <typename T>
absl::Status SizeInferenceBuffer(MemoryTracker& tracker, TrackedBuffer<T>& buffer, int64_t numel,
                                 const char* what) {
  if (buffer.size() == numel) return absl::OkStatus();
  buffer.Reset();
  absl::StatusOr<TrackedBuffer<T>> allocated =
      tracker.Allocate<T>(MemoryCategory::kActivations, numel, std::string("inference ") + what);
  if (!allocated.ok()) return allocated.status();
  buffer = std::move(*allocated);
  return absl::OkStatus();
}

}  // namespace fsdp

#endif  // FSDP_NN_INFERENCE_STEPS_H_
