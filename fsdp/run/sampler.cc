// File: fsdp/run/sampler.cc
#include "fsdp/run/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fsdp {
namespace {

// SplitMix64 of (seed, index): the uniform number of token `index`.
double UniformDraw(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace

absl::Status ValidateSampleOptions(const SampleOptions& options) {
  if (options.num_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sample_tokens=", options.num_tokens, " must be >= 0"));
  }
  if (!(options.temperature >= 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--temperature=", options.temperature, " must be >= 0 (0 = greedy)"));
  }
  if (options.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--top_k=", options.top_k, " must be >= 0 (0 = no limit)"));
  }
  return absl::OkStatus();
}

int ChooseToken(absl::Span<const float> logits, const SampleOptions& options, double draw) {
  const int vocab = static_cast<int>(logits.size());
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  // Largest logit first, lower id first on ties: a total order.
  auto before = [&logits](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (options.temperature == 0.0) return *std::min_element(order.begin(), order.end(), before);
  const int k = options.top_k > 0 ? std::min(options.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  std::vector<double> weights(k);
  const double max = logits[order[0]];
  double sum = 0.0;
  for (int i = 0; i < k; ++i) {
    weights[i] = std::exp((logits[order[i]] - max) / options.temperature);
    sum += weights[i];
  }
  double target = draw * sum;
  for (int i = 0; i < k; ++i) {
    target -= weights[i];
    if (target < 0.0) return order[i];
  }
  return order[k - 1];
}

absl::StatusOr<std::vector<int32_t>> SampleTokens(InferenceModel& forward,
                                                  const ForEachModelUnit& units,
                                                  absl::Span<const int32_t> prompt,
                                                  const SampleOptions& options) {
  FSDP_RETURN_IF_ERROR(ValidateSampleOptions(options));
  if (prompt.empty()) {
    return absl::InvalidArgumentError(
        "sampling needs a prompt of at least one token (e.g. the encoding of \"\\n\")");
  }
  const int vocab = forward.vocab();
  const int window = forward.max_seq_len();
  std::vector<int32_t> tokens(prompt.begin(), prompt.end());
  for (int i = 0; i < options.num_tokens; ++i) {
    const int seq = std::min<int>(static_cast<int>(tokens.size()), window);
    absl::Span<const int32_t> context = absl::MakeConstSpan(tokens).last(seq);
    FSDP_RETURN_IF_ERROR(RunForward(forward, units, context, 1, seq));
    FSDP_ASSIGN_OR_RETURN(absl::Span<const float> logits, forward.logits());
    tokens.push_back(ChooseToken(logits.subspan(int64_t{seq - 1} * vocab, vocab), options,
                                 UniformDraw(options.seed, i)));
  }
  return tokens;
}

}  // namespace fsdp
