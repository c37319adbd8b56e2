// File: comm/rendezvous/job_secret.cc
#include "comm/rendezvous/job_secret.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace comm {

absl::StatusOr<std::string> RandomBytes(size_t num_bytes) {
  std::string bytes(num_bytes, '\0');
  size_t filled = 0;
  while (filled < num_bytes) {
    const ssize_t n = getrandom(bytes.data() + filled, num_bytes - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("getrandom could not supply ", num_bytes,
                                              " random bytes: ",
                                              n < 0 ? strerror(errno) : "no bytes"));
    }
    filled += static_cast<size_t>(n);
  }
  return bytes;
}

absl::StatusOr<std::string> RandomSecretHex(size_t num_bytes) {
  absl::StatusOr<std::string> bytes = RandomBytes(num_bytes);
  if (!bytes.ok()) return bytes.status();
  return absl::BytesToHexString(*bytes);
}

absl::StatusOr<std::string> ReadJobTokenFile(const std::string& path) {
  const std::string what = absl::StrCat("FSDP_JOB_TOKEN_FILE='", path, "'");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " cannot be opened (", strerror(errno),
        "); point it at a file holding the job's secret, readable only by you "
        "(e.g. openssl rand -hex 32 > FILE; chmod 600 FILE)"));
  }
  struct stat info = {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not a regular file; point it at a file holding the secret"));
  }
  if (info.st_uid != geteuid()) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrCat(
        what, " belongs to user id ", info.st_uid, ", not to this process's user (",
        geteuid(), "); the secret must be a file of your own, readable only by you"));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrCat(
        what, " is accessible to its group or to others (mode ",
        absl::StrFormat("%03o", info.st_mode & 0777),
        "); whoever reads it can join or impersonate this job: run chmod 600 ", path));
  }
  if (info.st_size <= 0 || static_cast<size_t>(info.st_size) > kMaxJobTokenFileBytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        what, " holds ", info.st_size, " bytes; a secret is 1 to ", kMaxJobTokenFileBytes,
        " bytes (e.g. openssl rand -hex 32 > FILE)"));
  }
  std::string secret(static_cast<size_t>(info.st_size), '\0');
  size_t filled = 0;
  while (filled < secret.size()) {
    const ssize_t n = read(fd, secret.data() + filled, secret.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    filled += static_cast<size_t>(n);
  }
  close(fd);
  secret.resize(filled);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " holds no secret; write one into it (e.g. openssl rand -hex 32 > FILE)"));
  }
  return secret;
}

}  // namespace comm
