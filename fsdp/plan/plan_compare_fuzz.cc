// File: fsdp/plan/plan_compare_fuzz.cc
//
// libFuzzer target for what a rank does with its peers' shard plans at
// start-up when the fingerprints disagree (fsdp/train/plan_agreement.cc):
// parse each serialized plan and ComparePlans them. Input: a 2-byte
// little-endian length n, n bytes of one plan, the rest the other. For
// plans that parse, ComparePlans must say "equal" exactly when protobuf's
// own MessageDifferencer finds them equivalent (unknown fields, which the
// walk does not see, dropped first), must agree in both directions, must
// find a plan equal to itself, and must name both ranks when they differ.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "fsdp/plan/plan_compare.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/shard_plan.pb.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

void IgnoreLog(google::protobuf::LogLevel, const char*, int, const std::string&) {}

}  // namespace

// Parsing invalid UTF-8 in a string field logs a line per input: silenced,
// the fuzzer's speed is in the parsing, not the logging.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(&IgnoreLog);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t n = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  const char* bytes = reinterpret_cast<const char*>(data) + 2;
  fsdp::proto::ShardPlan mine, theirs;
  if (!mine.ParseFromArray(bytes, static_cast<int>(n)) ||
      !theirs.ParseFromArray(bytes + n, static_cast<int>(size - 2 - n))) {
    return 0;
  }
  const absl::Status forward = fsdp::plan::ComparePlans(mine, 0, theirs, 3);
  const absl::Status backward = fsdp::plan::ComparePlans(theirs, 3, mine, 0);
  Check(forward.ok() == backward.ok());
  Check(fsdp::plan::ComparePlans(mine, 0, mine, 1).ok());
  fsdp::proto::ShardPlan mine_known = mine, theirs_known = theirs;
  mine_known.DiscardUnknownFields();
  theirs_known.DiscardUnknownFields();
  Check(forward.ok() ==
        google::protobuf::util::MessageDifferencer::Equivalent(mine_known, theirs_known));
  if (!forward.ok()) {
    Check(forward.code() == absl::StatusCode::kInvalidArgument);
    Check(absl::StrContains(forward.message(), "rank 0 and rank 3 hold different shard plans"));
  }
  return 0;
}
