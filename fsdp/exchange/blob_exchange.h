// File: fsdp/exchange/blob_exchange.h
//
// All-gathers one byte string of any length from every rank of a
// communicator: first the lengths (one uint64 each), then every blob padded
// to the longest. For the small, rare exchanges of the control path (plan
// checks, checkpoint commits and their statuses), so the buffers are not
// counted by the MemoryTracker.
//
//   FSDP_ASSIGN_OR_RETURN(std::vector<std::string> all,
//                         AllGatherBlobs(world, mine, absl::Seconds(60), "plan"));
//   // all[r] is rank r's blob, on every rank.
#ifndef FSDP_EXCHANGE_BLOB_EXCHANGE_H_
#define FSDP_EXCHANGE_BLOB_EXCHANGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/communicator.h"

namespace fsdp {

// One uint64 from every rank, in rank order. Errors: the collective's (a
// peer that does not take part within `timeout` is named), prefixed with
// `what`.
absl::StatusOr<std::vector<uint64_t>> AllGatherU64(comm::Communicator& world, uint64_t value,
                                                   absl::Duration timeout, absl::string_view what);

// Every rank's blob, in rank order. Every rank must call it.
absl::StatusOr<std::vector<std::string>> AllGatherBlobs(comm::Communicator& world,
                                                        absl::string_view blob,
                                                        absl::Duration timeout,
                                                        absl::string_view what);

// Every rank learns whether every rank succeeded: OK if all of `mine` are
// OK, else on EVERY rank the lowest failing rank's status, its message
// prefixed "rank r: ". So all ranks take the same branch after a step that
// may fail on some of them (a checkpoint write, a load). The exchange's own
// failure (a peer gone) is returned as is.
absl::Status AgreeOnStatus(comm::Communicator& world, const absl::Status& mine,
                           absl::Duration timeout, absl::string_view what);

}  // namespace fsdp

#endif  // FSDP_EXCHANGE_BLOB_EXCHANGE_H_
