// File: fsdp/checkpoint/posix_file.h
//
// The few POSIX file operations the checkpoint formats need, with the two
// things raw syscalls leave to every caller done once: an owning descriptor
// that cannot leak, and reads/writes that retry EINTR and short transfers.
// Errors are absl::ErrnoToStatus (so ENOENT is NotFound, ENOSPC is
// ResourceExhausted, EACCES is PermissionDenied) with the caller's `what`
// first, e.g. "cannot write /ckpt/model.safetensors: No space left on device".
#ifndef FSDP_CHECKPOINT_POSIX_FILE_H_
#define FSDP_CHECKPOINT_POSIX_FILE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fsdp {
namespace checkpoint {

// Owns a file descriptor; closes it on destruction (ignoring close's result:
// call Close() where the result matters, i.e. after writing).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Closes now and reports close()'s error (on some file systems the first
  // report of a failed write). The descriptor is released either way.
  absl::Status Close(absl::string_view what);

 private:
  int fd_ = -1;
};

// The error for errno `error_number`, as "<what>: <strerror>".
absl::Status PosixError(int error_number, absl::string_view what);

// Reads buffer.size() bytes at `offset`, or fewer only when the file ends
// first; returns how many were read.
absl::StatusOr<size_t> PreadFull(int fd, absl::Span<char> buffer, uint64_t offset,
                                 absl::string_view what);

// Writes all of `bytes` at the current position.
absl::Status WriteFull(int fd, absl::Span<const char> bytes, absl::string_view what);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_POSIX_FILE_H_
