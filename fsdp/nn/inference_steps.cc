// File: fsdp/nn/inference_steps.cc
#include "fsdp/nn/inference_steps.h"

#include "absl/strings/str_cat.h"

namespace fsdp {

absl::Status CheckInferenceInput(absl::Span<const int32_t> tokens, int batch, int seq,
                                 const InferenceLimits& limits) {
  if (batch < 1 || batch > limits.max_batch || seq < 1 || seq > limits.max_seq) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward of ", batch, " x ", seq, " tokens; this model takes 1..",
                     limits.max_batch, " sequences of 1..", limits.max_seq, " tokens"));
  }
  if (tokens.size() != static_cast<size_t>(batch) * seq) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward got ", tokens.size(), " tokens for ", batch, " x ", seq));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= limits.vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", i, " = ", tokens[i], " is outside the vocabulary [0, ", limits.vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckInferenceUnit(int unit, int next_unit, const UnitSpec& spec,
                                absl::Span<const float> params) {
  if (next_unit < 0 || unit != next_unit) {
    return absl::FailedPreconditionError(
        absl::StrCat("inference RunUnit(", unit, ") out of order; expected ",
                     next_unit < 0 ? "Begin" : absl::StrCat("RunUnit(", next_unit, ")")));
  }
  if (params.size() != static_cast<size_t>(spec.numel())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inference unit ", spec.name, " got ", params.size(), " parameters, needs ", spec.numel()));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const float>> FinishedLogits(int next_unit, int num_units,
                                                       const FloatBuffer& logits, int64_t numel) {
  if (next_unit != num_units) {
    return absl::FailedPreconditionError(
        "inference logits() before the last unit ran; run every unit after Begin");
  }
  return absl::Span<const float>(logits.data(), numel);
}

std::vector<const float*> UnitParamPointers(const UnitSpec& unit, absl::Span<const float> params) {
  std::vector<const float*> out;
  int64_t offset = 0;
  for (const ParamSpec& p : unit.params) {
    out.push_back(params.data() + offset);
    offset += p.numel();
  }
  return out;
}

}  // namespace fsdp
