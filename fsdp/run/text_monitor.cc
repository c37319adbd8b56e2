// File: fsdp/run/text_monitor.cc
#include "fsdp/run/text_monitor.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "fsdp/run/model_forward.h"
#include "fsdp/run/model_registry.h"
#include "fsdp/text/tokenizer_file.h"

namespace fsdp {
namespace {

SampleOptions SampleOptionsOf(const TrainOptions& options) {
  SampleOptions sample;
  sample.num_tokens = options.sample_tokens;
  sample.temperature = options.temperature;
  sample.top_k = options.top_k;
  sample.seed = options.sample_seed;
  return sample;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

absl::StatusOr<text::ByteBpe> RunTokenizer(const TrainOptions& options) {
  std::string path = options.tokenizer;
  if (path.empty() && absl::EndsWith(options.data, "_train.bin")) {
    const std::string beside = absl::StrCat(
        options.data.substr(0, options.data.size() - std::string("_train.bin").size()),
        ".tokenizer");
    if (FileExists(beside)) path = beside;
  }
  text::ByteBpe tokenizer;
  if (!path.empty()) {
    absl::StatusOr<text::ByteBpe> parsed = text::LoadByteBpe(path);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat("--tokenizer: ", parsed.status().message()));
    }
    tokenizer = std::move(*parsed);
  }
  if (!path.empty() && tokenizer.vocab_size() > options.vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tokenizer ", path, " has ", tokenizer.vocab_size(), " tokens but --vocab=",
        options.vocab, "; use --vocab=", tokenizer.vocab_size(), " or more"));
  }
  return tokenizer;
}

absl::Status ValidateTextOptions(const TrainOptions& options) {
  if (options.val_every < 0 || options.sample_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--val_every=", options.val_every, " and --sample_every=", options.sample_every,
        " must be >= 0 (0 = not on a schedule)"));
  }
  if (options.val_every > 0 && options.val_data.empty()) {
    return absl::InvalidArgumentError(
        "--val_every needs --val_data=FILE (the tokenize example writes PREFIX_val.bin)");
  }
  if (options.sample_every > 0 && options.sample_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sample_every=", options.sample_every, " needs --sample_tokens > 0"));
  }
  FSDP_RETURN_IF_ERROR(ValidateSampleOptions(SampleOptionsOf(options)));
  if (!options.val_data.empty()) {
    FSDP_RETURN_IF_ERROR(ValidationSet::Open(options.val_data, options.vocab, options.seq_len,
                                             options.micro_batch, options.nproc,
                                             options.val_batches, 0)
                             .status());
  }
  if (options.sample_tokens > 0) {
    FSDP_ASSIGN_OR_RETURN(text::ByteBpe tokenizer, RunTokenizer(options));
    const std::vector<uint16_t> prompt =
        tokenizer.Encode(options.prompt.empty() ? "\n" : options.prompt);
    for (uint16_t t : prompt) {
      if (t >= options.vocab) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--prompt encodes to token ", t, ", outside --vocab=", options.vocab,
            " (byte-level tokens are the bytes: use a larger --vocab or an ASCII prompt)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TextMonitor>> TextMonitor::Create(const TrainOptions& options,
                                                                 int rank,
                                                                 MemoryTracker* tracker) {
  FSDP_RETURN_IF_ERROR(ValidateTextOptions(options));
  FSDP_ASSIGN_OR_RETURN(text::ByteBpe tokenizer, RunTokenizer(options));
  std::unique_ptr<TextMonitor> monitor(new TextMonitor(options, std::move(tokenizer)));
  if (!options.val_data.empty()) {
    FSDP_ASSIGN_OR_RETURN(monitor->val_,
                          ValidationSet::Open(options.val_data, options.vocab, options.seq_len,
                                              options.micro_batch, options.nproc,
                                              options.val_batches, rank, options.accum,
                                              options.sharding.precision.reduction ==
                                                  ReductionKind::kExact));
  }
  if (!options.val_data.empty() || options.sample_tokens > 0) {
    FSDP_ASSIGN_OR_RETURN(const ModelFactory* factory, FindModel(options.model));
    if (factory->create_inference == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model=", options.model, " has no forward-only model yet: leave out --val_data and "
          "--sample_tokens"));
    }
    FSDP_ASSIGN_OR_RETURN(monitor->forward_,
                          factory->create_inference(options, options.micro_batch, tracker));
  }
  return monitor;
}

bool TextMonitor::ValDue(int step) const {
  if (val_ == nullptr) return false;
  return step == 0 || step == options_.steps ||
         (options_.val_every > 0 && step % options_.val_every == 0);
}

bool TextMonitor::SampleDue(int step) const {
  return options_.sample_every > 0 && options_.sample_tokens > 0 && step > 0 &&
         step % options_.sample_every == 0 && step != options_.steps;
}

absl::StatusOr<double> TextMonitor::Validate(DataParallelTrainer& trainer,
                                             comm::Communicator& world) {
  return val_->Evaluate(*forward_, TrainerModelUnits(trainer), world, options_.comm_timeout);
}

absl::StatusOr<std::string> TextMonitor::Sample(DataParallelTrainer& trainer) {
  const std::vector<uint16_t> encoded =
      tokenizer_.Encode(options_.prompt.empty() ? "\n" : options_.prompt);
  const std::vector<int32_t> prompt(encoded.begin(), encoded.end());
  FSDP_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                        SampleTokens(*forward_, TrainerModelUnits(trainer), prompt,
                                     SampleOptionsOf(options_)));
  const std::vector<uint16_t> out(tokens.begin(), tokens.end());
  return tokenizer_.Decode(out);
}

std::string TextMonitor::SampleDescription() const {
  return options_.temperature == 0.0
             ? std::string("greedy")
             : absl::StrFormat("temperature %g, top_k %d, seed %d", options_.temperature,
                               options_.top_k, options_.sample_seed);
}

}  // namespace fsdp
