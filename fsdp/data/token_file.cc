// File: fsdp/data/token_file.cc
#include "fsdp/data/token_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fsdp {
namespace {

// Closes the FILE* on every return path.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

absl::Status WriteTokenFile(const std::string& path, absl::Span<const uint16_t> tokens) {
  FilePtr f(std::fopen(path.c_str(), "wb"));
  if (!f) {
    return absl::NotFoundError(
        absl::StrCat("cannot create token file ", path, ": ", std::strerror(errno)));
  }
  int32_t header[kTokenFileHeaderInts] = {};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a token file holds at most 2^31 - 1 tokens, got ", tokens.size()));
  }
  header[2] = static_cast<int32_t>(tokens.size());
  if (std::fwrite(header, sizeof(header), 1, f.get()) != 1 ||
      (!tokens.empty() &&
       std::fwrite(tokens.data(), sizeof(uint16_t), tokens.size(), f.get()) != tokens.size())) {
    return absl::DataLossError(absl::StrCat("short write to token file ", path));
  }
  if (std::fclose(f.release()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot close token file ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TokenFileSource>> TokenFileSource::Open(const std::string& path,
                                                                       int vocab) {
  if (vocab < 1 || vocab > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("token files hold uint16 tokens; vocab must lie in [1, 65536], got ", vocab));
  }
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    return absl::NotFoundError(
        absl::StrCat("cannot open token file ", path, ": ", std::strerror(errno)));
  }
  int32_t header[kTokenFileHeaderInts];
  if (std::fread(header, sizeof(header), 1, f.get()) != 1) {
    return absl::DataLossError(absl::StrCat(
        "token file ", path, " is shorter than its ", sizeof(header),
        "-byte header; is it an llm.c .bin file?"));
  }
  if (header[0] != kTokenFileMagic) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file ", path, " has magic ", header[0], ", expected ", kTokenFileMagic,
        " (llm.c .bin format); regenerate it with llm.c's data scripts"));
  }
  if (header[1] != kTokenFileVersion) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " has version ",
                                                   header[1], "; only version ",
                                                   kTokenFileVersion,
                                                   " (uint16 tokens) is supported"));
  }
  if (header[2] < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, " announces a negative token count ", header[2]));
  }
  const size_t count = static_cast<size_t>(header[2]);
  auto truncated = [&](uint64_t present) {
    return absl::DataLossError(absl::StrCat("token file ", path, " is truncated: its header "
                                            "announces ", count, " tokens but only ", present,
                                            " follow"));
  };
  auto trailing = [&](absl::string_view how_many) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " has ", how_many,
                                                   "bytes after the ", count,
                                                   " tokens its header announces"));
  };
  // The file's size must be what the header announces before the header
  // sizes anything (issue #39: 2^31 - 1 tokens announced, 100 present).
  struct stat st;
  if (fstat(fileno(f.get()), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat token file ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file ", path, " is not a regular file (its size is checked against its header "
        "before it is read); copy it to a file"));
  }
  const uint64_t body_bytes =
      static_cast<uint64_t>(std::max<off_t>(st.st_size, sizeof(header)) - sizeof(header));
  const uint64_t announced_bytes = count * sizeof(uint16_t);
  if (body_bytes < announced_bytes) return truncated(body_bytes / sizeof(uint16_t));
  if (body_bytes > announced_bytes) {
    return trailing(absl::StrCat(body_bytes - announced_bytes, " "));
  }
  std::vector<uint16_t> tokens(count);
  const size_t got = count == 0 ? 0 : std::fread(tokens.data(), sizeof(uint16_t), count, f.get());
  // The file may have changed since fstat.
  if (got != count) return truncated(got);
  if (std::fgetc(f.get()) != EOF) return trailing("");
  for (size_t i = 0; i < count; ++i) {
    if (tokens[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": token ", tokens[i],
                                                     " at position ", i,
                                                     " is outside the vocabulary of ", vocab));
    }
  }
  return std::unique_ptr<TokenFileSource>(new TokenFileSource(path, vocab, std::move(tokens)));
}

absl::Status TokenFileSource::ReadSequence(int64_t index, absl::Span<int32_t> out) const {
  const int64_t length = static_cast<int64_t>(out.size());
  if (index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sequence index must be >= 0, got ", index));
  }
  if (length < 2 || num_tokens() < length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file ", path_, " holds ", num_tokens(), " tokens; a sequence of ", length - 1,
        " inputs needs at least ", length, " (and at least 2)"));
  }
  const int64_t stride = length - 1;
  const int64_t windows = (num_tokens() - 1) / stride;
  const int64_t start = (index % windows) * stride;
  for (int64_t t = 0; t < length; ++t) out[t] = tokens_[start + t];
  return absl::OkStatus();
}

}  // namespace fsdp
