// File: fsdp/text/tokenizer_file.cc
#include "fsdp/text/tokenizer_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fsdp {
namespace text {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

absl::Status InPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

}  // namespace

absl::StatusOr<ByteBpe> LoadByteBpe(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open tokenizer ", path));
  }
  const std::string too_large = absl::StrCat(
      " is larger than the limit of ", kMaxTokenizerFileBytes,
      " bytes for a tokenizer file (one of 65536 tokens takes less); is it a tokenizer "
      "written by //examples:tokenize?");
  struct stat st;
  if (fstat(fileno(f.get()), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size > kMaxTokenizerFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer ", path, " has ", st.st_size, " bytes, which", too_large));
  }
  // Read one byte past the limit: a file that grew since fstat is caught here.
  std::string contents(static_cast<size_t>(kMaxTokenizerFileBytes) + 1, '\0');
  const size_t got = std::fread(contents.data(), 1, contents.size(), f.get());
  if (std::ferror(f.get())) {
    return absl::DataLossError(absl::StrCat("cannot read tokenizer ", path));
  }
  if (got > static_cast<size_t>(kMaxTokenizerFileBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", path, too_large));
  }
  contents.resize(got);
  absl::StatusOr<ByteBpe> parsed = ByteBpe::Parse(contents);
  if (!parsed.ok()) return InPath(path, parsed.status());
  return parsed;
}

}  // namespace text
}  // namespace fsdp
