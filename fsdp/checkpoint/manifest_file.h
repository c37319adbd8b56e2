// File: fsdp/checkpoint/manifest_file.h
//
// The manifest file (manifest.pb) of a checkpoint: a CheckpointManifest
// (proto/checkpoint.proto) behind a small header that makes corruption
// detectable, since a protobuf with a flipped byte often still parses:
//
//   bytes  0..7    "FSDPCKPT"
//   bytes  8..15   payload length, little-endian u64
//   bytes 16..47   SHA-256 of the payload
//   bytes 48..     payload: the serialized CheckpointManifest
//
// DecodeManifestFile is the one parser of untrusted manifest bytes (it is
// fuzzed); ValidateManifest checks the manifest's own consistency: tensors
// tile the model vector, extents tile each file and, per state, the model
// vector, chunk digests match the file sizes, file names stay inside the
// checkpoint directory.
//
//   FSDP_ASSIGN_OR_RETURN(proto::CheckpointManifest m,
//                         DecodeManifestFile(bytes, "DIR/step-00000010/manifest.pb"));
#ifndef FSDP_CHECKPOINT_MANIFEST_FILE_H_
#define FSDP_CHECKPOINT_MANIFEST_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {
namespace checkpoint {

// Version of the manifest and shard-file layout this build writes and reads.
inline constexpr int kCheckpointFormatVersion = 1;
// Each element of every state is stored as 4 little-endian bytes.
inline constexpr int64_t kBytesPerElement = 4;
// Manifests larger than this are refused before parsing.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{256} << 20;

// The manifest.pb bytes for `manifest`.
std::string EncodeManifestFile(const proto::CheckpointManifest& manifest);

// Parses and validates manifest.pb bytes. DataLoss naming `path` for a bad
// header, length, digest or payload; InvalidArgument (ValidateManifest's)
// for an inconsistent manifest; FailedPrecondition for another format
// version.
absl::StatusOr<proto::CheckpointManifest> DecodeManifestFile(absl::string_view bytes,
                                                             absl::string_view path);

// OK, or InvalidArgument naming the first inconsistency.
absl::Status ValidateManifest(const proto::CheckpointManifest& manifest);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_MANIFEST_FILE_H_
