// File: base/atomic_file.cc
#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/posix_file.h"
#include "base/status_macros.h"

namespace base {

absl::StatusOr<PendingFile> PendingFile::Create(const std::string& path, absl::string_view what) {
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", path, "\": the path must name a file"));
  }
  // The pid separates processes, the counter threads and successive writers
  // of one process, and O_EXCL catches whatever is left over (a stale file
  // from a killed process with a recycled pid).
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string temp_path = absl::StrCat(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
    // 0666 and the umask decide the mode, as for any file the user creates.
    UniqueFd fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (fd.valid()) {
      return PendingFile(path, std::string(what), std::move(temp_path), std::move(fd));
    }
    if (errno != EEXIST) {
      return PosixError(errno, absl::StrCat("cannot create ", what, " ", path,
                                            " (temporary file ", temp_path, ")"));
    }
  }
  return absl::AlreadyExistsError(absl::StrCat("cannot create ", what, " ", path,
                                               ": 100 temporary names beside it are taken"));
}

PendingFile::PendingFile(std::string path, std::string what, std::string temp_path, UniqueFd fd)
    : path_(std::move(path)),
      what_(std::move(what)),
      temp_path_(std::move(temp_path)),
      fd_(std::move(fd)) {}

PendingFile::PendingFile(PendingFile&& other) noexcept
    : path_(std::move(other.path_)),
      what_(std::move(other.what_)),
      temp_path_(std::exchange(other.temp_path_, std::string())),
      fd_(std::move(other.fd_)),
      published_(other.published_) {}

PendingFile& PendingFile::operator=(PendingFile&& other) noexcept {
  if (this != &other) {
    Discard();
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
    temp_path_ = std::exchange(other.temp_path_, std::string());
    fd_ = std::move(other.fd_);
    published_ = other.published_;
  }
  return *this;
}

PendingFile::~PendingFile() { Discard(); }

void PendingFile::Discard() {
  fd_.Reset();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

std::string PendingFile::WriteContext() const {
  return absl::StrCat("cannot write ", what_, " ", path_, " (temporary file ", temp_path_, ")");
}

absl::Status PendingFile::Fail(absl::Status status) {
  Discard();
  return status;
}

absl::Status PendingFile::Write(absl::string_view bytes) {
  if (temp_path_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what_, " ", path_, ": written after it was published or discarded"));
  }
  absl::Status written = WriteFull(fd_.get(), absl::MakeConstSpan(bytes.data(), bytes.size()), WriteContext());
  if (!written.ok()) return Fail(std::move(written));
  return absl::OkStatus();
}

absl::Status PendingFile::Publish() {
  if (temp_path_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what_, " ", path_, ": published twice, or after it was discarded"));
  }
  if (::fsync(fd_.get()) != 0) {
    return Fail(PosixError(errno, absl::StrCat(WriteContext(), ": fsync")));
  }
  // close can be the first to report a failed write (NFS, quotas).
  if (absl::Status closed = fd_.Close(absl::StrCat(WriteContext(), ": close")); !closed.ok()) {
    return Fail(std::move(closed));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Fail(PosixError(errno, absl::StrCat("cannot rename ", temp_path_, " onto ", path_)));
  }
  temp_path_.clear();  // it is the target now: nothing to remove
  published_ = true;
  // The rename is a change to the directory: without this fsync a power cut
  // could bring back the old file (or none) although Publish returned OK.
  const std::string directory = DirectoryOf(path_);
  absl::Status synced = SyncDirectory(directory);
  if (!synced.ok()) {
    return absl::Status(synced.code(),
                        absl::StrCat(what_, " ", path_, " is complete, but ", synced.message(),
                                     ", so the rename may not survive a crash"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  FSDP_ASSIGN_OR_RETURN(PendingFile file, PendingFile::Create(path));
  FSDP_RETURN_IF_ERROR(file.Write(contents));
  return file.Publish();
}

absl::Status SyncDirectory(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return PosixError(errno, absl::StrCat("cannot open directory ", path));
  if (::fsync(fd.get()) != 0) {
    return PosixError(errno, absl::StrCat("cannot fsync directory ", path));
  }
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace base
