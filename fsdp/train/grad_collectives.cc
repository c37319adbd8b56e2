// File: fsdp/train/grad_collectives.cc
#include "fsdp/train/grad_collectives.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"

namespace fsdp {
namespace {

// A collective that finished when it was posted (the world-size-1 path).
class FinishedWork : public comm::Work {
 public:
  bool Test() override { return true; }
  absl::Status Wait(absl::Duration) override { return absl::OkStatus(); }
};

absl::Status CheckSizes(const comm::Communicator& comm, size_t padded_numel,
                        size_t shard_numel, const char* what) {
  const size_t world = static_cast<size_t>(comm.size());
  if (padded_numel % world != 0 || shard_numel * world != padded_numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": padded buffer of ", padded_numel, " floats and shard of ", shard_numel,
        " floats do not split over ", world,
        " ranks; pad the unit to a multiple of the world size (MakeFlatUnitLayout)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<comm::WorkHandle> PostGradReduceScatter(comm::Communicator& comm,
                                                       absl::Span<const float> padded_grads,
                                                       absl::Span<float> shard) {
  absl::Status sizes =
      CheckSizes(comm, padded_grads.size(), shard.size(), "gradient reduce-scatter");
  if (!sizes.ok()) return sizes;
  if (comm.size() == 1) {
    std::copy(padded_grads.begin(), padded_grads.end(), shard.begin());
    return comm::WorkHandle(std::make_shared<FinishedWork>());
  }
  comm::ReduceScatterOptions options;
  options.input = comm::AsConstBytes(padded_grads);
  options.output = comm::AsBytes(shard);
  options.dtype = comm::Dtype::kFloat32;
  options.op = comm::ReduceOp::kSum;
  return comm.ReduceScatter(options);
}

absl::StatusOr<comm::WorkHandle> PostGradAllGather(comm::Communicator& comm,
                                                   absl::Span<const float> shard,
                                                   absl::Span<float> padded_grads) {
  absl::Status sizes =
      CheckSizes(comm, padded_grads.size(), shard.size(), "gradient all-gather");
  if (!sizes.ok()) return sizes;
  if (comm.size() == 1) {
    std::copy(shard.begin(), shard.end(), padded_grads.begin());
    return comm::WorkHandle(std::make_shared<FinishedWork>());
  }
  comm::AllGatherOptions options;
  options.input = comm::AsConstBytes(shard);
  options.output = comm::AsBytes(padded_grads);
  return comm.AllGather(options);
}

void ScaleGradShard(absl::Span<float> shard, float scale) {
  for (float& v : shard) v *= scale;
}

}  // namespace fsdp
