// File: comm/transport.h
//
// The transport: tagged, non-blocking byte messages between ranks. It knows
// bytes, peers and tags, and nothing of collectives (those live in
// comm/*_collective files and drive a Transport through this interface only).
//
// Implementations: comm/ucx/ucx_transport.h (UCX, between processes) and
// comm/loopback_transport.h (in-process, testonly, for unit tests).
//
// Threading contract: a Transport is not thread-safe. Exactly one thread at a
// time may call PostSend/PostRecv/Progress/BlockUntilActivity (the
// communicator's progress engine serializes them with a mutex). The single
// exception is Interrupt(), which any thread may call at any time.
//
// Example (one blocking exchange; real callers use the progress engine):
//
//   Completion sent, received;
//   FSDP_RETURN_IF_ERROR(t.PostSend(peer, tag, out.data(), out.size(), &sent));
//   FSDP_RETURN_IF_ERROR(t.PostRecv(peer, tag, in.data(), in.size(), &received));
//   while (!sent.done || !received.done) {
//     if (!t.Progress()) FSDP_RETURN_IF_ERROR(t.BlockUntilActivity(absl::Milliseconds(10)));
//   }
#ifndef COMM_TRANSPORT_H_
#define COMM_TRANSPORT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace comm {

class CallerLiveness;

// Filled in by the transport when a posted operation finishes, successfully or
// not. The poster owns it and must keep it alive (and not move it) until
// `done` is true, or until the transport is destroyed. Once `done` is true the
// transport no longer reads or writes the operation's buffer, whatever the
// outcome: that is what lets a caller free it.
struct Completion {
  bool done = false;
  // OK, or why the operation failed: kUnavailable when the peer died,
  // kInternal for a transport error, kCancelled when the transport shut down.
  absl::Status status;
  // For receives: how many bytes actually arrived (<= the posted size).
  size_t received_bytes = 0;
};

// Tags passed to a Transport use at most this many low bits; transports may
// use the bits above for their own purposes (UCX puts the source rank there).
inline constexpr int kTransportTagBits = 44;
inline constexpr uint64_t kMaxTransportTag = (uint64_t{1} << kTransportTagBits) - 1;

class Transport {
 public:
  virtual ~Transport() = default;

  // This process's rank and the number of ranks, in the global (job) numbering.
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Which machine global rank `rank` runs on, as a small index: ranks with
  // the same index share a host (and its memory). Fixed once the transport
  // exists, so callable from any thread. The default: one host for all.
  virtual int HostIndex(int rank) const { return 0; }

  // Posts a send of `num_bytes` bytes at `data` to global rank `peer` with
  // `tag`. `data` must stay valid and unchanged until `completion->done`.
  // Messages between one pair of ranks with one tag arrive in posting order.
  // Returns an error (and does not touch `completion`) if the operation could
  // not be posted, e.g. `peer` is out of range or known to be dead, or
  // `tag` > kMaxTransportTag.
  virtual absl::Status PostSend(int peer, uint64_t tag, const void* data,
                                size_t num_bytes, Completion* completion) = 0;

  // Posts a receive of at most `num_bytes` bytes from global rank `peer` with
  // exactly `tag` into `data`. A message longer than `num_bytes` completes the
  // receive with an error.
  virtual absl::Status PostRecv(int peer, uint64_t tag, void* data,
                                size_t num_bytes, Completion* completion) = 0;

  // Makes progress on posted operations without blocking. Returns true if
  // anything happened (some completion finished or data moved), so a caller
  // can spin while it is productive and block when it is not.
  virtual bool Progress() = 0;

  // Blocks until the transport may have something to do (a message arrived, an
  // operation finished, a peer died, or Interrupt() was called) or `timeout`
  // passes; returns OK in both cases. Spurious wake-ups are allowed. Callers
  // call Progress() first: this does not burn a core while waiting.
  virtual absl::Status BlockUntilActivity(absl::Duration timeout) = 0;

  // Wakes a thread blocked in BlockUntilActivity(). Thread-safe; cheap.
  virtual void Interrupt() = 0;

  // OK while every peer is believed alive; otherwise kUnavailable naming the
  // first peer known to have died or hung. Pending operations with a dead or
  // hung peer finish with that status.
  virtual absl::Status health() const = 0;

  // Stops this transport for good: every pending operation finishes at once
  // with `why`'s code and message, no data moves into or out of any posted
  // buffer from then on, and later posts fail; health() is then not OK.
  // This is how a failed collective gives its caller the buffers back when
  // a transfer to a live peer can never finish (that peer will not post
  // the receive; UCX without peer error handling cannot cancel a send).
  // Idempotent; later calls keep the first `why`. `why` must not be OK.
  virtual void Abort(const absl::Status& why) = 0;

  // What this transport's hang detector reports about its caller
  // (comm/liveness.h), for the progress engine to keep up to date; null when
  // it has none (the loopback fake). Thread-safe; lives as long as the
  // transport.
  virtual CallerLiveness* caller_liveness() { return nullptr; }
};

}  // namespace comm

#endif  // COMM_TRANSPORT_H_
