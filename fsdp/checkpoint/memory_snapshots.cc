// File: fsdp/checkpoint/memory_snapshots.cc
#include "fsdp/checkpoint/memory_snapshots.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "fsdp/checkpoint/checkpoint.h"
#include "fsdp/exchange/blob_exchange.h"

namespace fsdp {
namespace checkpoint {
namespace {

std::vector<proto::Extent> LayoutOf(const std::vector<StateRegion>& regions) {
  std::vector<proto::Extent> layout;
  for (const StateRegion& region : regions) {
    proto::Extent extent;
    extent.set_state(region.state);
    extent.set_model_offset(region.model_offset);
    extent.set_numel(static_cast<int64_t>(region.data.size()));
    layout.push_back(std::move(extent));
  }
  return layout;
}

int64_t NumelOf(const std::vector<proto::Extent>& layout) {
  int64_t numel = 0;
  for (const proto::Extent& extent : layout) numel += extent.numel();
  return numel;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MemorySnapshots>> MemorySnapshots::Create(comm::Communicator& world,
                                                                         CheckpointableState& state,
                                                                         MemoryTracker* tracker,
                                                                         absl::Duration timeout) {
  std::unique_ptr<MemorySnapshots> snapshots(new MemorySnapshots(state, world));
  FSDP_ASSIGN_OR_RETURN(std::vector<StateRegion> regions, state.CheckpointShardRegions());
  snapshots->own_layout_ = LayoutOf(regions);
  const proto::ShardPlan& plan = state.plan();
  // One holder per shard: the buddy copy is the second.
  snapshots->buddy_copies_ = world.size() > 1 && plan.shard_group_size() == world.size();
  proto::ShardFile mine;
  for (const proto::Extent& extent : snapshots->own_layout_) *mine.add_extents() = extent;
  FSDP_ASSIGN_OR_RETURN(
      std::vector<std::string> layouts,
      AllGatherBlobs(world, mine.SerializeAsString(), timeout, "memory snapshot layouts"));
  int64_t max_numel = 0;
  for (size_t r = 0; r < layouts.size(); ++r) {
    proto::ShardFile theirs;
    if (!theirs.ParseFromString(layouts[r])) {
      return absl::InternalError(
          absl::StrCat("memory snapshot layouts: rank ", r, "'s does not parse"));
    }
    max_numel = std::max(max_numel, NumelOf({theirs.extents().begin(), theirs.extents().end()}));
    if (static_cast<int>(r) == (world.rank() + world.size() - 1) % world.size()) {
      snapshots->previous_layout_.assign(theirs.extents().begin(), theirs.extents().end());
      snapshots->previous_rank_ = static_cast<int>(r);
    }
  }
  snapshots->previous_shard_rank_ = snapshots->previous_rank_ % plan.shard_group_size();
  // Every rank sends and receives the largest shard's size: the shift needs
  // one size on every rank.
  const int64_t own_numel = snapshots->buddy_copies_ ? max_numel : NumelOf(snapshots->own_layout_);
  for (int g = 0; g < 2; ++g) {
    Generation& generation = snapshots->generations_[g];
    FSDP_ASSIGN_OR_RETURN(generation.own,
                          tracker->Allocate(MemoryCategory::kSnapshots, own_numel,
                                            absl::StrCat("memory snapshot ", g, ": own shard")));
    if (snapshots->buddy_copies_) {
      FSDP_ASSIGN_OR_RETURN(
          generation.buddy,
          tracker->Allocate(MemoryCategory::kSnapshots, max_numel,
                            absl::StrCat("memory snapshot ", g, ": rank ",
                                         snapshots->previous_rank_, "'s shard (buddy copy)")));
    }
  }
  return snapshots;
}

absl::Status MemorySnapshots::Take(int64_t step, proto::CheckpointManifest manifest,
                                   absl::Duration timeout) {
  const int target = committed_ == 0 ? 1 : 0;
  Generation& generation = generations_[target];
  generation.step = step;
  generation.own_complete = false;
  generation.buddy_complete = false;
  pending_ = -1;
  CompleteManifest(state_, step, manifest);
  generation.manifest = std::move(manifest);

  const absl::Time copy_start = absl::Now();
  FSDP_ASSIGN_OR_RETURN(std::vector<StateRegion> regions, state_.CheckpointShardRegions());
  // The copy is sized for the layout seen at creation: anything else would
  // write past it.
  const std::vector<proto::Extent> layout = LayoutOf(regions);
  const bool same_layout = layout.size() == own_layout_.size() &&
                           std::equal(layout.begin(), layout.end(), own_layout_.begin(),
                                      [](const proto::Extent& a, const proto::Extent& b) {
                                        return a.state() == b.state() &&
                                               a.model_offset() == b.model_offset() &&
                                               a.numel() == b.numel();
                                      });
  if (!same_layout) {
    return absl::InternalError("memory snapshot: the shard's layout changed since it was created");
  }
  float* out = generation.own.data();
  for (const StateRegion& region : regions) {
    std::memcpy(out, region.data.data(), region.data.size() * sizeof(float));
    out += region.data.size();
  }
  generation.own_complete = true;
  last_copy_time_ = absl::Now() - copy_start;

  if (buddy_copies_) {
    const absl::Time shift_start = absl::Now();
    comm::ShiftOptions shift;
    shift.input = comm::AsConstBytes(absl::Span<const float>(generation.own.span()));
    shift.output = comm::AsBytes(generation.buddy.span());
    shift.distance = 1;
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world_.Shift(shift));
    if (absl::Status done = work->Wait(timeout); !done.ok()) {
      return absl::Status(done.code(), absl::StrCat("memory snapshot of step ", step,
                                                    ": the buddy copy: ", done.message()));
    }
    generation.buddy_complete = true;
    last_shift_time_ = absl::Now() - shift_start;
  }
  pending_ = target;
  return absl::OkStatus();
}

void MemorySnapshots::Commit() {
  if (pending_ < 0) return;
  committed_ = pending_;
  pending_ = -1;
}

int64_t MemorySnapshots::committed_step() const {
  return committed_ < 0 ? -1 : generations_[committed_].step;
}

int64_t MemorySnapshots::bytes() const {
  int64_t total = 0;
  for (const Generation& g : generations_) total += g.own.num_bytes() + g.buddy.num_bytes();
  return total;
}

std::vector<StateRegion> MemorySnapshots::RegionsOver(const std::vector<proto::Extent>& layout,
                                                      FloatBuffer& data) {
  std::vector<StateRegion> regions;
  int64_t offset = 0;
  for (const proto::Extent& extent : layout) {
    regions.push_back(StateRegion{extent.state(), extent.model_offset(),
                                  absl::Span<float>(data.data() + offset, extent.numel())});
    offset += extent.numel();
  }
  return regions;
}

std::vector<SnapshotPiece> MemorySnapshots::CompletePieces() {
  std::vector<int> order = {0, 1};
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return generations_[a].step > generations_[b].step; });
  std::vector<SnapshotPiece> pieces;
  for (int g : order) {
    Generation& generation = generations_[g];
    if (generation.step < 0) continue;
    if (generation.own_complete) {
      pieces.push_back({generation.step, state_.shard_rank(),
                        RegionsOver(own_layout_, generation.own), &generation.manifest});
    }
    if (generation.buddy_complete) {
      pieces.push_back({generation.step, previous_shard_rank_,
                        RegionsOver(previous_layout_, generation.buddy), &generation.manifest});
    }
  }
  return pieces;
}

}  // namespace checkpoint
}  // namespace fsdp
