// File: comm/progress_engine.h
//
// Drives every in-flight collective of one Transport. One engine per
// transport, shared by a communicator and all its sub-communicators (a
// Transport is not thread-safe, and this is where its calls are serialized).
//
// Threading model ([Note: progress engine threads], also in docs/comm.md):
// - One mutex serializes every Transport call and the list of collectives.
// - A background progress thread steps all in-flight collectives while there
//   are any and no caller is waiting on one, so communication overlaps the
//   caller's computation. When a pass makes no progress it spins for
//   kThreadSpin, then blocks in Transport::BlockUntilActivity (bounded by
//   kThreadBlock) so idle ranks sharing a core do not burn it. With nothing in
//   flight it sleeps on the mutex's condition, using no CPU.
// - A caller in Work::Wait drives progress itself (no thread hand-off on the
//   latency path): the background thread steps aside, the caller spins on
//   Progress()+Step() for CommunicatorOptions::wait_spin after the last progress, then blocks in
//   BlockUntilActivity in slices of at most kWaitBlock until its deadline.
// - Posting a collective steps it once at once (its first sends go out
//   before Post returns) and Interrupt()s the transport if the progress
//   thread is blocked in it.
//
// Failures: a transport error ends the collective with that error, prefixed
// "rank R: <op> #<seq> ... failed: ". When nothing progresses the engine asks
// Transport::health(); a dead peer fails every in-flight collective with
// kUnavailable naming it. A Wait that times out returns kDeadlineExceeded
// naming this rank, the op, the time waited and the peer and transfer
// awaited; the collective stays in flight and may be waited on again.
//
// Liveness (comm/liveness.h): if the transport has a hang detector, the
// engine tells it what its caller is doing: every Submit, Test and Wait notes
// a call, a Wait counts as alive for as long as it blocks, and the oldest
// collective in flight (and, refreshed every kAwaitedRefresh while a wait or
// the thread blocks, the peer it waits for) is published for the heartbeats.
//
// A failed collective may still have transport operations posted into its
// memory and its caller's buffers, often to a live peer that will never post
// the matching receive. Before its Work reports the failure the engine aborts
// the transport (Transport::Abort: every pending operation ends, no data moves
// again), so the caller may free its buffers; one failure stops the job.
// Destroying the engine with collectives in flight aborts it the same way and
// cancels them.
#ifndef COMM_PROGRESS_ENGINE_H_
#define COMM_PROGRESS_ENGINE_H_

#include <atomic>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/collective_op.h"
#include "comm/communicator.h"
#include "comm/liveness.h"
#include "comm/scratch_pool.h"
#include "comm/transport.h"

namespace comm {

inline constexpr absl::Duration kPureSpin = absl::Microseconds(20);
inline constexpr absl::Duration kWaitBlock = absl::Milliseconds(5);
inline constexpr absl::Duration kThreadSpin = absl::Microseconds(50);
inline constexpr absl::Duration kThreadBlock = absl::Milliseconds(1);
inline constexpr absl::Duration kAwaitedRefresh = absl::Milliseconds(50);

class ProgressEngine : public std::enable_shared_from_this<ProgressEngine> {
 public:
  // Starts the progress thread. `transport` must outlive the engine.
  static std::shared_ptr<ProgressEngine> Create(Transport* transport,
                                                absl::Duration wait_spin);
  // The same, owning the transport: it is destroyed after the engine has
  // stopped (CreateFromEnvironment uses this).
  static std::shared_ptr<ProgressEngine> CreateOwning(std::unique_ptr<Transport> transport,
                                                      absl::Duration wait_spin);
  ~ProgressEngine();

  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Takes over `op`, steps it once, and returns its handle. `description`
  // names it in errors: "all_reduce #12 on communicator 0x1 (tag 0x1000c000)".
  WorkHandle Submit(std::unique_ptr<CollectiveOp> op, std::string description);

  // A handle that is already finished with `status` (fast paths: world size
  // 1, empty buffers).
  static WorkHandle Finished(absl::Status status);

  Transport* transport() const { return transport_; }

  // The caller is alive (Communicator::KeepAlive). Cheap: one atomic store.
  void NoteCall();
  const std::shared_ptr<ScratchPool>& scratch_pool() const { return scratch_pool_; }

 private:
  struct Record;
  class EngineWork;
  friend class EngineWork;

  ProgressEngine(Transport* transport, absl::Duration wait_spin);
  void ThreadLoop();
  // One pass: transport progress, Step() of every collective, health check
  // when idle. Returns whether anything happened.
  bool StepAllLocked();
  // Ends `record`. A failure with transport operations still posted aborts
  // the transport first (Transport::Abort), so the caller's buffers are free.
  void FinishLocked(Record* record, absl::Status status);
  // Frees `op`, or leaks it if the transport still holds its completions.
  void ReleaseOpLocked(std::unique_ptr<CollectiveOp> op);
  // Liveness: the oldest collective in flight, and (rate-limited) whom it
  // waits for.
  void PublishPendingLocked();
  void PublishAwaitedLocked();
  bool Test(Record* record);
  absl::Status Wait(Record* record, absl::Duration timeout);
  // Wakes whichever thread is blocked in the transport, if one is.
  void InterruptIfBlocked();
  // BlockUntilActivity, with blocked_in_transport_ set around it; skipped if
  // more than `own_lock_wanted` threads (the caller's own count) want mu_.
  absl::Status BlockInTransportLocked(absl::Duration timeout, int own_lock_wanted);

  // Declared first so it is destroyed last, after the thread has stopped.
  std::unique_ptr<Transport> owned_transport_;
  Transport* const transport_;
  const absl::Duration wait_spin_;
  CallerLiveness* const liveness_;  // null: the transport has no hang detector
  absl::Time awaited_published_at_ = absl::InfinitePast();  // guarded by mu_
  const std::shared_ptr<ScratchPool> scratch_pool_ = ScratchPool::Create();
  // std:: primitives rather than absl::Mutex: Debian's Abseil is not built
  // with ThreadSanitizer, which then cannot see absl::Mutex's ordering.
  // Methods named *Locked run with mu_ held; so does everything that touches
  // the transport or the three fields below.
  std::mutex mu_;
  // Wakes the progress thread when it may have work (has_work in ThreadLoop).
  std::condition_variable work_cv_;
  std::vector<std::shared_ptr<Record>> active_;
  bool stopping_ = false;
  // Threads that want mu_ (waiters driving progress, posters): the progress
  // thread steps aside while this is non-zero.
  std::atomic<int> lock_wanted_{0};
  std::atomic<bool> blocked_in_transport_{false};
  std::thread thread_;
};

}  // namespace comm

#endif  // COMM_PROGRESS_ENGINE_H_
