// File: comm/rendezvous/rendezvous.h
//
// Rendezvous: every rank hands in some bytes (its UCX worker address) and gets
// every rank's bytes back, through the store that rank 0 hosts on MASTER_PORT
// (comm/rendezvous/store_server.h). Afterwards the object keeps its TCP
// connection to the store open: it is this rank's failure detector. Poll
// `failure_detector_fd()` for readability and call `PollPeerEvents()` to learn
// which peers died (connection dropped) or left (said goodbye).
//
// Errors of Join, all naming this rank and, where known, the culprit:
//   kUnavailable       "MASTER_PORT N is in use on this host; choose another"
//                      (rank 0), or rank 0 closed the connection early
//   kDeadlineExceeded  rank 0 unreachable at addr:port after the timeout, or
//                      no roster before the deadline
//   kAborted           the job cannot start: a rank with another WORLD_SIZE,
//                      a duplicate rank, ranks that never arrived (named, with
//                      the time waited), a rank that crashed while joining
//   kPermissionDenied  this rank's job token differs from rank 0's: it is a
//                      rank of another job and was refused
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<Rendezvous> rendezvous,
//                         Rendezvous::Join(env, my_address, absl::Seconds(60)));
//   const std::string& address_of_rank_3 = rendezvous->blobs()[3];
#ifndef COMM_RENDEZVOUS_RENDEZVOUS_H_
#define COMM_RENDEZVOUS_RENDEZVOUS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/rendezvous/job_env.h"

namespace comm {

class FramedSocket;
class StoreServer;

// A change in a peer's liveness, from the failure detector.
struct PeerEvent {
  int rank;
  // True if the peer shut down in order (it said goodbye); false if its
  // process is gone (its connection to rank 0's store dropped, or, for
  // rank 0, this rank's own connection to the store dropped).
  bool clean;
};

class Rendezvous {
 public:
  // Joins the job: rank 0 first starts the store. With world size 1 it
  // returns at once without any socket. Waits at most `timeout`
  // (plus a short grace to hear rank 0's reason when the store gives up).
  static absl::StatusOr<std::unique_ptr<Rendezvous>> Join(const JobEnv& env,
                                                          const std::string& blob,
                                                          absl::Duration timeout);

  // Says goodbye (see Leave) if not done yet.
  ~Rendezvous();

  // blobs()[r] is the blob rank r handed in.
  const std::vector<std::string>& blobs() const { return blobs_; }
  // hosts()[r] is the host name rank r runs on (gethostname()).
  const std::vector<std::string>& hosts() const { return hosts_; }

  // Readable when PollPeerEvents() has something to say; -1 once rank 0's
  // store is gone (after it said goodbye, or after it died and that was
  // reported).
  int failure_detector_fd() const;

  // Non-blocking: the liveness changes received since the last call.
  std::vector<PeerEvent> PollPeerEvents();

  // Orderly shutdown: tells the others this rank leaves on purpose. Rank 0
  // then waits up to `linger` for the others to leave too, so that ranks still
  // working keep their failure detector, and stops the store.
  void Leave(absl::Duration linger = absl::Seconds(5));

 private:
  Rendezvous() = default;

  JobEnv env_;
  std::unique_ptr<StoreServer> server_;  // rank 0 only
  std::unique_ptr<FramedSocket> socket_;
  std::vector<std::string> blobs_;
  std::vector<std::string> hosts_;
  bool rank0_left_ = false;
  bool left_ = false;
};

}  // namespace comm

#endif  // COMM_RENDEZVOUS_RENDEZVOUS_H_
