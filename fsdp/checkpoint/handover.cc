// File: fsdp/checkpoint/handover.cc
#include "fsdp/checkpoint/handover.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/posix_file.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint.h"
#include "fsdp/checkpoint/checkpoint_dir.h"
#include "fsdp/checkpoint/manifest_file.h"
#include "fsdp/checkpoint/shard_file.h"

namespace fsdp {
namespace checkpoint {
namespace {

constexpr char kGenerationPrefix[] = "gen-";
constexpr char kFromPrefix[] = "from-rank-";
constexpr char kEntrySuffix[] = ".entry";
constexpr char kManifestBase[] = "manifest.base";

std::string GenerationDirName(int64_t step) {
  return absl::StrFormat("%s%08d", kGenerationPrefix, step);
}

std::string EntryFileName(int shard_rank) {
  std::string name = ShardFileName(shard_rank);
  return name.substr(0, name.size() - 4) + kEntrySuffix;  // "rank-00003.entry"
}

// The names in `dir` (not "." and ".."); empty if it cannot be read.
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return names;
  while (dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(handle);
  std::sort(names.begin(), names.end());
  return names;
}

// One generation as the survivors left it: the manifest and, per shard,
// the directory holding a whole copy and its entry.
struct Generation {
  int64_t step = 0;
  std::string path;
  std::optional<proto::CheckpointManifest> manifest;
  std::map<int, std::pair<std::string, proto::ShardFile>> shards;
};

Generation ReadGeneration(int64_t step, const std::string& path) {
  Generation generation;
  generation.step = step;
  generation.path = path;
  for (const std::string& from : ListDir(path)) {
    if (!absl::StartsWith(from, kFromPrefix)) continue;
    const std::string dir = JoinPath(path, from);
    if (!generation.manifest.has_value()) {
      absl::StatusOr<std::string> base = base::ReadWholeFile(JoinPath(dir, kManifestBase));
      proto::CheckpointManifest manifest;
      if (base.ok() && manifest.ParseFromString(*base)) generation.manifest = std::move(manifest);
    }
    for (const std::string& name : ListDir(dir)) {
      if (!absl::EndsWith(name, kEntrySuffix)) continue;
      absl::StatusOr<std::string> bytes = base::ReadWholeFile(JoinPath(dir, name));
      proto::ShardFile entry;
      if (!bytes.ok() || !entry.ParseFromString(*bytes)) continue;
      const int shard_rank = entry.rank();  // before the move below
      generation.shards.emplace(shard_rank, std::make_pair(dir, std::move(entry)));
    }
  }
  return generation;
}

}  // namespace

absl::StatusOr<int64_t> WriteHandover(const std::string& root, int rank,
                                      const std::vector<SnapshotPiece>& pieces) {
  int64_t bytes = 0;
  std::set<int64_t> started;  // generations whose directory this call made
  for (const SnapshotPiece& piece : pieces) {
    const std::string dir =
        JoinPath(JoinPath(root, GenerationDirName(piece.step)), absl::StrCat(kFromPrefix, rank));
    if (started.insert(piece.step).second) {
      FSDP_RETURN_IF_ERROR(RemoveTree(dir));  // an earlier attempt's rank `rank`
      FSDP_RETURN_IF_ERROR(MakeDirs(dir));
      FSDP_RETURN_IF_ERROR(
          WriteNewFileDurably(JoinPath(dir, kManifestBase), piece.manifest->SerializeAsString()));
    }
    FSDP_ASSIGN_OR_RETURN(
        proto::ShardFile entry,
        WriteShardFile(dir, ShardFileName(piece.shard_rank), piece.shard_rank, piece.regions));
    bytes += entry.size_bytes();
    // Last: the entry says the copy is whole.
    FSDP_RETURN_IF_ERROR(WriteNewFileDurably(JoinPath(dir, EntryFileName(piece.shard_rank)),
                                             entry.SerializeAsString()));
  }
  return bytes;
}

absl::StatusOr<std::string> AssembleHandover(const std::string& root,
                                             std::vector<std::string>* notes) {
  std::vector<std::pair<int64_t, std::string>> generations;
  for (const std::string& name : ListDir(root)) {
    int64_t step = 0;
    if (absl::StartsWith(name, kGenerationPrefix) &&
        absl::SimpleAtoi(name.substr(std::strlen(kGenerationPrefix)), &step)) {
      generations.push_back({step, JoinPath(root, name)});
    }
  }
  std::sort(generations.rbegin(), generations.rend());
  std::string assembled;
  for (const auto& [step, path] : generations) {
    Generation generation = ReadGeneration(step, path);
    if (!generation.manifest.has_value()) {
      notes->push_back(absl::StrCat("the handover of step ", step, " has no manifest"));
      continue;
    }
    proto::CheckpointManifest manifest = *generation.manifest;
    const int shards = manifest.plan().shard_group_size();
    std::vector<int> missing;
    for (int p = 0; p < shards; ++p) {
      if (generation.shards.count(p) == 0) missing.push_back(p);
    }
    if (!missing.empty()) {
      notes->push_back(
          absl::StrCat("the handover of step ", step, " lacks the shard of rank ", missing.front(),
                       missing.size() > 1 ? absl::StrCat(" and ", missing.size() - 1, " more") : "",
                       ": both its copies were lost"));
      continue;
    }
    const std::string final_path = JoinPath(root, CheckpointDirName(step));
    const std::string partial = final_path + kPartialSuffix;
    FSDP_RETURN_IF_ERROR(RemoveTree(partial));
    FSDP_RETURN_IF_ERROR(MakeDirs(partial));
    manifest.clear_files();
    for (int p = 0; p < shards; ++p) {
      const auto& [dir, entry] = generation.shards.at(p);
      const std::string from = JoinPath(dir, entry.name());
      const std::string to = JoinPath(partial, entry.name());
      if (link(from.c_str(), to.c_str()) != 0) {
        return absl::InternalError(
            absl::StrCat("cannot link ", from, " to ", to, ": ", std::strerror(errno)));
      }
      *manifest.add_files() = entry;
    }
    manifest.set_created_utc(absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()));
    FSDP_RETURN_IF_ERROR(ValidateManifest(manifest));
    SaveOptions options;
    options.dir = root;
    options.keep = 1;  // an older assembled one is no longer needed
    SaveStats stats;
    FSDP_RETURN_IF_ERROR(CommitPartialCheckpoint(partial, final_path, options, manifest, stats));
    assembled = final_path;
    break;
  }
  // Consumed, or never whole: the checkpoint (or the disk) is what is left.
  for (const auto& [step, path] : generations) FSDP_RETURN_IF_ERROR(RemoveTree(path));
  return assembled;
}

}  // namespace checkpoint
}  // namespace fsdp
