// File: fsdp/nn/decoder_steps.cc
#include "fsdp/nn/decoder_steps.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/nn/batch_checks.h"

namespace fsdp {

absl::Status CheckCreateArguments(int micro_batch, const MemoryTracker* tracker,
                                  absl::string_view model) {
  if (micro_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batch must be at least 1, got ", micro_batch));
  }
  if (tracker == nullptr) return absl::InvalidArgumentError(absl::StrCat(model, " needs a MemoryTracker"));
  return absl::OkStatus();
}

absl::Status RunDecoderForward(UnitOrder& order, int unit, const Batch& batch,
                               const DecoderBatchShape& shape,
                               absl::FunctionRef<absl::Status()> embedding,
                               absl::FunctionRef<absl::Status(int layer)> block,
                               absl::FunctionRef<absl::Status()> head) {
  FSDP_RETURN_IF_ERROR(order.CheckForward(unit));
  if (unit == 0) {
    FSDP_RETURN_IF_ERROR(ValidateBatch(batch, shape.micro_batch, shape.seq_len, shape.vocab));
  } else if (batch.batch_size != shape.step_batch || batch.seq_len != shape.step_seq) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ForwardUnit(", unit, ") got a ", batch.batch_size, "x", batch.seq_len,
        " batch but the step started with ", shape.step_batch, "x", shape.step_seq));
  }
  if (unit == 0) {
    FSDP_RETURN_IF_ERROR(embedding());
  } else if (unit == order.num_units() - 1) {
    FSDP_RETURN_IF_ERROR(head());
  } else {
    FSDP_RETURN_IF_ERROR(block(unit - 1));
  }
  order.ForwardDone(unit);
  return absl::OkStatus();
}

absl::Status CheckUnitParams(ConstDtypeSpan params, comm::Dtype dtype, const UnitSpec& unit) {
  FSDP_RETURN_IF_ERROR(CheckParamDtype(params, dtype, unit.name));
  if (params.size() != unit.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(unit.name, ": got ", params.size(),
                                                   " parameters, the unit has ", unit.numel()));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrackedBuffer<int32_t>> SaveTokens(MemoryTracker& tracker,
                                                  const std::vector<int32_t>& tokens, int64_t n,
                                                  absl::string_view label) {
  FSDP_ASSIGN_OR_RETURN(TrackedBuffer<int32_t> saved,
                        tracker.Allocate<int32_t>(MemoryCategory::kActivations, n, label));
  std::memcpy(saved.data(), tokens.data(), sizeof(int32_t) * n);
  return saved;
}

}  // namespace fsdp
