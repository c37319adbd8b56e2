// File: base/unique_fd.cc
#include "base/unique_fd.h"

#include <unistd.h>

#include <cerrno>

namespace base {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) Reset(other.Release());
  return *this;
}

UniqueFd::~UniqueFd() { Reset(); }

int UniqueFd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd < 0 ? -1 : fd;
}

absl::Status UniqueFd::Close(absl::string_view what) {
  const int fd = Release();
  if (fd >= 0 && ::close(fd) != 0) return absl::ErrnoToStatus(errno, what);
  return absl::OkStatus();
}

}  // namespace base
