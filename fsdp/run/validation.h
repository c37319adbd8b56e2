// File: fsdp/run/validation.h
//
// The held-out loss (train_gpt --val_data, --val_every, --val_batches).
// The validation set is `batches` global batches of global_batch sequences
// each from an llm.c token file, the same for every world size: sequence
// s = b * global_batch + j of batch b is the file's window s (windows as in
// fsdp/data/token_file.h, wrapping around a short file). Rank r evaluates
// sequences [r * micro_batch, (r + 1) * micro_batch) of every batch, a
// forward only (fsdp/nn/inference_model.h), with each unit's parameters
// gathered whole one unit at a time as the training forward does.
//
// The loss is the mean over every validation token of -log softmax, each
// token's term in double; the ranks sum their terms, exchange the sums (one
// 8-byte all-gather) and add them in rank order, so the value differs across
// world sizes and strategies only by the forward's float rounding.
//
//   FSDP_ASSIGN_OR_RETURN(auto val, ValidationSet::Open(path, vocab, seq_len,
//                                                       micro_batch, nproc, batches, rank));
//   FSDP_ASSIGN_OR_RETURN(double loss, val->Evaluate(forward, units, world, timeout));
#ifndef FSDP_RUN_VALIDATION_H_
#define FSDP_RUN_VALIDATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "fsdp/nn/inference_model.h"
#include "fsdp/run/model_forward.h"

namespace fsdp {

// -sum over positions of log softmax(logits_i)[targets_i], in double.
// logits: (n, vocab).
double SumNegLogLikelihood(absl::Span<const float> logits, absl::Span<const int32_t> targets,
                           int vocab);

class ValidationSet {
 public:
  // The token file's errors (missing, bad header, a token outside vocab),
  // prefixed with "--val_data"; InvalidArgument for batches < 1.
  // `exact` (--exact, docs/exact.md): the set is `batches` global batches
  // (micro_batch x accum x nproc sequences each), whatever the split, and
  // Evaluate sums the sequences' losses exactly; otherwise `batches`
  // micro-batches per rank (accum is not read).
  static absl::StatusOr<std::unique_ptr<ValidationSet>> Open(const std::string& path, int vocab,
                                                             int seq_len, int micro_batch,
                                                             int nproc, int batches, int rank,
                                                             int accum = 1, bool exact = false);

  // Collective: every rank calls it with the same model. The mean loss per
  // validation token; with `exact` the same bits for every split of the set
  // among ranks and forward calls (each sequence's summed loss is one
  // contribution to an exact fixed-point sum, fsdp/nn/fixed_point_sum.h).
  // The forward model must then compute per sequence.
  absl::StatusOr<double> Evaluate(InferenceModel& forward, const ForEachModelUnit& units,
                                  comm::Communicator& world, absl::Duration timeout) const;

  int batches() const { return batches_; }  // forward calls per evaluation on a rank
  int64_t tokens() const;  // validation tokens per evaluation, all ranks
  // This rank's (inputs, targets) of batch b, micro_batch x seq_len each.
  const std::vector<int32_t>& inputs(int b) const { return inputs_[b]; }
  const std::vector<int32_t>& targets(int b) const { return targets_[b]; }

 private:
  ValidationSet() = default;
  absl::StatusOr<double> EvaluateExactly(InferenceModel& forward, const ForEachModelUnit& units,
                                         comm::Communicator& world,
                                         absl::Duration timeout) const;
  int seq_len_ = 0;
  int micro_batch_ = 0;
  int nproc_ = 0;
  int batches_ = 0;
  int vocab_ = 0;
  bool exact_ = false;
  std::vector<std::vector<int32_t>> inputs_, targets_;
};

}  // namespace fsdp

#endif  // FSDP_RUN_VALIDATION_H_
