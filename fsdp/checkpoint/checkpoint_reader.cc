// File: fsdp/checkpoint/checkpoint_reader.cc
#include "fsdp/checkpoint/checkpoint_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/posix_file.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint_dir.h"
#include "fsdp/checkpoint/manifest_file.h"
#include "fsdp/checkpoint/sha256.h"

namespace fsdp {
namespace checkpoint {

absl::StatusOr<proto::CheckpointManifest> ReadManifest(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, " does not exist"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, " is not a checkpoint: not a directory"));
  }
  const std::string manifest_path = JoinPath(path, kManifestFileName);
  if (stat(manifest_path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(
        path, " is not a complete checkpoint: it has no ", kManifestFileName,
        " (a save that never finished, or not a checkpoint directory)"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxManifestBytes + 48) {
    return absl::DataLossError(absl::StrCat(manifest_path, " is too large (", st.st_size,
                                            " bytes) to be a manifest"));
  }
  FSDP_ASSIGN_OR_RETURN(std::string bytes, base::ReadWholeFile(manifest_path));
  return DecodeManifestFile(bytes, manifest_path);
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& path,
                                                                         MemoryTracker* tracker) {
  FSDP_ASSIGN_OR_RETURN(proto::CheckpointManifest manifest, ReadManifest(path));
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader(path, std::move(manifest)));
  const proto::CheckpointManifest& m = reader->manifest_;
  int64_t max_chunk = 1;
  for (int f = 0; f < m.files_size(); ++f) {
    const proto::ShardFile& file = m.files(f);
    const std::string file_path = JoinPath(path, file.name());
    const int fd = open(file_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::NotFoundError(absl::StrCat("checkpoint ", path, " is missing shard file ",
                                              file.name(), " (written by rank ", file.rank(),
                                              "): ", std::strerror(errno)));
    }
    reader->fds_.push_back(fd);
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size != file.size_bytes()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint shard ", file_path, " is ", st.st_size, " bytes but the manifest says ",
          file.size_bytes(), st.st_size < file.size_bytes() ? " (truncated)" : " (extended)"));
    }
    max_chunk = std::max(max_chunk, file.chunk_bytes());
    for (const proto::Extent& e : file.extents()) {
      if (e.numel() == 0) continue;
      reader->pieces_[e.state()].push_back({e.model_offset(), e.numel(), f, e.file_offset_bytes()});
    }
  }
  for (auto& [state, pieces] : reader->pieces_) {
    std::sort(pieces.begin(), pieces.end(),
              [](const Piece& a, const Piece& b) { return a.model_offset < b.model_offset; });
  }
  if (tracker == nullptr) {
    reader->own_tracker_ = std::make_unique<MemoryTracker>();
    tracker = reader->own_tracker_.get();
  }
  FSDP_ASSIGN_OR_RETURN(reader->chunk_, tracker->Allocate<char>(MemoryCategory::kWorkspace,
                                                                max_chunk,
                                                                "checkpoint read chunk"));
  return reader;
}

CheckpointReader::~CheckpointReader() {
  for (int fd : fds_) close(fd);
}

absl::Status CheckpointReader::LoadChunk(int file, int64_t chunk) {
  if (file == chunk_file_ && chunk == chunk_index_) return absl::OkStatus();
  const proto::ShardFile& entry = manifest_.files(file);
  const int64_t begin = chunk * entry.chunk_bytes();
  const int64_t size = std::min(entry.chunk_bytes(), entry.size_bytes() - begin);
  chunk_file_ = -1;
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fds_[file], chunk_.data() + done, size - done, begin + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat("cannot read checkpoint shard ",
                                              JoinPath(path_, entry.name()), " at byte ",
                                              begin + done, ": ",
                                              n < 0 ? std::strerror(errno) : "unexpected end"));
    }
    done += n;
  }
  bytes_read_ += size;
  if (keep_alive_) keep_alive_();
  if (Sha256Of(absl::string_view(chunk_.data(), size)) != entry.chunk_sha256(chunk)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint shard ", JoinPath(path_, entry.name()), " is damaged: chunk ", chunk,
        " (bytes ", begin, "..", begin + size, ") does not match its SHA-256 in the manifest"));
  }
  chunk_file_ = file;
  chunk_index_ = chunk;
  chunk_size_ = size;
  return absl::OkStatus();
}

absl::Status CheckpointReader::PlanCopies(absl::string_view state, int64_t model_offset,
                                          absl::Span<float> out,
                                          std::vector<Copy>& copies) const {
  const int64_t numel = static_cast<int64_t>(out.size());
  if (model_offset < 0 || model_offset > manifest_.model_numel() ||
      numel > manifest_.model_numel() - model_offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read of ", state, " [", model_offset, ", +", numel, ") outside the checkpoint's ",
        manifest_.model_numel(), " elements"));
  }
  if (numel == 0) return absl::OkStatus();
  auto found = pieces_.find(state);
  if (found == pieces_.end()) {
    std::vector<std::string> states = {"param"};
    for (const std::string& s : manifest_.optimizer().state_names()) states.push_back(s);
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", path_, " has no state '", state, "' (it holds ",
        absl::StrJoin(states, ", "), "; optimizer ", manifest_.optimizer().kind(), ")"));
  }
  const std::vector<Piece>& pieces = found->second;
  // The first piece that ends after model_offset.
  auto it = std::upper_bound(pieces.begin(), pieces.end(), model_offset,
                             [](int64_t offset, const Piece& p) {
                               return offset < p.model_offset + p.numel;
                             });
  int64_t at = model_offset;
  const int64_t end = model_offset + numel;
  for (; at < end && it != pieces.end(); ++it) {
    FSDP_CHECK(it->model_offset <= at);  // ValidateManifest: pieces tile the model vector
    const int64_t take = std::min(end, it->model_offset + it->numel) - at;
    copies.push_back({it->file,
                      it->file_offset_bytes + (at - it->model_offset) * kBytesPerElement,
                      take * kBytesPerElement,
                      reinterpret_cast<char*>(out.data() + (at - model_offset))});
    at += take;
  }
  FSDP_CHECK(at == end);
  return absl::OkStatus();
}

absl::Status CheckpointReader::RunCopies(std::vector<Copy>& copies) {
  std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) {
    return a.file != b.file ? a.file < b.file : a.file_offset_bytes < b.file_offset_bytes;
  });
  for (const Copy& c : copies) {
    const int64_t chunk_bytes = manifest_.files(c.file).chunk_bytes();
    int64_t byte = c.file_offset_bytes;
    int64_t left = c.num_bytes;
    char* dest = c.dest;
    while (left > 0) {
      const int64_t chunk = byte / chunk_bytes;
      FSDP_RETURN_IF_ERROR(LoadChunk(c.file, chunk));
      const int64_t within = byte - chunk * chunk_bytes;
      const int64_t copy = std::min(left, chunk_size_ - within);
      std::memcpy(dest, chunk_.data() + within, copy);
      dest += copy;
      byte += copy;
      left -= copy;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::Read(absl::string_view state, int64_t model_offset,
                                    absl::Span<float> out) {
  std::vector<Copy> copies;
  FSDP_RETURN_IF_ERROR(PlanCopies(state, model_offset, out, copies));
  return RunCopies(copies);
}

absl::Status CheckpointReader::ReadAll(absl::Span<const Request> requests) {
  std::vector<Copy> copies;
  for (const Request& r : requests) {
    FSDP_RETURN_IF_ERROR(PlanCopies(r.state, r.model_offset, r.out, copies));
  }
  return RunCopies(copies);
}

}  // namespace checkpoint
}  // namespace fsdp
