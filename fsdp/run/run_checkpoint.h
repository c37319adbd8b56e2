// File: fsdp/run/run_checkpoint.h
//
// What a training run (fsdp/run/train_run.h, the train_gpt flags) records
// in a checkpoint beyond the trainer's state, which checkpoint it resumes
// from, and whether that checkpoint fits the run. Used by every rank and by
// the launching parent, which checks --resume before any rank starts.
#ifndef FSDP_RUN_RUN_CHECKPOINT_H_
#define FSDP_RUN_RUN_CHECKPOINT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/run/train_options.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {
namespace checkpoint {

// The model, data position (at `next_step`), schedule, RNG and options of a
// run; SaveCheckpoint adds the trainer's part.
proto::CheckpointManifest RunManifest(const TrainOptions& options, int64_t next_step);

struct ResumeChoice {
  std::string path;                // "" = start from step 0
  std::vector<std::string> notes;  // incomplete checkpoints skipped, or why none
};

// --resume_from, or with --resume the newest complete checkpoint in
// --checkpoint_dir (none yet is not an error: the run starts from step 0,
// as the first attempt of a job with restarts does). Incomplete ones are
// skipped with a note. Without either flag: path "".
absl::StatusOr<ResumeChoice> ChooseResumeCheckpoint(const TrainOptions& options);

// OK if `manifest` can continue this run: the same model (InvalidArgument
// naming the first differing field of the configuration), optimizer and
// global batch (the data position and schedule are per global batch).
// Differences that only change what follows (the data seed, the
// schedule's length) are notes.
absl::Status CheckResumeFitsRun(const proto::CheckpointManifest& manifest,
                                const TrainOptions& options, std::vector<std::string>* notes);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_RUN_RUN_CHECKPOINT_H_
