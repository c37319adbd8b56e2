// File: base/posix_file.cc
#include "base/posix_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"

namespace base {
namespace {

// Linux transfers at most 0x7ffff000 bytes per read/write call; asking for
// less than that keeps every call's request within ssize_t on any platform.
constexpr size_t kMaxBytesPerCall = size_t{1} << 30;

}  // namespace

absl::Status PosixError(int error_number, absl::string_view what) {
  return absl::ErrnoToStatus(error_number, what);
}

absl::StatusOr<size_t> PreadFull(int fd, absl::Span<char> buffer, uint64_t offset,
                                 absl::string_view what) {
  size_t done = 0;
  while (done < buffer.size()) {
    const size_t want = std::min(buffer.size() - done, kMaxBytesPerCall);
    if (offset + done > static_cast<uint64_t>(LLONG_MAX)) {
      return absl::OutOfRangeError(
          absl::StrCat(what, ": offset ", offset + done, " is beyond what pread can address"));
    }
    const ssize_t got = ::pread(fd, buffer.data() + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return PosixError(errno, what);
    }
    if (got == 0) break;  // end of file
    done += static_cast<size_t>(got);
  }
  return done;
}

absl::Status WriteFull(int fd, absl::Span<const char> bytes, absl::string_view what) {
  size_t done = 0;
  while (done < bytes.size()) {
    const size_t want = std::min(bytes.size() - done, kMaxBytesPerCall);
    const ssize_t wrote = ::write(fd, bytes.data() + done, want);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return PosixError(errno, what);
    }
    if (wrote == 0) {  // not expected from a regular file; never spin on it
      return absl::DataLossError(absl::StrCat(what, ": write() made no progress"));
    }
    // A regular file reports a full disk as a short write first, then as
    // ENOSPC on the next call; the loop gets there.
    done += static_cast<size_t>(wrote);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return PosixError(errno, absl::StrCat("cannot open ", path, " for reading"));
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return PosixError(errno, absl::StrCat("cannot read ", path));
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  return contents;
}

}  // namespace base
