// File: fsdp/nn/exact_grads.h
//
// How a per-sequence model adds its contributions to a unit's exact
// gradient sums (ExactGradSums in fsdp/nn/model.h, the sums themselves in
// fsdp/nn/fixed_point_sum.h): one sequence's gradients, computed in fp32
// into the unit's scratch, go in parameter by parameter, each at its own
// exponent; the embedding's go in one token's row at a time, straight from
// the residual stream's gradient, so no vocabulary-sized scratch is written
// per sequence.
//
//   for (int s = 0; s < batch; ++s) {
//     ... one sequence's backward into g (the fp32 scratch, kOverwrite) ...
//     AddToUnitExactSums(spec, scratch, sums, exact);
//   }
#ifndef FSDP_NN_EXACT_GRADS_H_
#define FSDP_NN_EXACT_GRADS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "fsdp/nn/model.h"
#include "fsdp/nn/param_spec.h"

namespace fsdp {

// For every parameter k of `spec`: sums_k += the scratch's values of k at
// exponents[k]; max_abs[k] grows to the largest |value| added. `scratch`
// and `sums` have the unit's layout (spec order, back to back).
void AddToUnitExactSums(const UnitSpec& spec, absl::Span<const float> scratch,
                        absl::Span<int64_t> sums, const ExactGradSums& exact);

// The token and position embeddings' contributions, one per token of the
// batch x seq_len `tokens`: row dout[b, t] added into row tokens[b, t] of
// `wte_sums` (at `wte_exponent`) and into row t of `wpe_sums` (at
// `wpe_exponent`); the largest |value| into *wte_max_abs and *wpe_max_abs.
// Every token's row is its own contribution: the same integers for any
// split of the tokens among calls, in any order.
void AddEmbeddingRowsToExactSums(absl::Span<int64_t> wte_sums, int wte_exponent,
                                 float* wte_max_abs, absl::Span<int64_t> wpe_sums,
                                 int wpe_exponent, float* wpe_max_abs, const float* dout,
                                 const int32_t* tokens, int batch, int seq_len, int channels);

// The token embedding's alone (a model without position embeddings, the
// Llama): row dout[i] into row tokens[i] of `sums`, for the n tokens.
void AddTokenRowsToExactSums(absl::Span<int64_t> sums, int exponent, float* max_abs,
                             const float* dout, const int32_t* tokens, int64_t n, int channels);

}  // namespace fsdp

#endif  // FSDP_NN_EXACT_GRADS_H_
