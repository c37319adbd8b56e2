// File: fsdp/checkpoint/shard_file.cc
#include "fsdp/checkpoint/shard_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "fsdp/checkpoint/checkpoint_dir.h"
#include "fsdp/checkpoint/manifest_file.h"
#include "fsdp/checkpoint/sha256.h"

namespace fsdp {
namespace checkpoint {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "shard files hold little-endian floats, written straight from memory");

absl::Status WriteError(const std::string& path, int error) {
  const std::string message = absl::StrCat("cannot write checkpoint shard ", path, ": ",
                                           std::strerror(error));
  // EFBIG: a file-size limit (RLIMIT_FSIZE) or the file system's own.
  if (error == ENOSPC || error == EDQUOT || error == EFBIG) {
    return absl::ResourceExhaustedError(message);
  }
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

// Writes bytes to fd and feeds the chunk digests.
class ChunkedWriter {
 public:
  ChunkedWriter(int fd, int64_t chunk_bytes, proto::ShardFile& entry,
                const std::function<void()>& keep_alive)
      : fd_(fd), chunk_bytes_(chunk_bytes), entry_(entry), keep_alive_(keep_alive) {}

  // errno of a failed write, or 0.
  int Write(const char* data, int64_t num_bytes) {
    int64_t done = 0;
    while (done < num_bytes) {
      const ssize_t n = write(fd_, data + done, std::min<int64_t>(num_bytes - done, 8 << 20));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      Hash(data + done, n);
      done += n;
      if (keep_alive_) keep_alive_();
    }
    return 0;
  }

  void FinishChunks() {
    if (chunk_filled_ > 0) entry_.add_chunk_sha256(hash_.Finish());
    chunk_filled_ = 0;
  }

 private:
  void Hash(const char* data, int64_t num_bytes) {
    while (num_bytes > 0) {
      const int64_t take = std::min(num_bytes, chunk_bytes_ - chunk_filled_);
      hash_.Update(data, take);
      chunk_filled_ += take;
      data += take;
      num_bytes -= take;
      if (chunk_filled_ == chunk_bytes_) FinishChunks();
    }
  }

  int fd_;
  int64_t chunk_bytes_;
  proto::ShardFile& entry_;
  const std::function<void()>& keep_alive_;
  Sha256 hash_;
  int64_t chunk_filled_ = 0;
};

}  // namespace

absl::StatusOr<proto::ShardFile> WriteShardFile(const std::string& dir, const std::string& name,
                                                int rank, absl::Span<const StateRegion> regions,
                                                int64_t chunk_bytes,
                                                const std::function<void()>& keep_alive) {
  if (chunk_bytes <= 0) return absl::InvalidArgumentError("chunk_bytes must be positive");
  const std::string path = JoinPath(dir, name);
  proto::ShardFile entry;
  entry.set_name(name);
  entry.set_rank(rank);
  entry.set_chunk_bytes(chunk_bytes);
  base::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return WriteError(path, errno);
  ChunkedWriter writer(fd.get(), chunk_bytes, entry, keep_alive);
  int64_t offset = 0;
  int error = 0;
  for (const StateRegion& region : regions) {
    proto::Extent* extent = entry.add_extents();
    extent->set_state(region.state);
    extent->set_model_offset(region.model_offset);
    extent->set_numel(static_cast<int64_t>(region.data.size()));
    extent->set_file_offset_bytes(offset);
    const int64_t bytes = static_cast<int64_t>(region.data.size()) * kBytesPerElement;
    error = writer.Write(reinterpret_cast<const char*>(region.data.data()), bytes);
    if (error != 0) break;
    offset += bytes;
  }
  writer.FinishChunks();
  if (error == 0 && fsync(fd.get()) != 0) error = errno;
  if (close(fd.Release()) != 0 && error == 0) error = errno;
  if (error != 0) {
    unlink(path.c_str());
    return WriteError(path, error);
  }
  entry.set_size_bytes(offset);
  return entry;
}

}  // namespace checkpoint
}  // namespace fsdp
