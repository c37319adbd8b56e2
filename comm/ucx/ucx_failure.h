// File: comm/ucx/ucx_failure.h
//
// What a failed UCX call on an operation with a peer is reported as: a pure
// function of what UCX said and what the failure detector knows, so that the
// rule is tested without a network (tests/comm/ucx/ucx_failure_test.cc).
//
// Why it needs a rule of its own: our endpoints do not use
// UCP_ERR_HANDLING_MODE_PEER (see ucx_transport.h), and without it UCX does
// not tell a dead peer apart from any other failure. When a peer dies in the
// middle of a job, whichever call first touches what it left behind fails,
// with whatever status that resource gives, for example (all seen in
// //tests/integration/comm:kill_rank_test):
//   - the sender attaches the dead peer's SysV segment: UCX logs
//     "mm_sysv.c: shmat(shmid=...) failed: Invalid argument" and the send
//     completes with UCS_ERR_SHMEM_SEGMENT ("Shared memory error");
//   - UCX marked the endpoint failed: the next ucp_tag_send_nbx fails at once,
//     at post time, with UCS_ERR_ENDPOINT_TIMEOUT;
//   - single-copy CMA reads the dead pid's memory: UCS_ERR_IO_ERROR at
//     completion (comm/ucx/peer_copy_guard.h);
// and ucp_ep_create to a peer that already tore down its shared memory fails
// too. So the status code is no evidence either way; the failure detector
// (the rendezvous connections) is. The transport therefore waits briefly for
// the detector (UcxTransport::AwaitRootCause) after ANY UCX failure, then
// classifies here, first rule that applies:
//
//   1. some rank is known dead or hung (`known.health` is not OK):
//      kUnavailable "<operation> failed: <the job's first failure> (UCX: ...)".
//      The first failure names the rank that failed first, which is often not
//      `peer` (a peer that exits because another rank died).
//   2. the peer shut down in order (it said goodbye): kUnavailable
//      "<operation> failed: rank P shut down (said goodbye) ... (UCX: ...)".
//   3. UCX's own status says the peer is unreachable (SaysPeerUnreachable):
//      kUnavailable "<operation> failed: rank P died or exited during the
//      transfer (UCX: ...)", though the detector has not confirmed it yet.
//   4. otherwise kInternal "<operation> failed in UCX: <status>; no rank is
//      known to have died, left or hung (waited <time> for the failure
//      detector)": a real transport failure, not a peer's death.
//
// The UCX status and `detail` (e.g. the peer-copy guard's process_vm_readv
// message) are kept in every message.
#ifndef COMM_UCX_UCX_FAILURE_H_
#define COMM_UCX_UCX_FAILURE_H_

#include <ucs/type/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace comm {

// What the failure detector knew once the transport stopped waiting for it.
struct KnownFailures {
  // OK, or the job's first failure (kUnavailable "rank 2 died: ...").
  absl::Status health;
  // The operation's peer said goodbye (it shut down in order).
  bool peer_left = false;
  // How long the transport waited for the detector before classifying.
  absl::Duration waited;
};

// True for statuses that by themselves mean the peer's process cannot be
// reached: I/O error, connection reset, unreachable, and UCX's link and
// endpoint failure ranges (UCS_ERR_ENDPOINT_TIMEOUT among them).
bool SaysPeerUnreachable(ucs_status_t status);

// The status a failed UCX call is reported as; see the rules above.
// `operation` names the operation, this rank and the peer, e.g. "send of
// 1048576 bytes to rank 2 tag 7 on rank 0" or "posting a receive of 4 bytes
// from rank 1 tag 3 on rank 0". `peer` is the global rank the operation is
// with, or -1 for worker-wide calls (ucp_worker_arm). `status` is what UCX
// returned (not UCS_OK); `detail` is added to UCX's text when not empty.
absl::Status ClassifyUcxFailure(const std::string& operation, int peer, ucs_status_t status,
                                const std::string& detail, const KnownFailures& known);

}  // namespace comm

#endif  // COMM_UCX_UCX_FAILURE_H_
