// File: fsdp/nn/batch_checks.cc
#include "fsdp/nn/batch_checks.h"

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace {

absl::Status CheckTokens(const std::vector<int32_t>& tokens, const char* what, int vocab) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("batch ", what, "[", i, "] = ", tokens[i],
                                                     " is outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBatch(const Batch& batch, int max_batch, int max_seq_len, int vocab) {
  if (batch.batch_size < 1 || batch.batch_size > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size ", batch.batch_size,
                                                   " is outside [1, ", max_batch,
                                                   "], the micro-batch the model was built for"));
  }
  if (batch.seq_len < 1 || batch.seq_len > max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "seq_len ", batch.seq_len, " is outside [1, ", max_seq_len, "] (the config's seq_len)"));
  }
  const size_t n = static_cast<size_t>(batch.batch_size) * batch.seq_len;
  if (batch.inputs.size() != n || batch.targets.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch holds ", batch.inputs.size(), " inputs and ", batch.targets.size(),
        " targets; batch_size * seq_len = ", n));
  }
  absl::Status status = CheckTokens(batch.inputs, "inputs", vocab);
  if (!status.ok()) return status;
  return CheckTokens(batch.targets, "targets", vocab);
}

}  // namespace fsdp
