// File: fsdp/checkpoint/checkpoint_dir.h
//
// A checkpoint directory on disk, and the file-system steps that make a save
// atomic. One --checkpoint_dir holds one run's checkpoints:
//
//   DIR/
//     step-00000010/          complete: renamed into place after every
//       manifest.pb           rank's file was durable (fsync) and the
//       manifest.txt          manifest written (the text copy is for people)
//       rank-00000.bin        one shard file per writing rank
//       rank-00001.bin
//     step-00000020/
//     step-00000030.partial/  a save in progress, or one a crash interrupted:
//                             never read; removed by the next save
//
// A directory is a COMPLETE checkpoint exactly when its name is
// "step-" + 8 or more digits and it holds manifest.pb: the rename of
// step-N.partial to step-N is the commit point, so a crash at any moment
// leaves either the new checkpoint or none of it, and the older ones intact.
// Pruning renames an old checkpoint to step-N.deleting before removing it,
// so a half-removed one is never taken for complete.
#ifndef FSDP_CHECKPOINT_CHECKPOINT_DIR_H_
#define FSDP_CHECKPOINT_CHECKPOINT_DIR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {
namespace checkpoint {

inline constexpr char kManifestFileName[] = "manifest.pb";
inline constexpr char kManifestTextFileName[] = "manifest.txt";
inline constexpr char kPartialSuffix[] = ".partial";

// "step-00000010".
std::string CheckpointDirName(int64_t step);
// "rank-00003.bin".
std::string ShardFileName(int rank);
// a + "/" + b.
std::string JoinPath(absl::string_view a, absl::string_view b);

struct CheckpointEntry {
  int64_t step = 0;
  std::string path;  // DIR/step-...
};

struct CheckpointListing {
  std::vector<CheckpointEntry> complete;  // ascending step
  // Directories that look like checkpoints but are not complete, each with
  // why ("a save in progress or interrupted", "no manifest.pb").
  std::vector<std::string> incomplete;
};

// The checkpoints in `dir`. NotFound if `dir` does not exist;
// FailedPrecondition if it is not a directory.
absl::StatusOr<CheckpointListing> ListCheckpoints(const std::string& dir);

// Whether `path` is a complete checkpoint directory (has manifest.pb).
bool IsCompleteCheckpoint(const std::string& path);

// mkdir -p. Errors name the path and errno.
absl::Status MakeDirs(const std::string& path);
// rm -rf of a path (a missing path is OK).
absl::Status RemoveTree(const std::string& path);
// Creates `path` (which must not exist), writes `contents`, fsyncs, closes.
// On any error the file is removed. (Files inside DIR/step-N.partial need no
// temporary of their own: the directory's rename publishes them all.)
absl::Status WriteNewFileDurably(const std::string& path, absl::string_view contents);
// rename(2) of a checkpoint directory (the commit and pruning steps above),
// with the paths in the error; the caller fsyncs the parent
// (base::SyncDirectory, base/atomic_file.h) once its renames are done.
absl::Status RenamePath(const std::string& from, const std::string& to);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_CHECKPOINT_DIR_H_
