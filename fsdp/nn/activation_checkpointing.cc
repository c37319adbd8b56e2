// File: fsdp/nn/activation_checkpointing.cc
#include "fsdp/nn/activation_checkpointing.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace fsdp {
namespace {

std::string AcceptedForms(int layers) {
  return absl::StrCat("use none, all, or every:K with K from 1 to the number of blocks (", layers,
                      ")");
}

// The K range check of every:K, naming the flag as `text` spelled it.
absl::Status CheckEvery(absl::string_view text, int every, int layers) {
  if (every >= 1 && every <= layers) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--activation_checkpointing=", text, ": K must be between 1 and the number of blocks (",
      layers, "), got ", every, "; ", AcceptedForms(layers)));
}

}  // namespace

int ActivationCheckpointing::checkpoint_every() const {
  if (mode == Mode::kNone) return 0;
  return mode == Mode::kAll ? 1 : every;
}

absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(absl::string_view text,
                                                                     int layers) {
  ActivationCheckpointing value;
  if (text == "none") return value;
  if (text == "all") {
    value.mode = ActivationCheckpointing::Mode::kAll;
    return value;
  }
  absl::string_view k_text = text;
  if (!absl::ConsumePrefix(&k_text, "every:") || !absl::SimpleAtoi(k_text, &value.every)) {
    return absl::InvalidArgumentError(absl::StrCat("--activation_checkpointing=", text,
                                                   " is not a mode; ", AcceptedForms(layers)));
  }
  value.mode = ActivationCheckpointing::Mode::kEvery;
  FSDP_RETURN_IF_ERROR(CheckEvery(text, value.every, layers));
  return value;
}

absl::Status ValidateActivationCheckpointing(const ActivationCheckpointing& value, int layers) {
  if (value.mode != ActivationCheckpointing::Mode::kEvery) return absl::OkStatus();
  return CheckEvery(ActivationCheckpointingName(value), value.every, layers);
}

std::string ActivationCheckpointingName(const ActivationCheckpointing& value) {
  if (value.mode == ActivationCheckpointing::Mode::kEvery) {
    return absl::StrCat("every:", value.every);
  }
  return value.mode == ActivationCheckpointing::Mode::kAll ? "all" : "none";
}

ActivationCheckpointing ActivationCheckpointingOf(int activation_checkpoint_every) {
  ActivationCheckpointing value;
  if (activation_checkpoint_every == 1) {
    value.mode = ActivationCheckpointing::Mode::kAll;
  } else if (activation_checkpoint_every > 1) {
    value.mode = ActivationCheckpointing::Mode::kEvery;
    value.every = activation_checkpoint_every;
  }
  return value;
}

std::string ActivationCheckpointingName(int activation_checkpoint_every) {
  return ActivationCheckpointingName(ActivationCheckpointingOf(activation_checkpoint_every));
}

}  // namespace fsdp
