// File: comm/ucx/ucx_transport.h
//
// comm::Transport over UCX tagged messages (UCP_FEATURE_TAG), between the
// processes of one job. The factory does the rendezvous (comm/rendezvous/):
// every rank publishes its UCX worker address through the store that rank 0
// hosts on MASTER_PORT and connects an endpoint to every other rank.
//
// Tag bits: a UCX tag is 64 bits. The top 20 carry the *source* rank and the
// low 44 the caller's tag (kTransportTagBits). A receive from `peer` with `tag`
// matches with a full mask, so it takes exactly the messages `peer` sent with
// `tag`, in posting order. Hence world_size <= 2^20 and tag <= kMaxTransportTag.
//
// Blocking: the context has UCP_FEATURE_WAKEUP. BlockUntilActivity() arms the
// worker (ucp_worker_arm; on UCS_ERR_BUSY it progresses instead) and waits in
// epoll on the worker's event fd, an eventfd that Interrupt() writes, and the
// rendezvous connection (the failure detector).
//
// Failure detection: endpoints do NOT use UCP_ERR_HANDLING_MODE_PEER, which
// would move all traffic to TCP on one host (half the bandwidth; see
// /work/shared/notes/ucx-facts.md). Instead each rank's TCP connection to the
// rendezvous store stays open; when a process dies its connection drops and
// rank 0 tells every other rank. Then health() is kUnavailable naming the dead
// rank. When the store itself (rank 0) disappears without a goodbye, rank 0 is
// reported dead.
//
// Fail-stop: at the job's first failure (a rank dead or hung, this rank
// declared hung) or on Abort(), every pending operation completes with that
// status, new posts fail, and the UCX worker is never progressed again. A
// completion that is done must mean UCX no longer touches its buffer, and
// UCX 1.13 cannot withdraw a send to a live peer otherwise: ucp_request_cancel
// cancels only receives, and a forced ucp_ep_close_nbx needs peer error
// handling (docs/comm-transport.md). From then on what UCX logs (requests
// not returned, messages not matched at teardown) is counted, not printed
// (comm/ucx/ucx_log_filter.h, issue 37).
//
// Hangs: with a hang bound (UcxTransportOptions::hang_timeout), the
// rendezvous connection also carries heartbeats (comm/rendezvous/
// rendezvous.h), reporting caller_liveness(), which the progress engine keeps
// up to date. A rank the store declares hung (stopped, or stuck outside the
// communicator while others wait for it; comm/rendezvous/hang_verdict.h) is
// treated like a dead one: health() becomes kUnavailable "rank 3 is hung:
// ...", and the transport stops (above). kUnavailable rather than kDeadlineExceeded: the verdict is
// final (the rank is out of the job and its operations are abandoned), not a
// wait that ran out and may be retried, which is what kDeadlineExceeded means
// for Work::Wait. A rank hearing nothing from the store for the bound
// declares rank 0 hung the same way. A rank told that it was itself declared
// hung (it was stopped and resumed) fails every pending and later operation:
// the others have already given up on it.
// A rank that shuts down cleanly (destructor) says goodbye first: health()
// stays OK, new sends to it fail at once, and sends to it and receives from
// it that are still pending kLeftPeerGrace after it left complete with
// kUnavailable (the grace lets messages it sent before leaving arrive, and
// the acknowledgements of sends it took before leaving: its goodbye travels
// over TCP and can overtake them). A send still pending then (UCX cannot
// cancel it) stops the transport.
//
// Any failed UCX call on an operation with a peer (at post time or at
// completion, ucp_ep_create, ucp_worker_arm; any status) first waits briefly
// for the failure detector and is then classified by comm/ucx/ucx_failure.h:
// kUnavailable naming the job's first dead (or hung) rank when one is known,
// kInternal only when no rank is known to have failed.
//
// Self messages (peer == rank()) are matched and copied locally; a world of
// one rank uses no UCX at all and needs no MASTER_ADDR/MASTER_PORT.
//
// Threading: as comm/transport.h says; Interrupt() is the only thread-safe call.
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(comm::JobEnv env, comm::JobEnvFromEnvironment());
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Transport> transport,
//                         comm::CreateUcxTransport(env, absl::Seconds(60)));
#ifndef COMM_UCX_UCX_TRANSPORT_H_
#define COMM_UCX_UCX_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/rendezvous/job_env.h"
#include "comm/transport.h"

namespace comm {

// How long operations with a peer that left cleanly may still complete.
inline constexpr absl::Duration kLeftPeerGrace = absl::Seconds(2);

// The job's first failure as this rank saw it: a peer found dead or hung, or
// this rank itself declared hung.
struct PeerFailure {
  int culprit = -1;     // the rank found dead or hung
  std::string kind;     // "died" or "hung"
  std::string message;  // "rank 3 is hung: no heartbeat for 20s ..."
};

struct UcxTransportOptions {
  // How long the rendezvous waits for every rank (errors as in
  // comm/rendezvous/rendezvous.h).
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // The hang bound (see the banner); rank 0's is the job's. Infinite: no
  // heartbeats, hangs end only by the callers' own timeouts.
  absl::Duration hang_timeout = absl::InfiniteDuration();
  // Told once, at the job's first failure this rank learns of, on the thread
  // progressing the transport (it must not call into the transport). The
  // transport knows bytes, peers and tags; whoever runs the rank decides
  // where the news goes (Communicator::CreateFromEnvironment writes the
  // launcher's failure report, comm/launcher/failure_report.h). Unset: nobody.
  std::function<void(const PeerFailure&)> on_peer_failure;
};

// Creates the UCX context and worker, rendezvouses with the other ranks and
// connects to every peer.
absl::StatusOr<std::unique_ptr<Transport>> CreateUcxTransport(
    const JobEnv& env, const UcxTransportOptions& options);

// The same without hang detection.
absl::StatusOr<std::unique_ptr<Transport>> CreateUcxTransport(
    const JobEnv& env, absl::Duration rendezvous_timeout);

}  // namespace comm

#endif  // COMM_UCX_UCX_TRANSPORT_H_
