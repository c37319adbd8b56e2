// File: fsdp/checkpoint/shard_file.h
//
// One rank's shard file: the regions it saves ([Note: checkpoint regions] in
// fsdp/checkpoint/state_region.h), their fp32 elements back to back as
// little-endian bytes, nothing else. What each byte is lives in the
// manifest's ShardFile entry that WriteShardFile returns: the extents, the
// size and the SHA-256 of every chunk.
//
//   FSDP_ASSIGN_OR_RETURN(proto::ShardFile entry,
//                         WriteShardFile(dir, ShardFileName(rank), rank, regions));
#ifndef FSDP_CHECKPOINT_SHARD_FILE_H_
#define FSDP_CHECKPOINT_SHARD_FILE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fsdp/checkpoint/state_region.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {
namespace checkpoint {

// Chunk size of the per-chunk digests: a reader verifies whole chunks, so
// this bounds both its bounce buffer and the bytes it reads beyond what it
// needs.
inline constexpr int64_t kDefaultChunkBytes = int64_t{1} << 20;

// Creates dir/name (which must not exist), writes the regions in order,
// fsyncs and closes it. The directory itself is not synced (the commit
// does it once for all files). On error (e.g. ResourceExhausted for a full
// disk, PermissionDenied) the file is removed and the error names it.
// `keep_alive`, if set, is called after every write of at most 8 MiB: a
// long write is not a hang (Communicator::KeepAlive).
absl::StatusOr<proto::ShardFile> WriteShardFile(const std::string& dir, const std::string& name,
                                                int rank, absl::Span<const StateRegion> regions,
                                                int64_t chunk_bytes = kDefaultChunkBytes,
                                                const std::function<void()>& keep_alive = {});

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_SHARD_FILE_H_
