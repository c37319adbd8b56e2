// File: fsdp/train/plan_agreement.cc
#include "fsdp/train/plan_agreement.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fsdp/exchange/blob_exchange.h"
#include "fsdp/plan/plan_compare.h"

namespace fsdp {

absl::Status CheckPlansAgree(comm::Communicator& world, const proto::ShardPlan& plan,
                             absl::Duration timeout) {
  FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> fingerprints,
                        AllGatherU64(world, plan.fingerprint(), timeout, "shard plan check, fingerprint"));
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
  FSDP_ASSIGN_OR_RETURN(std::vector<std::string> serialized_plans,
                        AllGatherBlobs(world, serialized, timeout, "shard plan check, plan"));
  proto::ShardPlan plans[2];
  const int ranks[2] = {0, other};
  for (int i = 0; i < 2; ++i) {
    if (!plans[i].ParseFromString(serialized_plans[ranks[i]])) {
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
