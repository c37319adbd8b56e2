// File: fsdp/train/comm_wait_clock.cc
#include "fsdp/train/comm_wait_clock.h"

#include "absl/strings/str_cat.h"

namespace fsdp {

absl::Status CommWaitClock::Wait(comm::Work& work, absl::Duration timeout,
                                 absl::string_view what) {
  const absl::Time start = absl::Now();
  absl::Status status = work.Wait(timeout);
  total_ += absl::Now() - start;
  ++num_waits_;
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace fsdp
