// File: fsdp/nn/activation_checkpointing.h
//
// Activation checkpointing as a value (docs/memory.md): which of a model's
// blocks keep only their output in the forward and recompute the rest at
// the start of their backward. The GPT reads it as
// GptConfig::activation_checkpoint_every (fsdp/nn/gpt_spec.h).
//
//   FSDP_ASSIGN_OR_RETURN(ActivationCheckpointing ac,
//                         ParseActivationCheckpointing("every:2", /*layers=*/4));
//   ac.checkpoint_every();            // 2: blocks 0 and 2
//   ActivationCheckpointingName(ac);  // "every:2"
#ifndef FSDP_NN_ACTIVATION_CHECKPOINTING_H_
#define FSDP_NN_ACTIVATION_CHECKPOINTING_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {

// --activation_checkpointing, parsed once where the flag is read: which
// blocks keep only their output in the forward and recompute the rest in
// their backward. "none", "all" (every block) or "every:K" (blocks 0, K, 2K,
// ...); the mode is kept as spelled, so every:1 prints back as every:1.
struct ActivationCheckpointing {
  enum class Mode { kNone, kAll, kEvery };
  Mode mode = Mode::kNone;
  int every = 0;  // kEvery only: K >= 1

  // GptConfig::activation_checkpoint_every: 0 (none), 1 (all) or K.
  int checkpoint_every() const;
  bool operator==(const ActivationCheckpointing& o) const {
    return mode == o.mode && every == o.every;
  }
  bool operator!=(const ActivationCheckpointing& o) const { return !(*this == o); }
};

// "none", "all" or "every:K" with 1 <= K <= layers. InvalidArgument naming
// the flag, its value and the accepted forms otherwise.
absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(absl::string_view text,
                                                                     int layers);

// OK when the value fits a model of `layers` blocks (K <= layers), else the
// parse's InvalidArgument for its name.
absl::Status ValidateActivationCheckpointing(const ActivationCheckpointing& value, int layers);

// The flag spelling: "none", "all" or "every:K".
std::string ActivationCheckpointingName(const ActivationCheckpointing& value);

// The value a GptConfig's activation_checkpoint_every stands for (0 none,
// 1 all, K every:K), and its name.
ActivationCheckpointing ActivationCheckpointingOf(int activation_checkpoint_every);
std::string ActivationCheckpointingName(int activation_checkpoint_every);

}  // namespace fsdp

#endif  // FSDP_NN_ACTIVATION_CHECKPOINTING_H_
