// File: fsdp/checkpoint/manifest_fuzz.cc
//
// libFuzzer target for the checkpoint manifest parser (manifest_file.h), the
// one parser of untrusted manifest bytes. The first input byte picks what
// the rest is:
//   even: a whole manifest.pb file, through DecodeManifestFile (header,
//         length, SHA-256, protobuf, version, ValidateManifest);
//   odd:  a bare protobuf payload, parsed and checked by ValidateManifest, so
//         the fuzzer reaches the consistency checks without forging digests.
// Whatever is accepted must round-trip: encoded again it decodes to the
// same manifest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fsdp/checkpoint/manifest_file.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

void RoundTrip(const fsdp::proto::CheckpointManifest& manifest) {
  absl::StatusOr<fsdp::proto::CheckpointManifest> again =
      fsdp::checkpoint::DecodeManifestFile(fsdp::checkpoint::EncodeManifestFile(manifest), "x");
  Check(again.ok());
  Check(again->SerializeAsString() == manifest.SerializeAsString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    absl::StatusOr<fsdp::proto::CheckpointManifest> decoded =
        fsdp::checkpoint::DecodeManifestFile(rest, "fuzz/manifest.pb");
    if (decoded.ok()) RoundTrip(*decoded);
    return 0;
  }
  fsdp::proto::CheckpointManifest manifest;
  if (!manifest.ParseFromString(rest)) return 0;
  if (!fsdp::checkpoint::ValidateManifest(manifest).ok()) return 0;
  manifest.set_format_version(fsdp::checkpoint::kCheckpointFormatVersion);
  RoundTrip(manifest);
  return 0;
}
