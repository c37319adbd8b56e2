// File: fsdp/checkpoint/checkpoint.cc
#include "fsdp/checkpoint/checkpoint.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint_dir.h"
#include "fsdp/checkpoint/checkpoint_reader.h"
#include "fsdp/checkpoint/manifest_file.h"
#include "fsdp/exchange/blob_exchange.h"
#include "google/protobuf/text_format.h"

namespace fsdp {
namespace checkpoint {
namespace {

std::string ShapeString(const proto::TensorEntry& t) {
  return absl::StrCat("[", absl::StrJoin(t.shape(), ", "), "]");
}

std::string ModelString(const proto::ModelConfig& m) {
  return absl::StrCat(m.family(), " layers=", m.layers(), " d_model=", m.d_model(),
                      " heads=", m.heads(), " vocab=", m.vocab(), " seq_len=", m.seq_len());
}

// Rank 0's part of the save: manifest, commit, prune. Returns the path.
absl::Status CommitOnRankZero(const std::string& partial, const std::string& final_path,
                              const SaveOptions& options,
                              const proto::CheckpointManifest& manifest, SaveStats& stats) {
  FSDP_RETURN_IF_ERROR(
      WriteNewFileDurably(JoinPath(partial, kManifestFileName), EncodeManifestFile(manifest)));
  // The text copy carries no digests (they are bytes) to stay readable.
  proto::CheckpointManifest readable = manifest;
  for (proto::ShardFile& f : *readable.mutable_files()) f.clear_chunk_sha256();
  std::string text;
  google::protobuf::TextFormat::PrintToString(readable, &text);
  FSDP_RETURN_IF_ERROR(WriteNewFileDurably(JoinPath(partial, kManifestTextFileName), text));
  FSDP_RETURN_IF_ERROR(base::SyncDirectory(partial));
  if (IsCompleteCheckpoint(final_path)) {
    // The same step saved again (a run resumed before its last save was
    // pruned, or restarted): replace it. Older checkpoints stay intact.
    const std::string replaced = final_path + ".replaced";
    FSDP_RETURN_IF_ERROR(RemoveTree(replaced));
    FSDP_RETURN_IF_ERROR(RenamePath(final_path, replaced));
    FSDP_RETURN_IF_ERROR(RenamePath(partial, final_path));
    FSDP_RETURN_IF_ERROR(base::SyncDirectory(options.dir));
    if (absl::Status removed = RemoveTree(replaced); !removed.ok()) {
      stats.warnings.push_back(std::string(removed.message()));
    }
  } else {
    FSDP_RETURN_IF_ERROR(RemoveTree(final_path));  // an incomplete one, never read
    FSDP_RETURN_IF_ERROR(RenamePath(partial, final_path));
  }
  FSDP_RETURN_IF_ERROR(base::SyncDirectory(options.dir));

  if (options.keep > 0) {
    absl::StatusOr<CheckpointListing> listing = ListCheckpoints(options.dir);
    if (!listing.ok()) {
      stats.warnings.push_back(std::string(listing.status().message()));
      return absl::OkStatus();
    }
    const int excess = static_cast<int>(listing->complete.size()) - options.keep;
    for (int i = 0; i < excess; ++i) {
      const std::string& old = listing->complete[i].path;
      const std::string deleting = old + ".deleting";
      absl::Status pruned = RenamePath(old, deleting);
      if (pruned.ok()) pruned = base::SyncDirectory(options.dir);
      if (pruned.ok()) pruned = RemoveTree(deleting);
      if (pruned.ok()) {
        stats.pruned.push_back(old);
      } else {
        stats.warnings.push_back(absl::StrCat("pruning ", old, ": ", pruned.message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<proto::TensorEntry> ModelTensors(const proto::ShardPlan& plan) {
  std::vector<proto::TensorEntry> tensors;
  int64_t unit_offset = 0;
  for (const proto::UnitPlan& unit : plan.units()) {
    for (const proto::ParamLayout& param : unit.params()) {
      proto::TensorEntry t;
      t.set_name(param.name());
      *t.mutable_shape() = param.shape();
      t.set_model_offset(unit_offset + param.offset());
      t.set_numel(param.numel());
      tensors.push_back(std::move(t));
    }
    unit_offset += unit.flat_numel();
  }
  return tensors;
}

absl::Status CheckSameModel(const proto::CheckpointManifest& manifest,
                            const std::vector<proto::TensorEntry>& tensors) {
  const std::string theirs = ModelString(manifest.model());
  for (int i = 0; i < std::max<int>(manifest.tensors_size(), tensors.size()); ++i) {
    if (i >= manifest.tensors_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint holds another model (", theirs, "): it has no tensor ",
          tensors[i].name(), " ", ShapeString(tensors[i]), " (it has ", manifest.tensors_size(),
          " tensors, this model ", tensors.size(), ")"));
    }
    const proto::TensorEntry& saved = manifest.tensors(i);
    if (i >= static_cast<int>(tensors.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint holds another model (", theirs, "): its tensor ", saved.name(), " ",
          ShapeString(saved), " is not in this model (", tensors.size(), " tensors against ",
          manifest.tensors_size(), ")"));
    }
    if (saved.name() != tensors[i].name() || ShapeString(saved) != ShapeString(tensors[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint holds another model (", theirs, "): its tensor ", i, " is ",
          saved.name(), " ", ShapeString(saved), " where this model has ", tensors[i].name(), " ",
          ShapeString(tensors[i])));
    }
  }
  return absl::OkStatus();
}

void CompleteManifest(CheckpointableState& trainer, int64_t step,
                      proto::CheckpointManifest& manifest) {
  const proto::ShardPlan& plan = trainer.plan();
  manifest.set_format_version(kCheckpointFormatVersion);
  manifest.set_step(step);
  manifest.clear_tensors();
  for (proto::TensorEntry& t : ModelTensors(plan)) *manifest.add_tensors() = std::move(t);
  manifest.set_model_numel(plan.total_flat_numel());
  *manifest.mutable_plan() = plan;
  manifest.set_plan_fingerprint(plan.fingerprint());
  proto::OptimizerState* optimizer = manifest.mutable_optimizer();
  const CheckpointedOptimizer saved_optimizer = trainer.checkpointed_optimizer();
  optimizer->set_kind(saved_optimizer.kind);
  optimizer->clear_state_names();
  for (const std::string& name : saved_optimizer.state_names) optimizer->add_state_names(name);
  optimizer->set_step(step);
  optimizer->set_weight_decay(saved_optimizer.weight_decay);
}

absl::Status CommitPartialCheckpoint(const std::string& partial, const std::string& final_path,
                                     const SaveOptions& options,
                                     const proto::CheckpointManifest& manifest, SaveStats& stats) {
  return CommitOnRankZero(partial, final_path, options, manifest, stats);
}

absl::StatusOr<SaveStats> SaveCheckpoint(comm::Communicator& world,
                                         CheckpointableState& trainer,
                                         proto::CheckpointManifest manifest,
                                         const SaveOptions& options) {
  const absl::Time start = absl::Now();
  SaveStats stats;
  stats.step = trainer.steps_taken();
  const std::string final_path = JoinPath(options.dir, CheckpointDirName(stats.step));
  const std::string partial = final_path + kPartialSuffix;
  const std::string what = absl::StrCat("checkpoint of step ", stats.step, " to ", final_path);
  auto fail = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(what, " not saved: ", status.message()));
  };

  // 1. The partial directory.
  absl::Status prepared = absl::OkStatus();
  if (world.rank() == 0) {
    prepared = MakeDirs(options.dir);
    if (prepared.ok()) prepared = RemoveTree(partial);
    if (prepared.ok()) prepared = MakeDirs(partial);
  }
  if (absl::Status agreed = AgreeOnStatus(world, prepared, options.timeout, "checkpoint start");
      !agreed.ok()) {
    return fail(agreed);
  }

  // 2. The shard files.
  std::string entry_blob;
  absl::Status written = absl::OkStatus();
  if (trainer.saves_checkpoint_shard()) {
    const absl::Time write_start = absl::Now();
    absl::StatusOr<std::vector<StateRegion>> regions = trainer.CheckpointSaveRegions();
    absl::StatusOr<proto::ShardFile> entry =
        regions.ok() ? WriteShardFile(partial, ShardFileName(world.rank()), world.rank(), *regions,
                                      options.chunk_bytes, options.keep_alive)
                     : absl::StatusOr<proto::ShardFile>(regions.status());
    stats.write_time = absl::Now() - write_start;
    if (entry.ok()) {
      stats.rank_bytes = entry->size_bytes();
      entry->SerializeToString(&entry_blob);
    } else {
      written = entry.status();
    }
  }
  absl::Status agreed = AgreeOnStatus(world, written, options.timeout, "checkpoint shard files");
  absl::StatusOr<std::vector<std::string>> entries =
      agreed.ok() ? AllGatherBlobs(world, entry_blob, options.timeout, "checkpoint file entries")
                  : absl::StatusOr<std::vector<std::string>>(agreed);
  if (!entries.ok()) {
    if (world.rank() == 0) (void)RemoveTree(partial);
    return fail(entries.status());
  }

  // 3. The commit, on rank 0.
  CompleteManifest(trainer, stats.step, manifest);
  manifest.clear_files();
  for (const std::string& blob : *entries) {
    if (blob.empty()) continue;  // a rank that writes no shard
    proto::ShardFile* file = manifest.add_files();
    if (!file->ParseFromString(blob)) return fail(absl::InternalError("a file entry does not parse"));
    stats.total_bytes += file->size_bytes();
  }
  manifest.set_created_utc(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
  absl::Status committed = absl::OkStatus();
  if (world.rank() == 0) {
    committed = ValidateManifest(manifest);
    if (committed.ok()) committed = CommitOnRankZero(partial, final_path, options, manifest, stats);
    if (!committed.ok()) (void)RemoveTree(partial);
  }
  if (absl::Status agreed_commit =
          AgreeOnStatus(world, committed, options.timeout, "checkpoint commit");
      !agreed_commit.ok()) {
    return fail(agreed_commit);
  }
  stats.path = final_path;
  stats.total_time = absl::Now() - start;
  return stats;
}

absl::StatusOr<LoadStats> LoadCheckpoint(comm::Communicator& world, CheckpointableState& trainer,
                                         const std::string& path, absl::Duration timeout,
                                         MemoryTracker* tracker) {
  const absl::Time start = absl::Now();
  LoadStats stats;
  absl::Status loaded = [&]() -> absl::Status {
    FSDP_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                          CheckpointReader::Open(path, tracker));
    reader->set_keep_alive([&world] { world.KeepAlive(); });
    const proto::CheckpointManifest& m = reader->manifest();
    FSDP_RETURN_IF_ERROR(CheckSameModel(m, ModelTensors(trainer.plan())));
    const CheckpointedOptimizer optimizer = trainer.checkpointed_optimizer();
    const std::vector<std::string>& names = optimizer.state_names;
    if (m.optimizer().kind() != optimizer.kind ||
        std::vector<std::string>(m.optimizer().state_names().begin(),
                                 m.optimizer().state_names().end()) != names) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint was saved with optimizer ", m.optimizer().kind(), " (state ",
          absl::StrJoin(m.optimizer().state_names(), ", "), ") but this run uses ",
          optimizer.kind, " (state ", absl::StrJoin(names, ", "),
          "); resume with the same --optimizer"));
    }
    FSDP_ASSIGN_OR_RETURN(std::vector<StateRegion> regions, trainer.CheckpointLoadRegions());
    std::vector<CheckpointReader::Request> requests;
    for (StateRegion& region : regions) {
      requests.push_back({region.state, region.model_offset, region.data});
    }
    FSDP_RETURN_IF_ERROR(reader->ReadAll(requests));
    FSDP_RETURN_IF_ERROR(trainer.FinishCheckpointLoad(static_cast<int>(m.step())));
    stats.step = m.step();
    stats.same_plan = m.plan_fingerprint() == trainer.plan().fingerprint();
    stats.rank_bytes_read = reader->bytes_read();
    return absl::OkStatus();
  }();
  if (!loaded.ok()) {
    loaded = absl::Status(loaded.code(),
                          absl::StrCat("loading checkpoint ", path, ": ", loaded.message()));
  }
  FSDP_RETURN_IF_ERROR(AgreeOnStatus(world, loaded, timeout, "checkpoint load"));
  stats.time = absl::Now() - start;
  return stats;
}

}  // namespace checkpoint
}  // namespace fsdp
