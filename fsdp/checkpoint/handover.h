// File: fsdp/checkpoint/handover.h
//
// The state an elastic job's survivors hand to its next attempt through
// memory (docs/failures.md, "Recovery from memory"). After a failure each
// survivor writes the snapshot copies it holds (memory_snapshots.h) into
// the handover directory, which the launcher keeps in /dev/shm for the
// whole job (FSDP_HANDOVER_DIR):
//
//   ROOT/gen-00000012/from-rank-2/rank-00002.bin    rank 2's own copy
//                                 rank-00002.entry  its manifest entry (written last)
//                                 rank-00001.bin    its buddy copy of rank 1's shard
//                                 rank-00001.entry
//                                 manifest.base     the manifest of step 12, but the files
//   ROOT/step-00000012/                             an assembled checkpoint
//
// Rank 0 of the next attempt assembles the newest generation in which every
// shard has a copy into ROOT/step-N, an ordinary checkpoint (the files are
// hard links, nothing is copied), and loads it at the new world size like
// any other. Writers never share a directory, so survivors need no
// agreement; a piece counts only once its entry is written.
#ifndef FSDP_CHECKPOINT_HANDOVER_H_
#define FSDP_CHECKPOINT_HANDOVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsdp/checkpoint/memory_snapshots.h"

namespace fsdp {
namespace checkpoint {

// The environment variable that names the handover directory.
inline constexpr char kHandoverDirEnv[] = "FSDP_HANDOVER_DIR";

// Writes `pieces` as rank `rank` into ROOT/gen-<step>/from-rank-<rank>/,
// replacing what an earlier attempt's rank `rank` wrote there. Returns the
// bytes written.
absl::StatusOr<int64_t> WriteHandover(const std::string& root, int rank,
                                      const std::vector<SnapshotPiece>& pieces);

// The newest generation under `root` with every shard assembled into
// ROOT/step-N (older assembled checkpoints and every generation are then
// removed); its path, or "" when no generation is whole (`notes` says why).
absl::StatusOr<std::string> AssembleHandover(const std::string& root,
                                             std::vector<std::string>* notes);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_HANDOVER_H_
