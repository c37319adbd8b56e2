// File: fsdp/text/token_file_bytes.h
//
// The bytes of an llm.c token file (format: fsdp/data/token_file.h), to be
// written whole with base::WriteFileAtomically so that no reader ever sees
// half a file.
#ifndef FSDP_TEXT_TOKEN_FILE_BYTES_H_
#define FSDP_TEXT_TOKEN_FILE_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fsdp {
namespace text {

// InvalidArgument for more than 2^31 - 1 tokens (the header's count is int32).
absl::StatusOr<std::string> TokenFileBytes(absl::Span<const uint16_t> tokens);

}  // namespace text
}  // namespace fsdp

#endif  // FSDP_TEXT_TOKEN_FILE_BYTES_H_
