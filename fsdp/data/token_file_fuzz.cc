// File: fsdp/data/token_file_fuzz.cc
//
// libFuzzer target for the token file reader (token_file.h), which reads
// the --data and --val_data files of every rank. The first two input bytes
// give the vocabulary (1 + their little-endian value), the rest is the
// file, put in an in-memory file (memfd) and opened by path as a user's
// file would be. An independent reference decides from the bytes alone
// whether the file is valid (magic, version, count >= 0, size exactly
// 1024 + 2 * count, every token in the vocabulary): Open must agree, and
// what it accepted must read back as the reference's windows.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fsdp/data/token_file.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

int32_t Int32At(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));  // little-endian hosts, as the format
  return v;
}

// The tokens if `file` is a valid token file for `vocab`, else false.
bool Reference(const uint8_t* file, size_t size, int vocab, std::vector<uint16_t>& tokens) {
  constexpr size_t kHeaderBytes = fsdp::kTokenFileHeaderInts * sizeof(int32_t);
  if (size < kHeaderBytes) return false;
  if (Int32At(file) != fsdp::kTokenFileMagic || Int32At(file + 4) != fsdp::kTokenFileVersion) {
    return false;
  }
  const int32_t count = Int32At(file + 8);
  if (count < 0 || size != kHeaderBytes + 2 * static_cast<size_t>(count)) return false;
  tokens.resize(count);
  if (count > 0) std::memcpy(tokens.data(), file + kHeaderBytes, 2 * static_cast<size_t>(count));
  for (uint16_t t : tokens) {
    if (t >= vocab) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int vocab = 1 + (data[0] | (data[1] << 8));
  const uint8_t* file = data + 2;
  const size_t file_size = size - 2;

  const int fd = memfd_create("token_file_fuzz", 0);
  Check(fd >= 0);
  size_t written = 0;
  while (written < file_size) {
    const ssize_t n = write(fd, file + written, file_size - written);
    Check(n > 0);
    written += static_cast<size_t>(n);
  }
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  absl::StatusOr<std::unique_ptr<fsdp::TokenFileSource>> source =
      fsdp::TokenFileSource::Open(path, vocab);
  close(fd);

  std::vector<uint16_t> tokens;
  const bool valid = Reference(file, file_size, vocab, tokens);
  Check(source.ok() == valid);
  if (!valid) return 0;
  const int64_t n = static_cast<int64_t>(tokens.size());
  Check((*source)->num_tokens() == n);
  // Windows of length L + 1 start at (i mod W) * L, W = (n - 1) / L.
  for (int64_t length = 2; length <= std::min<int64_t>(n, 9); ++length) {
    std::vector<int32_t> out(length);
    const int64_t windows = (n - 1) / (length - 1);
    for (int64_t index = 0; index < windows + 2; ++index) {
      Check((*source)->ReadSequence(index, absl::MakeSpan(out)).ok());
      const int64_t start = (index % windows) * (length - 1);
      for (int64_t t = 0; t < length; ++t) Check(out[t] == tokens[start + t]);
    }
  }
  std::vector<int32_t> too_long(n + 1);
  Check(!(*source)->ReadSequence(0, absl::MakeSpan(too_long)).ok());
  return 0;
}
