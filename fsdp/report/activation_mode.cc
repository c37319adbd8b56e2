// File: fsdp/report/activation_mode.cc
#include "fsdp/report/activation_mode.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fsdp {
namespace report {

ActivationMode ActivationModeOf(const GptConfig& config) {
  return {config.activation_checkpoint_every, config.flash_attention};
}

absl::Status ApplyActivationMode(const ActivationMode& mode, GptConfig& config) {
  GptConfig changed = config;
  changed.activation_checkpoint_every = mode.checkpoint_every;
  changed.flash_attention = mode.flash_attention;
  if (absl::Status valid = ValidateGptConfig(changed); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("activation mode ", ActivationModeName(mode),
                                                   " on ", GptConfigToString(config), ": ",
                                                   valid.message()));
  }
  config = changed;
  return absl::OkStatus();
}

ActivationMode ActivationModeOf(const LlamaConfig& config) {
  return {config.activation_checkpoint_every, config.flash_attention};
}

ActivationMode ActivationModeOf(const MemoryPoint& point) {
  return point.family == ModelFamily::kLlama ? ActivationModeOf(point.llama)
                                             : ActivationModeOf(point.config);
}

absl::Status ApplyActivationMode(const ActivationMode& mode, LlamaConfig& config) {
  LlamaConfig changed = config;
  changed.activation_checkpoint_every = mode.checkpoint_every;
  changed.flash_attention = mode.flash_attention;
  if (absl::Status valid = ValidateLlamaConfig(changed); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("activation mode ", ActivationModeName(mode),
                                                   " on llama ", LlamaConfigToString(config), ": ",
                                                   valid.message()));
  }
  config = changed;
  return absl::OkStatus();
}

absl::Status ApplyActivationMode(const ActivationMode& mode, MemoryPoint& point) {
  return point.family == ModelFamily::kLlama ? ApplyActivationMode(mode, point.llama)
                                             : ApplyActivationMode(mode, point.config);
}

std::string ActivationModeName(const ActivationMode& mode) {
  if (mode.checkpoint_every == 0) return mode.flash_attention ? "flash" : "none";
  const std::string checkpointing = ActivationCheckpointingName(mode.checkpoint_every);
  return mode.flash_attention ? checkpointing + "+flash" : checkpointing;
}

std::string ActivationModeFlags(const ActivationMode& mode) {
  std::string flags;
  if (mode.checkpoint_every != 0) {
    flags = absl::StrCat("--activation_checkpointing=",
                         ActivationCheckpointingName(mode.checkpoint_every));
  }
  if (mode.flash_attention) absl::StrAppend(&flags, flags.empty() ? "" : " ", "--attention=flash");
  return flags;
}

namespace {

// "none" 0, "all" 1, "every:K" K >= 1; the layer bound comes when applied.
absl::StatusOr<int> ParseCheckpointing(absl::string_view item) {
  if (item == "none") return 0;
  if (item == "all") return 1;
  absl::string_view k_text = item;
  int k = 0;
  if (absl::ConsumePrefix(&k_text, "every:") && absl::SimpleAtoi(k_text, &k) && k >= 1) return k;
  return absl::InvalidArgumentError(absl::StrCat(
      "--activation_checkpointing: '", item,
      "' is not a mode; use a comma-separated list of none, all, every:K (K >= 1)"));
}

}  // namespace

absl::StatusOr<std::vector<ActivationMode>> ParseActivationModes(
    absl::string_view checkpointing, absl::string_view attention) {
  std::vector<int> everies;
  for (absl::string_view item : absl::StrSplit(checkpointing, ',', absl::SkipWhitespace())) {
    absl::StatusOr<int> every = ParseCheckpointing(absl::StripAsciiWhitespace(item));
    if (!every.ok()) return every.status();
    everies.push_back(*every);
  }
  std::vector<bool> flashes;
  for (absl::string_view item : absl::StrSplit(attention, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    if (item != "standard" && item != "flash") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--attention: '", item, "' is not one of standard, flash (comma-separated)"));
    }
    flashes.push_back(item == "flash");
  }
  if (everies.empty()) return absl::InvalidArgumentError("--activation_checkpointing is empty");
  if (flashes.empty()) return absl::InvalidArgumentError("--attention is empty");
  std::vector<ActivationMode> modes;
  for (int every : everies) {
    for (bool flash : flashes) {
      const ActivationMode mode{every, flash};
      if (std::find(modes.begin(), modes.end(), mode) == modes.end()) modes.push_back(mode);
    }
  }
  return modes;
}

namespace {

// The ladder of ActivationModesByCost.
constexpr ActivationMode kModesByCost[] = {{0, true}, {2, false}, {2, true}, {1, false}, {1, true}};

}  // namespace

std::vector<ActivationMode> ActivationModesByCost(const GptConfig& config) {
  std::vector<ActivationMode> modes;
  for (const ActivationMode& mode : kModesByCost) {
    GptConfig candidate = config;
    if (ApplyActivationMode(mode, candidate).ok()) modes.push_back(mode);
  }
  return modes;
}

std::vector<ActivationMode> ActivationModesByCost(const MemoryPoint& point) {
  std::vector<ActivationMode> modes;
  for (const ActivationMode& mode : kModesByCost) {
    MemoryPoint candidate = point;
    if (ApplyActivationMode(mode, candidate).ok()) modes.push_back(mode);
  }
  return modes;
}

}  // namespace report
}  // namespace fsdp
