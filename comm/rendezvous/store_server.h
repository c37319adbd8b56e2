// File: comm/rendezvous/store_server.h
//
// The rendezvous store that rank 0 hosts on MASTER_PORT, in a background
// thread. It collects one JoinRequest per rank, answers every rank with the
// roster of all ranks' blobs, and then keeps the connections open as the
// job's failure detector: a connection that drops without a goodbye is
// reported to every other rank as a dead peer. The protocol and its messages
// are in proto/rendezvous.proto.
//
// State machine of the job, as seen by the store:
//
//   kJoining --all WORLD_SIZE ranks joined--> kRunning
//   kJoining --bad world size / duplicate rank / join deadline /
//             a joined rank disconnected--> kAborted (every rank is told why)
//
// A connection with another job's token is refused (Refused) in any state and
// does not change the state: the ranks of this job go on.
//
// Strangers (issue 13). The store is the job's one network-facing server, so
// a connection that is not a rank of this job is refused, counted and logged
// (stderr, "rendezvous store on rank 0: refused ..."), in any state, without
// changing it: a connection that sends no JoinRequest within
// first_message_timeout (silent), a frame announcing more than
// max_client_frame_bytes (oversized, refused at its 4-byte header, before any
// buffering), bytes that are not a ClientMessage (malformed), any other
// message before its join (out of order), and a join whose MAC does not fit
// this job's secret (wrong token; the reply says why). Authentication (issue
// 39; proto/rendezvous.proto, comm/rendezvous/rendezvous_auth.h): each
// connection first gets a challenge; a join counts only with a MAC of the
// secret over it, and once joined, every message either way is sealed with
// the connection's session key. A message on a joined rank's connection
// whose MAC does not verify (forged) is counted, logged and ignored: the
// rank is neither dropped nor refreshed by it. Refusals cost the serving loop one
// read each; none of them delays the ranks' join or heartbeats past the
// deadlines above.
//
// Bounded (issue 39). The listener closes once the roster is out: every
// later join was refused anyway, so from then on nobody new can reach the
// store (a connect is refused by the kernel) and the port is free again.
// While it listens, connections that have not joined are capped in total
// (max_pending_connections) and per peer address (max_pending_per_address):
// one over a cap is accepted and closed at once, counted as "over capacity".
// When the process is out of descriptors (EMFILE, ENFILE) or kernel memory,
// accepting pauses for accept_backoff instead of spinning on the listener.
// Each connection is read at most read_budget_bytes per turn of the loop, so
// a client streaming valid frames cannot starve the others.
//
// Hang detection (kRunning, when options.hang_timeout is finite): the store
// sends every rank a heartbeat each HeartbeatInterval(bound), keeps each
// rank's latest heartbeat and the time of its last message, and applies
// FindHungRanks (comm/rendezvous/hang_verdict.h) on every beat. A rank
// declared hung is told to every rank, itself included (peer_gone with
// hung=true and the reason); it is not judged again and no longer counts for
// WaitForOthersToLeave. If the store's own thread was not running for half a
// bound (its process was stopped or starved), it cannot judge that gap: every
// rank's silence restarts from then.
#ifndef COMM_RENDEZVOUS_STORE_SERVER_H_
#define COMM_RENDEZVOUS_STORE_SERVER_H_

#include <condition_variable>
#include <memory>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace comm {

struct StoreServerOptions {
  int port = 0;  // MASTER_PORT; 0: one the kernel picks (see port())
  // Where to listen: dotted IPv4, "0.0.0.0" for every interface
  // (comm/rendezvous/store_address.h chooses it).
  std::string bind_ip = "127.0.0.1";
  int world_size = 1;
  // The job's secret (comm/rendezvous/job_secret.h): the key of the joins'
  // MACs; it never travels.
  std::string job_token;
  // How long to wait for all ranks to join before aborting the job.
  absl::Duration join_timeout = absl::Seconds(60);
  // The job's hang bound (see above); infinite: no heartbeats, no verdicts.
  // Sent to every rank in the roster.
  absl::Duration hang_timeout = absl::InfiniteDuration();
  // A connection that has not sent its JoinRequest by then is dropped.
  absl::Duration first_message_timeout = absl::Seconds(5);
  // The largest frame a client may send: a JoinRequest carries one UCX worker
  // address (hundreds of bytes); heartbeats are tens of bytes.
  size_t max_client_frame_bytes = size_t{1} << 20;
  // Connections that have not joined yet, in all and from one peer address
  // (the ranks of one host share theirs); 0: 2 x world_size + 64 and
  // world_size + 32.
  int max_pending_connections = 0;
  int max_pending_per_address = 0;
  absl::Duration accept_backoff = absl::Milliseconds(100);
  size_t read_budget_bytes = size_t{256} << 10;
};

// Connections the store refused, by reason (see the banner).
struct StoreRefusals {
  int64_t silent = 0;
  int64_t oversized = 0;
  int64_t malformed = 0;
  int64_t out_of_order = 0;
  int64_t wrong_token = 0;
  int64_t over_capacity = 0;
  // Messages on a joined rank's connection whose MAC does not verify; they
  // are ignored and the connection stays.
  int64_t forged = 0;
  int64_t total() const {
    return silent + oversized + malformed + out_of_order + wrong_token + over_capacity + forged;
  }
};

// "5 refused: 1 silent, 2 oversized, 1 malformed, 0 out of order, 1 wrong token,
// 0 over capacity, 0 forged".
std::string DescribeRefusals(const StoreRefusals& refusals);

class StoreServer {
 public:
  // Binds bind_ip:MASTER_PORT now (so "port in use" is reported at once, as
  // kUnavailable "MASTER_PORT N is in use on this host; choose another") and
  // starts the serving thread.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(
      const StoreServerOptions& options);

  // Stops the thread and closes every connection; the ranks still connected
  // then see rank 0 disappear.
  ~StoreServer();

  // Blocks until every rank other than 0 has said goodbye, disconnected or
  // been declared hung, or `timeout` passes. Rank 0 calls this before shutting down, so that ranks
  // still finishing their work keep their failure detector.
  void WaitForOthersToLeave(absl::Duration timeout);

  // The refusals so far (thread-safe).
  StoreRefusals refusals();

  // The port it listens on (the kernel's choice when options.port was 0).
  int port() const;

 private:
  struct Connection;
  class Loop;

  StoreServer() = default;

  // std:: rather than absl::Mutex: Debian's Abseil is not built with
  // ThreadSanitizer, which then cannot see absl::Mutex's ordering.
  std::mutex mutex_;
  std::condition_variable others_left_;
  int other_ranks_connected_ = 0;  // guarded by mutex_
  StoreRefusals refusals_;         // guarded by mutex_
  int wake_pipe_[2] = {-1, -1};
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace comm

#endif  // COMM_RENDEZVOUS_STORE_SERVER_H_
