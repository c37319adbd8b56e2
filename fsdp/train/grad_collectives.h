// File: fsdp/train/grad_collectives.h
//
// What a unit's gradient reduction sends, apart from when its state changes
// (fsdp/train/flat_unit.cc decides that). The all-reduce of a padded flat
// gradient buffer is built as
//
//   reduce-scatter(sum)  padded grads (world_size * shard_numel) -> my shard
//   scale my shard by 1 / world_size                      (sum -> average)
//   all-gather           my shard -> padded grads on every rank
//
// [Note: why sum then scale] The sharded strategies stop after the scale and
// step the optimizer on the shard; doing the same two steps here means every
// averaged gradient element is computed by identical arithmetic in every
// strategy. Multiplying by 1/world_size (rather than a kAverage reduction
// whose division is the transport's business) keeps that arithmetic ours.
// For world sizes that are powers of two the scale is exact.
//
// World size 1 has an explicit path: the reduce-scatter is a copy and the
// all-gather a no-op; both return an already-finished Work so callers wait
// the same way.
#ifndef FSDP_TRAIN_GRAD_COLLECTIVES_H_
#define FSDP_TRAIN_GRAD_COLLECTIVES_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/communicator.h"

namespace fsdp {

// Posts the sum reduce-scatter of `padded_grads` (a multiple of comm.size()
// elements) into `shard` (padded_grads.size() / comm.size() elements).
absl::StatusOr<comm::WorkHandle> PostGradReduceScatter(comm::Communicator& comm,
                                                       absl::Span<const float> padded_grads,
                                                       absl::Span<float> shard);

// Posts the all-gather of `shard` from every rank into `padded_grads`.
absl::StatusOr<comm::WorkHandle> PostGradAllGather(comm::Communicator& comm,
                                                   absl::Span<const float> shard,
                                                   absl::Span<float> padded_grads);

// shard[i] *= scale: the sum -> average step of the reduction.
void ScaleGradShard(absl::Span<float> shard, float scale);

}  // namespace fsdp

#endif  // FSDP_TRAIN_GRAD_COLLECTIVES_H_
