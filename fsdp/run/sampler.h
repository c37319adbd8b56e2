// File: fsdp/run/sampler.h
//
// Text out: extends a prompt one token at a time with the model's forward
// (fsdp/nn/inference_model.h) over the last max_seq_len tokens. Each new token
// is one full forward, every unit's parameters gathered whole one unit at
// a time (TrainerModelUnits), so generation needs no more memory than a
// training forward of one sequence. There is no KV cache: each token costs
// a forward over the whole window.
//
// The choice of the next token is a pure function of the logits and a
// seeded counter-based stream (SplitMix64), so a seed gives the same text
// on every machine, every strategy and every world size (up to the forward's
// float rounding, which only matters at near-ties):
//   temperature == 0      greedy: the largest logit, the lowest id on ties;
//   temperature > 0       softmax(logits / temperature) in double, over the
//                         top_k largest logits (0 = all), sampled by one
//                         uniform draw per token.
//
//   SampleOptions options;  options.num_tokens = 200;  options.seed = 7;
//   FSDP_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
//                         SampleTokens(forward, units, prompt, options));
#ifndef FSDP_RUN_SAMPLER_H_
#define FSDP_RUN_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/nn/inference_model.h"
#include "fsdp/run/model_forward.h"

namespace fsdp {

struct SampleOptions {
  int num_tokens = 100;       // tokens to generate after the prompt
  double temperature = 1.0;   // 0 = greedy
  int top_k = 0;              // 0 = the whole vocabulary
  uint64_t seed = 1;
};

// InvalidArgument for a negative count, temperature or top_k, or an empty
// prompt (give at least one token, e.g. the encoding of "\n").
absl::Status ValidateSampleOptions(const SampleOptions& options);

// The next token for one position's logits; `draw` is that token's uniform
// number in [0, 1) (ignored when greedy).
int ChooseToken(absl::Span<const float> logits, const SampleOptions& options, double draw);

// The prompt followed by options.num_tokens generated tokens. Collective
// when `units` is (TrainerModelUnits): every rank must call it with the
// same arguments, and every rank gets the same tokens.
absl::StatusOr<std::vector<int32_t>> SampleTokens(InferenceModel& forward,
                                                  const ForEachModelUnit& units,
                                                  absl::Span<const int32_t> prompt,
                                                  const SampleOptions& options);

}  // namespace fsdp

#endif  // FSDP_RUN_SAMPLER_H_
