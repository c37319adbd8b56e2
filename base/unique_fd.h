// File: base/unique_fd.h
//
// Owns a POSIX file descriptor: closes it when destroyed, moves but never
// copies, so a descriptor cannot leak on an early return or be closed twice.
//
//   base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
//   if (!fd.valid()) return base::PosixError(errno, "cannot open " + path);
//   ... read(fd.get(), ...) ...   // closed when fd goes out of scope
#ifndef BASE_UNIQUE_FD_H_
#define BASE_UNIQUE_FD_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace base {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes ownership of `fd`; a negative value (a failed open) owns nothing.
  explicit UniqueFd(int fd) : fd_(fd < 0 ? -1 : fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  // Closes, ignoring close's result: call Close() where the result matters
  // (after writing, where close may be the first to report a failed write).
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Gives up ownership without closing; the caller closes the result.
  int Release();
  // Closes the descriptor held (if any) and owns `fd` instead.
  void Reset(int fd = -1);

  // Closes now and reports close()'s error as "<what>: <strerror>". The
  // descriptor is released either way (Linux frees it whatever close returns,
  // so there is no retry: it could close a descriptor another thread opened).
  absl::Status Close(absl::string_view what);

 private:
  int fd_ = -1;
};

}  // namespace base

#endif  // BASE_UNIQUE_FD_H_
