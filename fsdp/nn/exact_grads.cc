// File: fsdp/nn/exact_grads.cc
#include "fsdp/nn/exact_grads.h"

#include "base/status_macros.h"
#include "fsdp/nn/fixed_point_sum.h"

namespace fsdp {

void AddToUnitExactSums(const UnitSpec& spec, absl::Span<const float> scratch,
                        absl::Span<int64_t> sums, const ExactGradSums& exact) {
  FSDP_CHECK(static_cast<int64_t>(scratch.size()) == spec.numel() &&
             static_cast<int64_t>(sums.size()) == spec.numel());
  FSDP_CHECK(exact.exponents.size() == spec.params.size() &&
             exact.max_abs.size() == spec.params.size());
  int64_t offset = 0;
  for (size_t k = 0; k < spec.params.size(); ++k) {
    const int64_t n = spec.params[k].numel();
    const float m = AddToExactSum(exact.exponents[k], scratch.subspan(offset, n),
                                  sums.subspan(offset, n));
    exact.max_abs[k] = LargerMagnitude(exact.max_abs[k], m);
    offset += n;
  }
}

void AddEmbeddingRowsToExactSums(absl::Span<int64_t> wte_sums, int wte_exponent,
                                 float* wte_max_abs, absl::Span<int64_t> wpe_sums,
                                 int wpe_exponent, float* wpe_max_abs, const float* dout,
                                 const int32_t* tokens, int batch, int seq_len, int channels) {
  const int64_t c = channels;
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq_len; ++t) {
      const int64_t row = int64_t{b} * seq_len + t;
      const absl::Span<const float> grad(dout + row * c, c);
      const int64_t token = tokens[row];
      FSDP_CHECK((token + 1) * c <= static_cast<int64_t>(wte_sums.size()) &&
                 (t + 1) * c <= static_cast<int64_t>(wpe_sums.size()));
      *wte_max_abs = LargerMagnitude(
          *wte_max_abs, AddToExactSum(wte_exponent, grad, wte_sums.subspan(token * c, c)));
      *wpe_max_abs = LargerMagnitude(
          *wpe_max_abs, AddToExactSum(wpe_exponent, grad, wpe_sums.subspan(t * c, c)));
    }
  }
}

void AddTokenRowsToExactSums(absl::Span<int64_t> sums, int exponent, float* max_abs,
                             const float* dout, const int32_t* tokens, int64_t n, int channels) {
  const int64_t c = channels;
  for (int64_t row = 0; row < n; ++row) {
    const int64_t token = tokens[row];
    FSDP_CHECK((token + 1) * c <= static_cast<int64_t>(sums.size()));
    *max_abs = LargerMagnitude(*max_abs,
                               AddToExactSum(exponent, absl::Span<const float>(dout + row * c, c),
                                             sums.subspan(token * c, c)));
  }
}

}  // namespace fsdp
