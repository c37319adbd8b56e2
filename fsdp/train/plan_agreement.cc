// File: fsdp/train/plan_agreement.cc
#include "fsdp/train/plan_agreement.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/status_macros.h"
#include "fsdp/plan/plan_compare.h"

namespace fsdp {
namespace {

// All-gathers one uint64 from every rank. Small (8 bytes per rank) and only
// at start-up, so not counted by the MemoryTracker.
absl::StatusOr<std::vector<uint64_t>> AllGatherU64(comm::Communicator& world, uint64_t value,
                                                   absl::Duration timeout, const char* what) {
  std::vector<uint64_t> mine = {value};
  std::vector<uint64_t> all(world.size(), 0);
  if (world.size() == 1) return mine;
  comm::AllGatherOptions options;
  options.input = comm::AsConstBytes(absl::Span<const uint64_t>(mine));
  options.output = comm::AsBytes(absl::MakeSpan(all));
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.AllGather(options));
  absl::Status status = work->Wait(timeout);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("shard plan check, ", what, " all-gather: ",
                                                    status.message()));
  }
  return all;
}

}  // namespace

absl::Status CheckPlansAgree(comm::Communicator& world, const proto::ShardPlan& plan,
                             absl::Duration timeout) {
  FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> fingerprints,
                        AllGatherU64(world, plan.fingerprint(), timeout, "fingerprint"));
  const auto differs = std::find_if(fingerprints.begin(), fingerprints.end(),
                                    [&](uint64_t f) { return f != fingerprints[0]; });
  if (differs == fingerprints.end()) return absl::OkStatus();
  const int other = static_cast<int>(differs - fingerprints.begin());

  // Mismatch: every rank reached this point (they all saw the same
  // fingerprints), so every rank takes part in the plan exchange below.
  std::string serialized;
  if (!plan.SerializeToString(&serialized)) {
    return absl::InternalError("shard plan check: cannot serialize this rank's plan");
  }
  FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes,
                        AllGatherU64(world, serialized.size(), timeout, "plan size"));
  const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> mine(max_size, 0);
  std::copy(serialized.begin(), serialized.end(), mine.begin());
  std::vector<char> all(max_size * world.size(), 0);
  comm::AllGatherOptions options;
  options.input = comm::AsConstBytes(absl::Span<const char>(mine));
  options.output = comm::AsBytes(absl::MakeSpan(all));
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.AllGather(options));
  absl::Status waited = work->Wait(timeout);
  if (!waited.ok()) {
    return absl::Status(waited.code(),
                        absl::StrCat("shard plan check, plan all-gather: ", waited.message()));
  }
  proto::ShardPlan plans[2];
  const int ranks[2] = {0, other};
  for (int i = 0; i < 2; ++i) {
    const char* begin = all.data() + max_size * ranks[i];
    if (!plans[i].ParseFromArray(begin, static_cast<int>(sizes[ranks[i]]))) {
      return absl::InternalError(
          absl::StrCat("shard plan check: rank ", ranks[i], "'s serialized plan does not parse"));
    }
  }
  absl::Status compared = plan::ComparePlans(plans[0], 0, plans[1], other);
  if (!compared.ok()) return compared;
  return absl::InvalidArgumentError(absl::StrCat(
      "rank 0 and rank ", other, " hold shard plans with fingerprints ", fingerprints[0], " and ",
      fingerprints[other], " that compare equal field by field; the ranks run different builds"));
}

}  // namespace fsdp
