// File: base/atomic_file.h
//
// Publishing a file so that readers see the old contents or the new ones,
// never a half-written file, and a crash after success cannot bring the old
// one back: the bytes go to a temporary file beside the target (same
// directory, so the same file system), which is fsynced, closed and renamed
// over the target, and then the directory is fsynced so the rename itself is
// durable. Every place that publishes a file goes through here.
//
//   FSDP_RETURN_IF_ERROR(base::WriteFileAtomically("docs/memory-report/memory.csv", csv));
//
// Streaming, or a file another process fills (gnuplot):
//
//   FSDP_ASSIGN_OR_RETURN(base::PendingFile file,
//                         base::PendingFile::Create(path, "safetensors file"));
//   FSDP_RETURN_IF_ERROR(file.Write(header));
//   ... file.Write(...) as the data comes ...
//   FSDP_RETURN_IF_ERROR(file.Publish());
//
// On any error, and when a PendingFile is destroyed unpublished, the
// temporary file is removed and the target is as it was. (A process killed
// outright leaves its temporary file, "<path>.tmp-<pid>-<n>", behind; the
// target is still intact.)
#ifndef BASE_ATOMIC_FILE_H_
#define BASE_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/unique_fd.h"

namespace base {

// A file being written beside `path`, not yet visible there.
class PendingFile {
 public:
  // Creates the temporary file (a name no other writer, thread or process,
  // is using). `what` names the file in every error: "cannot create
  // <what> <path> (temporary file <temp>): No such file or directory" is
  // NotFound, ENOTDIR FailedPrecondition, EACCES PermissionDenied, ...
  static absl::StatusOr<PendingFile> Create(const std::string& path,
                                            absl::string_view what = "file");

  PendingFile(PendingFile&& other) noexcept;
  PendingFile& operator=(PendingFile&& other) noexcept;
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  // Removes the temporary file unless Publish succeeded.
  ~PendingFile();

  // Appends `bytes`. The write(2) error (ResourceExhausted for a full disk)
  // naming the path and the temporary file; after an error the temporary
  // file is gone and Publish fails.
  absl::Status Write(absl::string_view bytes);

  // fsync, close, rename over the target, fsync of its directory. On an
  // error before the rename the target is untouched and the temporary file
  // removed. Only a failed directory fsync leaves the new file in place; the
  // error then says the rename may not survive a crash.
  absl::Status Publish();

  // Removes the temporary file now (a writer that gave up).
  void Discard();

  const std::string& path() const { return path_; }
  // Empty once published or removed.
  const std::string& temp_path() const { return temp_path_; }
  // Whether the rename onto path() happened (a failed directory fsync after
  // it still makes Publish return an error).
  bool published() const { return published_; }
  int fd() const { return fd_.get(); }

 private:
  PendingFile(std::string path, std::string what, std::string temp_path, UniqueFd fd);
  // "cannot write <what> <path> (temporary file <temp>)".
  std::string WriteContext() const;
  absl::Status Fail(absl::Status status);

  std::string path_;
  std::string what_;
  std::string temp_path_;  // empty once published or removed
  UniqueFd fd_;
  bool published_ = false;
};

// Publishes `contents` as the whole of `path` (a PendingFile of one Write).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// fsync of a directory, so that entries created or renamed in it are
// durable. Errors name the directory.
absl::Status SyncDirectory(const std::string& path);

// The directory holding `path`: "a/b" -> "a", "b" -> ".", "/b" -> "/".
std::string DirectoryOf(const std::string& path);

}  // namespace base

#endif  // BASE_ATOMIC_FILE_H_
