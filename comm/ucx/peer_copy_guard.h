// File: comm/ucx/peer_copy_guard.h
//
// Keeps a dead peer from killing the survivors.
//
// On one host UCX moves large messages by single-copy CMA: the receiver reads
// the sender's memory with process_vm_readv (or the sender writes with
// process_vm_writev). When the other process has died, or has exited after a
// failure of its own, that call fails with ESRCH / EFAULT. Endpoints without
// UCP_ERR_HANDLING_MODE_PEER treat every transport error as unhandled, and
// UCX 1.13 logs it at FATAL level, which aborts the process. We cannot ask for
// PEER mode: on one host it moves all traffic to TCP (measured: ~2.3x less
// bandwidth than shared memory with CMA; excluding CMA costs the same).
//
// So the transport installs a UCX log handler (ucs_log_push_handler; handlers
// run newest first) that recognises exactly this message, remembers it, and
// stops it from reaching UCX's default handler, the one that aborts. UCX then
// carries on: the copy returns UCS_ERR_IO_ERROR, the endpoint is marked
// failed, and the request completes with an error status, which the transport
// reports as kUnavailable naming the peer. Every other FATAL message still
// aborts as before.
#ifndef COMM_UCX_PEER_COPY_GUARD_H_
#define COMM_UCX_PEER_COPY_GUARD_H_

#include <cstdint>
#include <string>

namespace comm {

// Installs the handler once per process; later calls do nothing. Thread-safe.
void InstallPeerCopyGuard();

// How many peer-memory copies have failed in this process so far, and the
// last UCX message about one (empty if none).
uint64_t PeerCopyFailureCount();
std::string LastPeerCopyFailure();

}  // namespace comm

#endif  // COMM_UCX_PEER_COPY_GUARD_H_
