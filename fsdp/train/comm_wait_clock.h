// File: fsdp/train/comm_wait_clock.h
//
// Waits on collectives with a deadline, and adds up the time the training
// thread spent blocked in them: the "comm wait" share of a step. Time during
// which communication overlapped compute is NOT counted, only the blocking.
//
//   CommWaitClock clock;
//   FSDP_RETURN_IF_ERROR(clock.Wait(*work, absl::Seconds(60), "unit 3 grads"));
//   absl::Duration blocked = clock.total();
#ifndef FSDP_TRAIN_COMM_WAIT_CLOCK_H_
#define FSDP_TRAIN_COMM_WAIT_CLOCK_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/communicator.h"

namespace fsdp {

class CommWaitClock {
 public:
  // Waits for `work` up to `timeout`. On error, prefixes the collective's
  // message (which names the ranks involved) with `what` so the reader knows
  // which step of training was waiting.
  absl::Status Wait(comm::Work& work, absl::Duration timeout, absl::string_view what);

  absl::Duration total() const { return total_; }
  int num_waits() const { return num_waits_; }
  void Reset() {
    total_ = absl::ZeroDuration();
    num_waits_ = 0;
  }

 private:
  absl::Duration total_ = absl::ZeroDuration();
  int num_waits_ = 0;
};

}  // namespace fsdp

#endif  // FSDP_TRAIN_COMM_WAIT_CLOCK_H_
