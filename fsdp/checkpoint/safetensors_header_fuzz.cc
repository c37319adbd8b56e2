// File: fsdp/checkpoint/safetensors_header_fuzz.cc
//
// libFuzzer target for the safetensors header (//fsdp/checkpoint:
// safetensors_header_fuzz_test; docs/build.md says how to run it longer).
// Each input is read twice (see LLVMFuzzerTestOneInput): as a whole file, the
// way SafetensorsReader::Open reads one, and as a bare header after an 8-byte
// prefix, against the data-section size its offsets claim, so that mutated
// headers are often accepted. Besides "no crash, no sanitizer report", every
// accepted header must satisfy what the format promises and survive a round
// trip: serialized again, it parses to the same header. A broken promise
// aborts (FSDP_CHECK), which libFuzzer records as a crash with its input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/safetensors_format.h"
#include "nlohmann/json.hpp"

namespace fsdp {
namespace checkpoint {
namespace {

void CheckPromises(const SafetensorsHeader& header, uint64_t data_section_bytes) {
  uint64_t covered = 0;
  for (const SafetensorsTensorInfo& t : header.tensors) {
    FSDP_CHECK(t.data_begin == covered);  // sorted, no hole, no overlap
    FSDP_CHECK(t.data_end >= t.data_begin);
    // Recomputed in 128 bits: every partial product of an accepted shape fits
    // in 64 (the parser rejects an overflow at any step, as the reference does).
    unsigned __int128 numel = 1;
    for (uint64_t dim : t.shape) {
      numel *= dim;
      FSDP_CHECK(numel <= ~uint64_t{0});
    }
    FSDP_CHECK(numel == t.numel);
    const unsigned __int128 bits =
        static_cast<unsigned __int128>(t.numel) * SafetensorsDtypeBits(t.dtype);
    FSDP_CHECK(bits % 8 == 0 && bits / 8 == t.num_bytes());
    FSDP_CHECK(t.name != kSafetensorsMetadataKey);
    covered = t.data_end;
  }
  FSDP_CHECK(covered == data_section_bytes);
}

void CheckSameHeader(const SafetensorsHeader& a, const SafetensorsHeader& b) {
  FSDP_CHECK(a.metadata == b.metadata);
  FSDP_CHECK(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const SafetensorsTensorInfo &x = a.tensors[i], &y = b.tensors[i];
    FSDP_CHECK(x.name == y.name && x.dtype == y.dtype && x.shape == y.shape && x.numel == y.numel &&
               x.data_begin == y.data_begin && x.data_end == y.data_end);
  }
}

// Parses `json` against a data section of `data_section_bytes` and checks
// what an accepted header promises.
void FuzzHeader(absl::string_view json, uint64_t data_section_bytes) {
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(json, data_section_bytes);
  if (!header.ok()) {
    // Rejections are InvalidArgument and say something.
    FSDP_CHECK(header.status().code() == absl::StatusCode::kInvalidArgument);
    FSDP_CHECK(!header.status().message().empty());
    return;
  }
  CheckPromises(*header, data_section_bytes);

  // Whatever we accept we can write, and read back unchanged.
  absl::StatusOr<std::string> again = SerializeSafetensorsHeader(*header);
  FSDP_CHECK(again.ok());
  FSDP_CHECK(again->size() % 8 == 0);
  absl::StatusOr<SafetensorsHeader> reparsed = ParseSafetensorsHeader(*again, data_section_bytes);
  FSDP_CHECK(reparsed.ok());
  CheckSameHeader(*header, *reparsed);
}

// The largest end offset in the header, or 0. Never throws: parse errors
// give a discarded value and every access is checked first.
uint64_t ClaimedDataSectionBytes(absl::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr,
                                                   /*allow_exceptions=*/false);
  uint64_t claimed = 0;
  if (!doc.is_object()) return claimed;
  for (const auto& item : doc.items()) {
    const nlohmann::json& entry = item.value();
    if (!entry.is_object()) continue;
    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) continue;
    const nlohmann::json& end = (*offsets)[1];
    if (end.is_number_unsigned()) claimed = std::max(claimed, end.get<uint64_t>());
  }
  return claimed;
}

}  // namespace
}  // namespace checkpoint
}  // namespace fsdp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fsdp::checkpoint;
  const absl::string_view file(reinterpret_cast<const char*>(data), size);

  // 1. As SafetensorsReader::Open sees the file: 8-byte length N, N bytes of
  // header, the rest is the data section.
  absl::StatusOr<uint64_t> n =
      ParseSafetensorsHeaderLength(file.substr(0, kSafetensorsLengthBytes), file.size());
  if (n.ok()) {
    FSDP_CHECK(kSafetensorsLengthBytes + *n <= file.size());
    FuzzHeader(file.substr(kSafetensorsLengthBytes, *n),
               file.size() - kSafetensorsLengthBytes - *n);
  } else {
    FSDP_CHECK(n.status().code() == absl::StatusCode::kInvalidArgument);
  }

  // 2. Everything after the first 8 bytes as the header, against the data
  // section its own offsets claim. Most mutations insert or erase bytes,
  // which in (1) moves the header's end away from N and the data section's
  // size away from what the tensors cover, so (1) almost only sees rejected
  // headers; here a mutated header is still whole and still covers its data,
  // and the accepting path and the round trip get their share of the inputs
  // (from the invalid_data_missing_* seeds: files without their data, so
  // header-only inputs).
  if (file.size() >= kSafetensorsLengthBytes) {
    const absl::string_view header = file.substr(kSafetensorsLengthBytes);
    FuzzHeader(header, ClaimedDataSectionBytes(header));
  }
  return 0;
}
