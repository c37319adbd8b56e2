// File: fsdp/run/text_monitor.h
//
// What a language-model run shows besides its training loss: the held-out
// loss (fsdp/run/validation.h) and text sampled from the current model
// (fsdp/run/sampler.h), on the schedule TrainOptions asks for
// (--val_data, --val_every, --val_batches, --sample_every, --sample_tokens,
// --prompt, --temperature, --top_k, --sample_seed, --tokenizer).
// RunTraining drives it between steps; both evaluations are collective and
// gather each unit whole, one at a time, into a tracked buffer.
//
//   FSDP_ASSIGN_OR_RETURN(auto monitor, TextMonitor::Create(options, rank, &tracker));
//   if (monitor->ValDue(step)) FSDP_ASSIGN_OR_RETURN(double val, monitor->Validate(trainer, world));
//   if (monitor->SampleDue(step)) FSDP_ASSIGN_OR_RETURN(std::string text, monitor->Sample(trainer));
#ifndef FSDP_RUN_TEXT_MONITOR_H_
#define FSDP_RUN_TEXT_MONITOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/inference_model.h"
#include "fsdp/run/sampler.h"
#include "fsdp/run/train_options.h"
#include "fsdp/run/validation.h"
#include "fsdp/text/byte_bpe.h"
#include "fsdp/train/train_step.h"

namespace fsdp {

// The tokenizer a run decodes with: options.tokenizer, else
// PREFIX.tokenizer beside a --data PREFIX_train.bin when it exists, else
// the byte-level one. InvalidArgument when its vocabulary is larger than
// --vocab or the file is malformed (naming it).
absl::StatusOr<text::ByteBpe> RunTokenizer(const TrainOptions& options);

// The text flags alone, and the files they name (the validation file opens
// and fits --vocab and --seq_len; the tokenizer loads): one clear error
// before any rank starts.
absl::Status ValidateTextOptions(const TrainOptions& options);

class TextMonitor {
 public:
  static absl::StatusOr<std::unique_ptr<TextMonitor>> Create(const TrainOptions& options,
                                                             int rank, MemoryTracker* tracker);

  // Step 0 is the evaluation before the first step.
  bool ValDue(int step) const;
  bool SampleDue(int step) const;
  bool samples_at_end() const { return options_.sample_tokens > 0; }
  bool has_val() const { return val_ != nullptr; }
  int64_t val_tokens() const { return val_ == nullptr ? 0 : val_->tokens(); }

  absl::StatusOr<double> Validate(DataParallelTrainer& trainer, comm::Communicator& world);
  // The prompt and what the model writes after it, decoded.
  absl::StatusOr<std::string> Sample(DataParallelTrainer& trainer);
  std::string SampleDescription() const;  // "temperature 0.8, top_k 40, seed 1"

 private:
  TextMonitor(const TrainOptions& options, text::ByteBpe tokenizer)
      : options_(options), tokenizer_(std::move(tokenizer)) {}

  const TrainOptions options_;
  text::ByteBpe tokenizer_;
  std::unique_ptr<ValidationSet> val_;
  std::unique_ptr<InferenceModel> forward_;  // (micro_batch, seq_len) at most
};

}  // namespace fsdp

#endif  // FSDP_RUN_TEXT_MONITOR_H_
