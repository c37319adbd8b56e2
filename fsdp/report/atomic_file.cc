// File: fsdp/report/atomic_file.cc
#include "fsdp/report/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace fsdp {
namespace report {
namespace {

absl::Status Failed(const char* what, const std::string& path, int error) {
  return absl::InternalError(
      absl::StrCat("cannot ", what, " '", path, "': ", std::strerror(error)));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    return error == ENOENT
               ? absl::NotFoundError(absl::StrCat("cannot create '", tmp,
                                                  "': its directory does not exist"))
               : Failed("create", tmp, error);
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      unlink(tmp.c_str());
      return Failed("write", tmp, error);
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    const int error = errno;
    unlink(tmp.c_str());
    return Failed("flush", tmp, error);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(tmp.c_str());
    return Failed("rename the finished file onto", path, error);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "' for reading"));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace report
}  // namespace fsdp
