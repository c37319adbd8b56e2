// File: fsdp/data/markov_source.cc
#include "fsdp/data/markov_source.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "fsdp/nn/init_rng.h"

namespace fsdp {
namespace {

std::vector<double> SuccessorProbabilities(int branching) {
  std::vector<double> p(branching);
  double remaining = 1.0;
  for (int j = 0; j + 1 < branching; ++j) {
    p[j] = remaining / 2;
    remaining -= p[j];
  }
  p[branching - 1] = remaining;
  return p;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MarkovTokenSource>> MarkovTokenSource::Create(int vocab,
                                                                             uint64_t seed,
                                                                             int branching) {
  if (vocab < 1) {
    return absl::InvalidArgumentError(absl::StrCat("vocab must be positive, got ", vocab));
  }
  if (branching < 1 || branching > std::min(vocab, 16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "branching must lie in [1, min(vocab, 16)] = [1, ", std::min(vocab, 16), "], got ",
        branching));
  }
  return std::unique_ptr<MarkovTokenSource>(new MarkovTokenSource(vocab, seed, branching));
}

MarkovTokenSource::MarkovTokenSource(int vocab, uint64_t seed, int branching)
    : vocab_(vocab), key_(Mix64(seed ^ 0x6D61726B6F76ull)), branching_(branching) {
  const std::vector<double> p = SuccessorProbabilities(branching);
  double sum = 0.0;
  for (double x : p) cumulative_.push_back(sum += x);
  cumulative_.back() = 1.0;
  // Distinct successors per token, by rejection from a counter-based stream.
  successors_.resize(static_cast<size_t>(vocab) * branching);
  const uint64_t table_key = Mix64(key_ ^ 0x7461626C65ull);
  for (int a = 0; a < vocab; ++a) {
    int32_t* row = &successors_[static_cast<size_t>(a) * branching];
    uint64_t counter = static_cast<uint64_t>(a) << 32;
    for (int j = 0; j < branching;) {
      const int32_t b = static_cast<int32_t>(Mix64(table_key ^ Mix64(counter++)) % vocab);
      if (std::find(row, row + j, b) == row + j) row[j++] = b;
    }
  }
}

absl::Status MarkovTokenSource::ReadSequence(int64_t index, absl::Span<int32_t> out) const {
  if (index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sequence index must be >= 0, got ", index));
  }
  if (out.empty()) return absl::OkStatus();
  const uint64_t sequence_key = Mix64(key_ ^ Mix64(static_cast<uint64_t>(index)));
  int32_t token = static_cast<int32_t>(Mix64(sequence_key) % vocab_);
  out[0] = token;
  for (size_t t = 1; t < out.size(); ++t) {
    const double u = CounterUniform(sequence_key, t);
    int j = 0;
    while (j + 1 < branching_ && u >= cumulative_[j]) ++j;
    token = successors_[static_cast<size_t>(token) * branching_ + j];
    out[t] = token;
  }
  return absl::OkStatus();
}

double MarkovTokenSource::EntropyNats() const {
  double h = 0.0;
  for (double p : SuccessorProbabilities(branching_)) h -= p * std::log(p);
  return h;
}

double MarkovTokenSource::TransitionProbability(int32_t a, int32_t b) const {
  const std::vector<double> p = SuccessorProbabilities(branching_);
  double total = 0.0;
  for (int j = 0; j < branching_; ++j) {
    if (successors_[static_cast<size_t>(a) * branching_ + j] == b) total += p[j];
  }
  return total;
}

}  // namespace fsdp
