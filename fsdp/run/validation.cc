// File: fsdp/run/validation.cc
#include "fsdp/run/validation.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/data/token_file.h"
#include "fsdp/exchange/blob_exchange.h"

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
                                                                   int batches, int rank) {
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
  set->seq_len_ = seq_len;
  set->micro_batch_ = micro_batch;
  set->nproc_ = nproc;
  set->batches_ = batches;
  set->vocab_ = vocab;
  const int64_t global_batch = int64_t{micro_batch} * nproc;
  std::vector<int32_t> window(seq_len + 1);
  for (int b = 0; b < batches; ++b) {
    std::vector<int32_t> inputs, targets;
    for (int j = 0; j < micro_batch; ++j) {
      const int64_t index = b * global_batch + int64_t{rank} * micro_batch + j;
      FSDP_RETURN_IF_ERROR((*source)->ReadSequence(index, absl::MakeSpan(window)));
      inputs.insert(inputs.end(), window.begin(), window.end() - 1);
      targets.insert(targets.end(), window.begin() + 1, window.end());
    }
    set->inputs_.push_back(std::move(inputs));
    set->targets_.push_back(std::move(targets));
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

}  // namespace fsdp
