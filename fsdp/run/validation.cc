// File: fsdp/run/validation.cc
#include "fsdp/run/validation.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/data/token_file.h"
#include "fsdp/exchange/blob_exchange.h"
#include "fsdp/nn/fixed_point_sum.h"

namespace fsdp {

double SumNegLogLikelihood(absl::Span<const float> logits, absl::Span<const int32_t> targets,
                           int vocab) {
  double total = 0.0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const float* row = logits.data() + i * vocab;
    double max = row[0];
    for (int v = 1; v < vocab; ++v) max = std::max<double>(max, row[v]);
    double sum = 0.0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
    total += std::log(sum) + max - row[targets[i]];
  }
  return total;
}

absl::StatusOr<std::unique_ptr<ValidationSet>> ValidationSet::Open(const std::string& path,
                                                                   int vocab, int seq_len,
                                                                   int micro_batch, int nproc,
                                                                   int batches, int rank,
                                                                   int accum, bool exact) {
  if (batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--val_batches=", batches, " must be >= 1 with --val_data"));
  }
  absl::StatusOr<std::unique_ptr<TokenFileSource>> source = TokenFileSource::Open(path, vocab);
  if (!source.ok()) {
    return absl::Status(source.status().code(),
                        absl::StrCat("--val_data: ", source.status().message()));
  }
  if ((*source)->num_tokens() < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--val_data ", path, " holds ", (*source)->num_tokens(), " tokens, fewer than one "
        "sequence of --seq_len=", seq_len, " + 1; hold out more text or shorten --seq_len"));
  }
  std::unique_ptr<ValidationSet> set(new ValidationSet());
  // Each of `batches` batches of `nproc` ranks' `per_rank` sequences, read in
  // forward calls of micro_batch.
  const int calls_per_batch = exact ? accum : 1;
  const int64_t per_rank = int64_t{micro_batch} * calls_per_batch;
  set->seq_len_ = seq_len;
  set->micro_batch_ = micro_batch;
  set->nproc_ = nproc;
  set->batches_ = batches * calls_per_batch;
  set->vocab_ = vocab;
  set->exact_ = exact;
  const int64_t global_batch = per_rank * nproc;
  std::vector<int32_t> window(seq_len + 1);
  for (int b = 0; b < batches; ++b) {
    for (int call = 0; call < calls_per_batch; ++call) {
      std::vector<int32_t> inputs, targets;
      for (int j = 0; j < micro_batch; ++j) {
        const int64_t index =
            b * global_batch + int64_t{rank} * per_rank + int64_t{call} * micro_batch + j;
        FSDP_RETURN_IF_ERROR((*source)->ReadSequence(index, absl::MakeSpan(window)));
        inputs.insert(inputs.end(), window.begin(), window.end() - 1);
        targets.insert(targets.end(), window.begin() + 1, window.end());
      }
      set->inputs_.push_back(std::move(inputs));
      set->targets_.push_back(std::move(targets));
    }
  }
  return set;
}

int64_t ValidationSet::tokens() const {
  return int64_t{batches_} * micro_batch_ * nproc_ * seq_len_;
}

absl::StatusOr<double> ValidationSet::Evaluate(InferenceModel& forward,
                                               const ForEachModelUnit& units,
                                               comm::Communicator& world,
                                               absl::Duration timeout) const {
  if (exact_) return EvaluateExactly(forward, units, world, timeout);
  double local = 0.0;
  for (int b = 0; b < batches_; ++b) {
    FSDP_RETURN_IF_ERROR(RunForward(forward, units, inputs_[b], micro_batch_, seq_len_));
    FSDP_ASSIGN_OR_RETURN(absl::Span<const float> logits, forward.logits());
    local += SumNegLogLikelihood(logits, targets_[b], vocab_);
  }
  uint64_t bits;
  std::memcpy(&bits, &local, sizeof(bits));
  FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> sums,
                        AllGatherU64(world, bits, timeout, "validation loss"));
  double total = 0.0;
  for (uint64_t s : sums) {
    double value;
    std::memcpy(&value, &s, sizeof(value));
    total += value;
  }
  return total / static_cast<double>(tokens());
}

// Each sequence's summed loss is one contribution: the ranks agree on the
// largest (gathered, combined in any order), sum theirs at its exponent as
// int64 and add the ranks' integers (exact in any order).
absl::StatusOr<double> ValidationSet::EvaluateExactly(InferenceModel& forward,
                                                      const ForEachModelUnit& units,
                                                      comm::Communicator& world,
                                                      absl::Duration timeout) const {
  std::vector<float> sequence_losses;
  const int64_t rows = seq_len_;
  for (int b = 0; b < batches_; ++b) {
    FSDP_RETURN_IF_ERROR(RunForward(forward, units, inputs_[b], micro_batch_, seq_len_));
    FSDP_ASSIGN_OR_RETURN(absl::Span<const float> logits, forward.logits());
    for (int s = 0; s < micro_batch_; ++s) {
      sequence_losses.push_back(static_cast<float>(SumNegLogLikelihood(
          logits.subspan(s * rows * vocab_, rows * vocab_),
          absl::MakeConstSpan(targets_[b]).subspan(s * rows, rows), vocab_)));
    }
  }
  float largest = 0.0f;
  for (float l : sequence_losses) largest = LargerMagnitude(largest, l);
  uint32_t largest_bits;
  std::memcpy(&largest_bits, &largest, sizeof(largest_bits));
  FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> maxima,
                        AllGatherU64(world, largest_bits, timeout, "validation loss maxima"));
  for (uint64_t bits : maxima) {
    const uint32_t b32 = static_cast<uint32_t>(bits);
    float m;
    std::memcpy(&m, &b32, sizeof(m));
    largest = LargerMagnitude(largest, m);
  }
  if (!std::isfinite(largest)) return static_cast<double>(largest);
  const int exponent = ExactExponentFor(largest, 0);
  const int64_t sum = ExactSumOfValues(exponent, sequence_losses);
  FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> sums,
                        AllGatherU64(world, static_cast<uint64_t>(sum), timeout,
                                     "validation loss sums"));
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;  // two's complement: the int64 sum
  const int64_t total_signed = static_cast<int64_t>(total);
  float mean = 0.0f;
  FSDP_RETURN_IF_ERROR(ExactSumToFloats(exponent, absl::MakeConstSpan(&total_signed, 1),
                                        tokens(), largest, absl::MakeSpan(&mean, 1)));
  return static_cast<double>(mean);
}

}  // namespace fsdp
