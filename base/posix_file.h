// File: base/posix_file.h
//
// The POSIX file operations several packages need, with what raw syscalls
// leave to every caller done once: reads and writes that retry EINTR and
// short transfers, and errors that name the file. Errors are
// absl::ErrnoToStatus (ENOENT is NotFound, ENOSPC ResourceExhausted, EACCES
// PermissionDenied, ...) with the caller's `what` first, e.g.
// "cannot write /ckpt/model.safetensors: No space left on device".
//
//   FSDP_ASSIGN_OR_RETURN(std::string text, base::ReadWholeFile("run/metrics.jsonl"));
#ifndef BASE_POSIX_FILE_H_
#define BASE_POSIX_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace base {

// The error for errno `error_number`, as "<what>: <strerror>".
absl::Status PosixError(int error_number, absl::string_view what);

// Reads buffer.size() bytes at `offset`, or fewer only when the file ends
// first; returns how many were read.
absl::StatusOr<size_t> PreadFull(int fd, absl::Span<char> buffer, uint64_t offset,
                                 absl::string_view what);

// Writes all of `bytes` at the current position.
absl::Status WriteFull(int fd, absl::Span<const char> bytes, absl::string_view what);

// The whole file. NotFound ("cannot open <path> for reading: ...") when it
// does not exist; the read(2) error naming the path otherwise.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace base

#endif  // BASE_POSIX_FILE_H_
