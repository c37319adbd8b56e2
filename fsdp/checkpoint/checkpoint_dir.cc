// File: fsdp/checkpoint/checkpoint_dir.cc
#include "fsdp/checkpoint/checkpoint_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/unique_fd.h"

namespace fsdp {
namespace checkpoint {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path, int error) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == ENOSPC || error == EDQUOT || error == EFBIG) {
    return absl::ResourceExhaustedError(message);
  }
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

// "step-" followed by digits only: the step, or -1.
int64_t StepOfName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "step-") || name.empty()) return -1;
  for (char c : name) {
    if (!absl::ascii_isdigit(c)) return -1;
  }
  int64_t step = -1;
  if (!absl::SimpleAtoi(name, &step)) return -1;
  return step;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string CheckpointDirName(int64_t step) { return absl::StrFormat("step-%08d", step); }

std::string ShardFileName(int rank) { return absl::StrFormat("rank-%05d.bin", rank); }

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (absl::EndsWith(a, "/")) return absl::StrCat(a, b);
  return absl::StrCat(a, "/", b);
}

bool IsCompleteCheckpoint(const std::string& path) {
  struct stat st;
  return stat(JoinPath(path, kManifestFileName).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<CheckpointListing> ListCheckpoints(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return ErrnoError("cannot read checkpoint directory", dir, errno);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint directory ", dir, " is not a directory"));
  }
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return ErrnoError("cannot list checkpoint directory", dir, errno);
  CheckpointListing listing;
  while (dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (!absl::StartsWith(name, "step-")) continue;
    const std::string path = JoinPath(dir, name);
    if (!IsDirectory(path)) continue;
    const int64_t step = StepOfName(name);
    if (step < 0) {
      listing.incomplete.push_back(absl::StrCat(
          path, absl::EndsWith(name, kPartialSuffix)
                    ? " (a save in progress, or one that was interrupted)"
                    : " (not a finished checkpoint)"));
    } else if (!IsCompleteCheckpoint(path)) {
      listing.incomplete.push_back(absl::StrCat(path, " (no ", kManifestFileName, ")"));
    } else {
      listing.complete.push_back({step, path});
    }
  }
  closedir(handle);
  std::sort(listing.complete.begin(), listing.complete.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  std::sort(listing.incomplete.begin(), listing.incomplete.end());
  return listing;
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  size_t at = 0;
  while (true) {
    at = path.find('/', at + 1);
    const std::string prefix = path.substr(0, at);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create directory", prefix, errno);
    }
    if (at == std::string::npos) break;
  }
  if (!IsDirectory(path)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError("cannot remove", path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    DIR* handle = opendir(path.c_str());
    if (handle == nullptr) return ErrnoError("cannot list", path, errno);
    std::vector<std::string> children;
    while (dirent* entry = readdir(handle)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") children.push_back(JoinPath(path, name));
    }
    closedir(handle);
    for (const std::string& child : children) {
      absl::Status removed = RemoveTree(child);
      if (!removed.ok()) return removed;
    }
    if (rmdir(path.c_str()) != 0) return ErrnoError("cannot remove directory", path, errno);
    return absl::OkStatus();
  }
  if (unlink(path.c_str()) != 0) return ErrnoError("cannot remove", path, errno);
  return absl::OkStatus();
}

absl::Status WriteNewFileDurably(const std::string& path, absl::string_view contents) {
  base::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoError("cannot create", path, errno);
  size_t written = 0;
  int error = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd.get(), contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno;
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (error == 0 && fsync(fd.get()) != 0) error = errno;
  if (close(fd.Release()) != 0 && error == 0) error = errno;
  if (error != 0) {
    unlink(path.c_str());
    return ErrnoError("cannot write", path, error);
  }
  return absl::OkStatus();
}

absl::Status RenamePath(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoError(absl::StrCat("cannot rename ", from, " to"), to, errno);
  }
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace fsdp
