// File: fsdp/checkpoint/safetensors_format.h
//
// The safetensors file format (Hugging Face), as pure functions: no I/O. The
// file readers and writers are in fsdp/checkpoint/safetensors.h; this header is
// what they share, and what the fuzz target drives.
//
// Layout of a file:
//   bytes [0, 8)        N, little-endian u64: the length of the header
//   bytes [8, 8 + N)    the header, UTF-8 JSON, possibly padded with trailing
//                       spaces so that the data section starts 8-aligned
//   bytes [8 + N, end)  the data section: every tensor's elements, row-major,
//                       little-endian, back to back
// The header is one JSON object. Each key is a tensor name mapping to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// with byte offsets relative to the data section; the optional key
// "__metadata__" maps to an object of string -> string.
//
// What a valid header is (the checks of the reference implementation, plus
// duplicates, which it silently collapses):
//   - N is at most kSafetensorsMaxHeaderBytes and fits in the file;
//   - the JSON parses (strictly: no comments, no trailing garbage but
//     whitespace) and has the shape above; a tensor entry has exactly the
//     three fields (an unknown field is an error rather than ignored: it could
//     change what the bytes mean);
//   - no name appears twice, neither among tensors nor in "__metadata__";
//   - dtype is a standard safetensors dtype name (SafetensorsDtypeName);
//   - shape entries are integers in [0, 2^64); a scalar has shape [] and one
//     element; numel and numel * dtype bits must not overflow 64 bits, and a
//     sub-byte dtype (F4, F6_*) must fill whole bytes;
//   - end - begin == numel * dtype bits / 8;
//   - sorted by (begin, end), the tensors tile [0, data section size) exactly:
//     no hole, no overlap, nothing left over.
// Every error is InvalidArgument and names the tensor and what is wrong.
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(uint64_t n, ParseSafetensorsHeaderLength(first8, file_bytes));
//   FSDP_ASSIGN_OR_RETURN(SafetensorsHeader header,
//                         ParseSafetensorsHeader(json_of_n_bytes, file_bytes - 8 - n));
//   for (const SafetensorsTensorInfo& t : header.tensors) ...   // in data order
#ifndef FSDP_CHECKPOINT_SAFETENSORS_FORMAT_H_
#define FSDP_CHECKPOINT_SAFETENSORS_FORMAT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fsdp {
namespace checkpoint {

// The 8-byte little-endian header length that starts every file.
inline constexpr uint64_t kSafetensorsLengthBytes = 8;
// The reference implementation's cap on N (100 MB); a larger N is rejected
// before anything is allocated for it.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;
// The header key that holds string -> string metadata instead of a tensor.
inline constexpr absl::string_view kSafetensorsMetadataKey = "__metadata__";

// The standard safetensors dtypes. Only kF32 is read and written by this
// library today; the others are parsed so that a file holding them gives a
// clear "F32 only" error rather than "unknown dtype".
enum class SafetensorsDtype {
  kBool,
  kF4,      // 4-bit float (OCP MX FP4 E2M1)
  kF6E2M3,  // 6-bit floats (OCP MX)
  kF6E3M2,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kF8E8M0,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kC64,  // complex: two F32
  kF64,
  kI64,
  kU64,
};

// The name in the header: "F32", "BF16", "F8_E4M3", ...
absl::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
// Bits per element (4 for F4, 32 for F32, 64 for C64).
int SafetensorsDtypeBits(SafetensorsDtype dtype);
// Inverse of SafetensorsDtypeName; InvalidArgument listing the known names
// otherwise. Names are case-sensitive, as in the reference implementation.
absl::StatusOr<SafetensorsDtype> ParseSafetensorsDtype(absl::string_view name);

struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<uint64_t> shape;  // row-major dimensions; [] is a scalar
  uint64_t numel = 1;           // product of shape (1 for a scalar)
  uint64_t data_begin = 0;      // bytes, relative to the start of the data section
  uint64_t data_end = 0;        // one past the last byte

  uint64_t num_bytes() const { return data_end - data_begin; }
};

struct SafetensorsHeader {
  // Sorted by (data_begin, data_end): the order of the data section. Tensors
  // with equal offsets (empty ones) keep the order of the JSON.
  std::vector<SafetensorsTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

// Checks the first 8 bytes of a file of `file_bytes` bytes and returns N.
// `prefix` holds the file's first min(8, file_bytes) bytes. InvalidArgument if
// the file is shorter than 8 bytes, N exceeds kSafetensorsMaxHeaderBytes, or
// 8 + N exceeds the file.
absl::StatusOr<uint64_t> ParseSafetensorsHeaderLength(absl::string_view prefix,
                                                      uint64_t file_bytes);

// Parses and validates the N header bytes against a data section of
// `data_section_bytes` bytes (file size - 8 - N). Pure: the fuzzing entry point.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view json,
                                                         uint64_t data_section_bytes);

// The header bytes for `header` (compact JSON with "__metadata__" first and
// tensors in data order, padded with spaces to a multiple of 8 bytes), so that
// the file is "8-byte N" + result + data. The header must be valid by the rules
// above for a data section of header.tensors.back().data_end bytes (0 if
// none), every name and metadata string valid UTF-8, and the result at most
// kSafetensorsMaxHeaderBytes; otherwise InvalidArgument saying which.
// ParseSafetensorsHeader(result, that size) returns `header` again.
absl::StatusOr<std::string> SerializeSafetensorsHeader(const SafetensorsHeader& header);

// What a writer asks for: a tensor's name and shape (the dtype is F32).
struct SafetensorsTensorSpec {
  std::string name;
  std::vector<uint64_t> shape;  // [] is a scalar
};

// Lays out F32 tensors back to back in the given order, from offset 0.
// InvalidArgument for a duplicate name, the name "__metadata__", or a size
// that overflows 64 bits.
absl::StatusOr<SafetensorsHeader> LayOutF32Tensors(
    absl::Span<const SafetensorsTensorSpec> tensors,
    const std::map<std::string, std::string>& metadata);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_SAFETENSORS_FORMAT_H_
