// File: comm/liveness.h
//
// What this rank's heartbeat says about its *caller*: the thread(s) that
// call the communicator. The hang detector (comm/rendezvous/hang_verdict.h)
// needs it because a heartbeat thread alone keeps beating while the main
// thread is stuck in a computation: the beat must carry whether the caller
// still takes part in the job.
//
// The progress engine (comm/progress_engine.h) writes it: every call into the
// communicator (posting a collective, Test, Wait's start and end, KeepAlive)
// notes the time; while a caller is blocked in Work::Wait it counts as alive
// (waiting for others is not being stuck); and the engine publishes its
// oldest in-flight collective and what that collective waits for. The
// rendezvous heartbeat thread reads a Snapshot each beat and sends it to the
// store on rank 0.
//
// Thread-safe: every method may be called from any thread. The writes on the
// engine's hot path (NoteCall, Enter/LeaveWait, SetOldestPending) are single
// atomic stores; SetAwaited takes a mutex and is called at most every few
// tens of milliseconds, and only while a wait is blocked.
//
// Times are std::chrono::steady_clock: a wall-clock step (NTP) must not look
// like a hang.
#ifndef COMM_LIVENESS_H_
#define COMM_LIVENESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace comm {

class CallerLiveness {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts as if the caller had just called.
  CallerLiveness();

  // The caller called into the communicator (or said it is alive).
  void NoteCall();
  // Around a blocking wait for a collective. Calls nest across threads.
  void EnterWait();
  void LeaveWait();

  // The oldest collective still in flight was posted at `since`; none if
  // unset.
  void SetOldestPending(std::optional<Clock::time_point> since);
  // What that collective waits for: a global rank (-1 unknown) and a
  // description ("all_reduce #3 on communicator 0x1 ...: recv of segment 0
  // at ring step 2").
  void SetAwaited(int global_rank, std::string what);

  struct Snapshot {
    // Since the caller last called; zero while it is blocked in a wait.
    absl::Duration idle;
    // Age of the oldest collective in flight; zero if none.
    absl::Duration pending;
    int awaited_rank = -1;  // what that collective waits for
    std::string awaited_what;
  };
  Snapshot Read() const;

 private:
  static int64_t NowNanos();

  std::atomic<int64_t> last_call_ns_;
  std::atomic<int> waiting_{0};
  std::atomic<int64_t> oldest_pending_ns_{-1};  // -1: nothing in flight
  mutable std::mutex awaited_mu_;
  int awaited_rank_ = -1;     // guarded by awaited_mu_
  std::string awaited_what_;  // guarded by awaited_mu_
};

}  // namespace comm

#endif  // COMM_LIVENESS_H_
