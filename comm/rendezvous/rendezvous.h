// File: comm/rendezvous/rendezvous.h
//
// Rendezvous: every rank hands in some bytes (its UCX worker address) and gets
// every rank's bytes back, through the store that rank 0 hosts on MASTER_PORT
// (comm/rendezvous/store_server.h). Afterwards the object keeps its TCP
// connection to the store open: it is this rank's failure detector. Poll
// `failure_detector_fd()` for readability (and at least every
// `poll_interval()`) and call `PollPeerEvents()` to learn which peers died
// (connection dropped), left (said goodbye) or hung.
//
// Hang detection: a process that is stopped (SIGSTOP, a debugger) or stuck in
// a computation keeps its TCP connection open, so the connection alone cannot
// see it. When the job has a hang bound (rank 0's HangDetection::bound, sent
// in the roster), a HeartbeatThread (comm/rendezvous/heartbeat_thread.h) sends
// the store a heartbeat HeartbeatInterval(bound) apart, carrying what the
// caller is doing (comm/liveness.h); the store declares ranks hung by the
// rules of comm/rendezvous/hang_verdict.h and tells every rank. The store
// beats to every rank as often; a rank that hears nothing from it for longer
// than the bound reports rank 0 hung itself (rank 0's process, which hosts
// the store, is stopped or cut off). A rank whose own process was stopped
// for half a bound restarts that clock instead (it cannot tell the store's
// silence from its own): it judges the store only while its own heartbeat
// thread keeps time, and its heartbeat thread, on finding that it did not
// run for half a bound, restarts the store's clock. A rank that heard it was
// itself declared hung stops judging (the store no longer beats to it).
//
// Errors of Join, all naming this rank and, where known, the culprit:
//   kUnavailable       "MASTER_PORT N is in use on this host; choose another"
//                      (rank 0), or rank 0 closed the connection early
//   kDeadlineExceeded  rank 0 unreachable at addr:port after the timeout, or
//                      no roster before the deadline
//   kAborted           the job cannot start: a rank with another WORLD_SIZE,
//                      a duplicate rank, ranks that never arrived (named, with
//                      the time waited), a rank that crashed while joining
//   kPermissionDenied  this rank's job secret differs from rank 0's: it is a
//                      rank of another job and was refused
//   kUnauthenticated   "the rendezvous store at ADDR:PORT could not prove it
//                      knows this job's secret ...": a process that is not
//                      this job's store answered (it bound MASTER_PORT first)
//   kFailedPrecondition the job has no secret (a token derived from public
//                      ids) and its store would be reachable from other hosts
//
// Authentication (issue 39): the join is a mutual challenge-response keyed by
// the job's secret (comm/rendezvous/rendezvous_auth.h), and every message of
// the store, the roster and every peer-gone or hung report included, carries
// a MAC this rank checks; a forged report is refused and said on stderr.
// Under the PMIx bootstrap without FSDP_JOB_TOKEN, rank 0 makes the secret
// and publishes it through PMIx with its store's address.
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<Rendezvous> rendezvous,
//                         Rendezvous::Join(env, my_address, absl::Seconds(60)));
//   const std::string& address_of_rank_3 = rendezvous->blobs()[3];
#ifndef COMM_RENDEZVOUS_RENDEZVOUS_H_
#define COMM_RENDEZVOUS_RENDEZVOUS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/rendezvous/job_env.h"

namespace comm {

class FramedSocket;
class HeartbeatThread;
class SealedChannel;
class StoreServer;

class CallerLiveness;

// A change in a peer's liveness, from the failure detector.
struct PeerEvent {
  enum class Kind {
    kLeft,  // it shut down in order (it said goodbye)
    kDied,  // its process is gone: its connection to rank 0's store dropped
            // (for rank 0: this rank's own connection to the store dropped)
    kHung,  // declared hung by the store (or, for rank 0, by this rank)
  };
  int rank;
  Kind kind;
  // kHung: why, e.g. "rank 3 is hung: no heartbeat from it reached the
  // rendezvous store on rank 0 for 3.2s (hang bound 3s): ...". May name this
  // rank itself.
  std::string reason;
};

// Hang detection settings of one rank; see the banner.
struct HangDetection {
  // The job's bound is rank 0's (the store's); the others' are ignored.
  // Infinite: no heartbeats and no hang verdicts.
  absl::Duration bound = absl::InfiniteDuration();
  // What this rank's heartbeats report about its caller; must outlive the
  // Rendezvous. Null: beats report nothing (only silence can be judged).
  const CallerLiveness* liveness = nullptr;
};

class Rendezvous {
 public:
  // Joins the job: rank 0 first starts the store. With world size 1 it
  // returns at once without any socket. Waits at most `timeout`
  // (plus a short grace to hear rank 0's reason when the store gives up).
  static absl::StatusOr<std::unique_ptr<Rendezvous>> Join(
      const JobEnv& env, const std::string& blob, absl::Duration timeout,
      const HangDetection& hang_detection = {});

  // Says goodbye (see Leave) if not done yet.
  ~Rendezvous();

  // blobs()[r] is the blob rank r handed in.
  const std::vector<std::string>& blobs() const { return blobs_; }
  // hosts()[r] is the host name rank r runs on (gethostname()).
  const std::vector<std::string>& hosts() const { return hosts_; }
  // Where rank 0's store is: MASTER_ADDR:MASTER_PORT, or what PMIx said.
  std::string store_address() const {
    return env_.master_addr + ":" + std::to_string(env_.master_port);
  }

  // Readable when PollPeerEvents() has something to say; -1 once rank 0's
  // store is gone (after it said goodbye, or after it died and that was
  // reported).
  int failure_detector_fd() const;

  // Non-blocking: the liveness changes received since the last call (and,
  // for rank 0's store falling silent, found by this call).
  std::vector<PeerEvent> PollPeerEvents();

  // The job's hang bound (infinite if none) and how often PollPeerEvents()
  // must be called at least while someone waits (infinite if no bound).
  absl::Duration hang_timeout() const { return hang_timeout_; }
  absl::Duration poll_interval() const;

  // Orderly shutdown: stops the heartbeats, tells the others this rank leaves
  // on purpose. Rank 0 then waits up to `linger` for the others to leave too,
  // so that ranks still working keep their failure detector, and stops the
  // store.
  void Leave(absl::Duration linger = absl::Seconds(5));

 private:
  using SteadyClock = std::chrono::steady_clock;

  Rendezvous() = default;
  void StartHeartbeats();
  // On the heartbeat thread: one beat.
  void Beat();
  // Closes the connection (under write_mu_: the heartbeat thread writes).
  void CloseSocket();

  JobEnv env_;
  std::unique_ptr<StoreServer> server_;  // rank 0 only
  std::unique_ptr<FramedSocket> socket_;
  // The connection's sealed messages (set by Join; Seal under write_mu_,
  // Open on the owning thread).
  std::unique_ptr<SealedChannel> channel_;
  std::vector<std::string> blobs_;
  std::vector<std::string> hosts_;
  bool rank0_left_ = false;
  bool left_ = false;

  // Hang detection (see the banner).
  absl::Duration hang_timeout_ = absl::InfiniteDuration();
  const CallerLiveness* liveness_ = nullptr;
  // Serializes writes to socket_ and its closing, between the heartbeat
  // thread and the thread that owns this object.
  std::mutex write_mu_;
  // When the store was last heard from (steady nanoseconds); the heartbeat
  // thread moves it forward after this process was stopped.
  std::atomic<int64_t> store_heard_at_ns_{0};
  // When the heartbeat thread last beat (steady nanoseconds).
  std::atomic<int64_t> last_beat_at_ns_{0};
  bool store_declared_hung_ = false;
  bool self_declared_hung_ = false;
  // Last member: destroyed (stopped) first.
  std::unique_ptr<HeartbeatThread> heartbeat_;
};

}  // namespace comm

#endif  // COMM_RENDEZVOUS_RENDEZVOUS_H_
