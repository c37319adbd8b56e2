// File: fsdp/run/run_checkpoint.cc
#include "fsdp/run/run_checkpoint.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint_dir.h"
#include "fsdp/checkpoint/checkpoint_reader.h"
#include "fsdp/run/model_registry.h"

namespace fsdp {
namespace checkpoint {
namespace {

const char* DecayName(LrDecay decay) {
  switch (decay) {
    case LrDecay::kCosine:
      return "cosine";
    case LrDecay::kLinear:
      return "linear";
    case LrDecay::kConstant:
      return "constant";
  }
  return "unknown";
}

}  // namespace

proto::CheckpointManifest RunManifest(const TrainOptions& o, int64_t next_step) {
  proto::CheckpointManifest m;
  proto::ModelConfig* model = m.mutable_model();
  model->set_family(o.model);
  model->set_layers(o.layers);
  model->set_d_model(o.d_model);
  model->set_heads(o.heads);
  model->set_vocab(o.vocab);
  model->set_seq_len(o.seq_len);
  if (absl::StatusOr<const ModelFactory*> factory = FindModel(o.model);
      factory.ok() && (*factory)->describe != nullptr) {
    (*factory)->describe(o, model);
  }
  proto::DataPosition* data = m.mutable_data();
  data->set_source(o.data.empty() ? "markov" : o.data);
  data->set_global_batch(o.global_batch());
  data->set_seq_len(o.seq_len);
  data->set_next_step(next_step);
  data->set_sequences_consumed(next_step * o.global_batch());
  proto::LrSchedulePosition* schedule = m.mutable_schedule();
  schedule->set_base_lr(o.lr);
  schedule->set_min_lr(o.min_lr);
  schedule->set_warmup_steps(o.warmup_steps);
  schedule->set_total_steps(o.steps);
  schedule->set_decay(DecayName(o.lr_decay));
  schedule->set_reference_batch(o.lr_reference_batch);
  schedule->set_next_step(next_step);
  m.mutable_rng()->set_init_seed(o.seed);
  m.mutable_rng()->set_data_seed(o.seed);
  m.set_train_options(TrainOptionsToString(o));
  return m;
}

absl::StatusOr<ResumeChoice> ChooseResumeCheckpoint(const TrainOptions& options) {
  ResumeChoice choice;
  if (!options.resume_from.empty()) {
    FSDP_RETURN_IF_ERROR(ReadManifest(options.resume_from).status());
    choice.path = options.resume_from;
    return choice;
  }
  if (!options.resume) return choice;
  // The newest of --checkpoint_dir's and the memory handover's (an assembled
  // one: fsdp/checkpoint/handover.h); at the same step the one in memory.
  int64_t newest = -1;
  for (const std::string& dir : {options.checkpoint_dir, options.handover_dir}) {
    if (dir.empty()) continue;
    const bool in_memory = dir == options.handover_dir;
    absl::StatusOr<CheckpointListing> listing = ListCheckpoints(dir);
    if (absl::IsNotFound(listing.status())) {
      if (!in_memory) {
        choice.notes.push_back(absl::StrCat("--checkpoint_dir ", dir, " does not exist yet"));
      }
      continue;
    }
    FSDP_RETURN_IF_ERROR(listing.status());
    for (const std::string& skipped : listing->incomplete) {
      choice.notes.push_back(absl::StrCat("ignoring incomplete checkpoint ", skipped));
    }
    if (listing->complete.empty()) continue;
    const CheckpointEntry& last = listing->complete.back();
    if (last.step > newest || (last.step == newest && in_memory)) {
      newest = last.step;
      choice.path = last.path;
    }
  }
  if (choice.path.empty()) {
    choice.notes.push_back(absl::StrCat(
        "no complete checkpoint in ",
        options.checkpoint_dir.empty() ? "memory" : options.checkpoint_dir,
        !options.checkpoint_dir.empty() && !options.handover_dir.empty() ? " or in memory" : "",
        ": starting from step 0"));
  }
  return choice;
}

absl::Status CheckResumeFitsRun(const proto::CheckpointManifest& m, const TrainOptions& o,
                                std::vector<std::string>* notes) {
  const proto::ModelConfig& model = m.model();
  const struct {
    const char* flag;
    int64_t saved, now;
  } fields[] = {{"layers", model.layers(), o.layers},     {"d_model", model.d_model(), o.d_model},
                {"heads", model.heads(), o.heads},        {"vocab", model.vocab(), o.vocab},
                {"seq_len", model.seq_len(), o.seq_len}};
  for (const auto& f : fields) {
    if (f.saved != f.now) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint holds another model: it was saved with --", f.flag, "=", f.saved,
          " and this run has --", f.flag, "=", f.now, " (", m.train_options(), ")"));
    }
  }
  const char* optimizer = OptimizerKindName(o.optimizer);
  if (m.optimizer().kind() != optimizer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint was saved with --optimizer=", m.optimizer().kind(),
        " and this run has --optimizer=", optimizer, "; its optimizer state cannot carry over"));
  }
  if (m.data().global_batch() != o.global_batch()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint was trained with a global batch of ", m.data().global_batch(),
        " sequences and this run has ", o.global_batch(), " (--micro_batch=", o.micro_batch,
        " x --accum=", o.accum, " x --nproc=", o.nproc,
        "); the data position and schedule are per global batch: choose --micro_batch and "
        "--accum so that their product with --nproc is ", m.data().global_batch()));
  }
  if (m.step() > o.steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint is at step ", m.step(), ", beyond this run's --steps=", o.steps));
  }
  const std::string source = o.data.empty() ? "markov" : o.data;
  if (m.data().source() != source || m.rng().data_seed() != o.seed) {
    notes->push_back(absl::StrCat("the checkpoint read data ", m.data().source(), " (seed ",
                                  m.rng().data_seed(), "); this run continues with ", source,
                                  " (seed ", o.seed, ")"));
  }
  if (m.schedule().total_steps() != o.steps) {
    notes->push_back(absl::StrCat("the checkpoint's schedule had --steps=",
                                  m.schedule().total_steps(), "; this run's has --steps=",
                                  o.steps, " (the learning rate from here on follows the new one)"));
  }
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace fsdp
