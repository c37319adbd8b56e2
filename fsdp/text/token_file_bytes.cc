// File: fsdp/text/token_file_bytes.cc
#include "fsdp/text/token_file_bytes.h"

#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "fsdp/data/token_file.h"

namespace fsdp {
namespace text {

absl::StatusOr<std::string> TokenFileBytes(absl::Span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a token file holds at most 2^31 - 1 tokens, got ", tokens.size(),
        "; split the corpus"));
  }
  int32_t header[kTokenFileHeaderInts] = {};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::string out(sizeof(header) + tokens.size() * sizeof(uint16_t), '\0');
  std::memcpy(out.data(), header, sizeof(header));  // little-endian hosts, as llm.c
  if (!tokens.empty()) {
    std::memcpy(out.data() + sizeof(header), tokens.data(), tokens.size() * sizeof(uint16_t));
  }
  return out;
}

}  // namespace text
}  // namespace fsdp
