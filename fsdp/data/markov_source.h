// File: fsdp/data/markov_source.h
//
// A seeded synthetic token stream a model can learn: a fixed random sparse
// first-order Markov chain over the vocabulary. Every token has `branching`
// distinct successors, chosen at random once per seed, taken with the fixed
// probabilities 1/2, 1/4, ..., 2^-(k-1), 2^-(k-1) (the last two equal so they
// sum to 1). A model that learns the chain reaches a mean next-token loss of
// the chain's entropy, EntropyNats() (1.21 nats for branching 4), far below
// the ln(vocab) of a uniform guess (5.55 for vocab 256).
//
// Sequence i starts at a uniformly random token and walks the chain; both are
// counter-based functions of (seed, i, position), so sequences are random
// access and identical on every rank.
#ifndef FSDP_DATA_MARKOV_SOURCE_H_
#define FSDP_DATA_MARKOV_SOURCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/data/token_source.h"

namespace fsdp {

class MarkovTokenSource : public TokenSource {
 public:
  // InvalidArgument unless 1 <= branching <= min(vocab, 16) and vocab >= 1.
  static absl::StatusOr<std::unique_ptr<MarkovTokenSource>> Create(int vocab, uint64_t seed,
                                                                   int branching = 4);

  absl::Status ReadSequence(int64_t index, absl::Span<int32_t> out) const override;
  int vocab_size() const override { return vocab_; }

  // The entropy of one transition, in nats: the loss floor for every target.
  double EntropyNats() const;
  // P(next = b | current = a), for tests.
  double TransitionProbability(int32_t a, int32_t b) const;

 private:
  MarkovTokenSource(int vocab, uint64_t seed, int branching);

  int vocab_;
  uint64_t key_;
  int branching_;
  std::vector<double> cumulative_;   // branching_ entries, last = 1
  std::vector<int32_t> successors_;  // vocab_ * branching_
};

}  // namespace fsdp

#endif  // FSDP_DATA_MARKOV_SOURCE_H_
