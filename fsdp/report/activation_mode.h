// File: fsdp/report/activation_mode.h
//
// The activation memory levers of a GPT or Llama run as one value the memory
// report can sweep and the budget check can suggest: activation checkpointing
// (none, every:K, all) and the attention (standard, or the memory-efficient
// "flash" one). See docs/memory.md, "Activation modes".
//
//   FSDP_ASSIGN_OR_RETURN(std::vector<ActivationMode> modes,
//                         ParseActivationModes("none,all", "standard,flash"));
//   for (const ActivationMode& mode : modes) {
//     GptConfig config = ...;
//     FSDP_RETURN_IF_ERROR(ApplyActivationMode(mode, config));   // K <= layers
//     ActivationModeName(mode);    // "none", "all", "flash", "all+flash", "every:2"
//     ActivationModeFlags(mode);   // "--activation_checkpointing=all --attention=flash"
//   }
#ifndef FSDP_REPORT_ACTIVATION_MODE_H_
#define FSDP_REPORT_ACTIVATION_MODE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/llama_spec.h"
#include "fsdp/report/memory_estimate.h"

namespace fsdp {
namespace report {

struct ActivationMode {
  int checkpoint_every = 0;  // GptConfig::activation_checkpoint_every: 0 none, 1 all, K every:K
  bool flash_attention = false;

  bool operator==(const ActivationMode& other) const {
    return checkpoint_every == other.checkpoint_every && flash_attention == other.flash_attention;
  }
  bool operator!=(const ActivationMode& other) const { return !(*this == other); }
};

// The mode a config trains with.
ActivationMode ActivationModeOf(const GptConfig& config);
ActivationMode ActivationModeOf(const LlamaConfig& config);
// The mode of the point's model, whichever its family.
ActivationMode ActivationModeOf(const MemoryPoint& point);

// Sets config's checkpointing and attention to mode's. InvalidArgument when
// the config cannot take it (every:K with K above its layers), in
// ValidateGptConfig's (ValidateLlamaConfig's) words; config is unchanged then.
absl::Status ApplyActivationMode(const ActivationMode& mode, GptConfig& config);
absl::Status ApplyActivationMode(const ActivationMode& mode, LlamaConfig& config);
// The same on the point's model, whichever its family.
absl::Status ApplyActivationMode(const ActivationMode& mode, MemoryPoint& point);

// "none", "every:2", "all", "flash", "every:2+flash", "all+flash".
std::string ActivationModeName(const ActivationMode& mode);

// The train_gpt flags that select mode, only those that differ from the
// defaults: "" for none, "--attention=flash", "--activation_checkpointing=all
// --attention=flash".
std::string ActivationModeFlags(const ActivationMode& mode);

// Every combination of the comma-separated --activation_checkpointing
// values (none, all, every:K with K >= 1) and --attention values (standard,
// flash), checkpointing outer. K is checked against a model's layers only
// when applied (a sweep's models differ). InvalidArgument naming the bad
// item and the accepted forms; duplicates are dropped.
absl::StatusOr<std::vector<ActivationMode>> ParseActivationModes(
    absl::string_view checkpointing, absl::string_view attention);

// What a budget check tries, in order of the recomputation it costs:
// flash (recomputes the probabilities in the backward, no more), every:2,
// every:2+flash, all (one more forward of every block), all+flash. Modes
// `config` cannot take (every:2 on one block) are left out.
std::vector<ActivationMode> ActivationModesByCost(const GptConfig& config);
// The same for the point's model, whichever its family.
std::vector<ActivationMode> ActivationModesByCost(const MemoryPoint& point);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_ACTIVATION_MODE_H_
