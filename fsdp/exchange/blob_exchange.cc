// File: fsdp/exchange/blob_exchange.cc
#include "fsdp/exchange/blob_exchange.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fsdp {
namespace {

absl::Status AllGatherBytes(comm::Communicator& world, absl::Span<const std::byte> input,
                            absl::Span<std::byte> output, absl::Duration timeout,
                            absl::string_view what) {
  comm::AllGatherOptions options;
  options.input = input;
  options.output = output;
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.AllGather(options));
  absl::Status status = work->Wait(timeout);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(what, " all-gather: ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<uint64_t>> AllGatherU64(comm::Communicator& world, uint64_t value,
                                                   absl::Duration timeout,
                                                   absl::string_view what) {
  std::vector<uint64_t> mine = {value};
  if (world.size() == 1) return mine;
  std::vector<uint64_t> all(world.size(), 0);
  FSDP_RETURN_IF_ERROR(AllGatherBytes(world, comm::AsConstBytes(absl::Span<const uint64_t>(mine)),
                                      comm::AsBytes(absl::MakeSpan(all)), timeout, what));
  return all;
}

absl::StatusOr<std::vector<std::string>> AllGatherBlobs(comm::Communicator& world,
                                                        absl::string_view blob,
                                                        absl::Duration timeout,
                                                        absl::string_view what) {
  if (world.size() == 1) return std::vector<std::string>{std::string(blob)};
  FSDP_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes,
                        AllGatherU64(world, blob.size(), timeout, absl::StrCat(what, " size")));
  const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> mine(max_size, 0);
  std::copy(blob.begin(), blob.end(), mine.begin());
  std::vector<char> all(max_size * world.size(), 0);
  FSDP_RETURN_IF_ERROR(AllGatherBytes(world, comm::AsConstBytes(absl::Span<const char>(mine)),
                                      comm::AsBytes(absl::MakeSpan(all)), timeout, what));
  std::vector<std::string> blobs(world.size());
  for (int r = 0; r < world.size(); ++r) blobs[r].assign(all.data() + max_size * r, sizes[r]);
  return blobs;
}

absl::Status AgreeOnStatus(comm::Communicator& world, const absl::Status& mine,
                           absl::Duration timeout, absl::string_view what) {
  std::string blob;
  if (!mine.ok()) {
    blob.push_back(static_cast<char>(static_cast<int>(mine.code())));
    blob.append(mine.message().data(), mine.message().size());
  }
  FSDP_ASSIGN_OR_RETURN(std::vector<std::string> all,
                        AllGatherBlobs(world, blob, timeout, what));
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r].empty()) continue;
    const auto code = static_cast<absl::StatusCode>(static_cast<unsigned char>(all[r][0]));
    return absl::Status(code, absl::StrCat("rank ", r, ": ", absl::string_view(all[r]).substr(1)));
  }
  return absl::OkStatus();
}

}  // namespace fsdp
