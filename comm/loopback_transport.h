// File: comm/loopback_transport.h
//
// An in-process fake Transport for unit tests: N ranks as threads of one
// process. One LoopbackHub is shared; each rank gets its own Transport from
// it and calls it from its own thread(s), under the usual one-caller-at-a-time
// contract of comm/transport.h.
//
//   LoopbackHub hub(4);
//   std::vector<std::thread> ranks;
//   for (int r = 0; r < 4; ++r) ranks.emplace_back([&hub, r] {
//     std::unique_ptr<Transport> t = hub.CreateTransport(r);
//     ... Communicator::CreateOverTransport(t.get()) ...
//   });
//
// Faithful to the interface:
// - receives match exactly (peer, tag); messages of one (peer, tag) arrive in
//   posting order; a message longer than the posted receive completes it with
//   kInternal;
// - messages up to `eager_bytes` are copied when posted and their send
//   completes at once; longer ones are copied by the receiver when matched
//   (like a rendezvous), so their send completes only then: an algorithm that
//   touches a send buffer before its send completed gets caught;
// - completions of a rank are written only inside that rank's own calls;
// - BlockUntilActivity waits on a condition variable woken by arriving
//   messages, finished copies and Interrupt() (sticky: an Interrupt() before
//   the block makes it return at once).
// Perturbation: with max_delay > 0 each message is held back a random time
// (per-(peer, tag) order still kept) to shake out ordering assumptions.
// Failure injection: KillRank(r) makes r's peers see it as dead.
#ifndef COMM_LOOPBACK_TRANSPORT_H_
#define COMM_LOOPBACK_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "comm/transport.h"

namespace comm {

struct LoopbackOptions {
  size_t eager_bytes = 8 * 1024;
  absl::Duration max_delay = absl::ZeroDuration();  // random hold-back per message
  uint64_t seed = 1;
  // HostIndex() of each rank, to simulate several machines; empty: one host.
  std::vector<int> host_of_rank;
};

class LoopbackEndpoint;

class LoopbackHub {
 public:
  explicit LoopbackHub(int world_size, LoopbackOptions options = {});
  ~LoopbackHub();

  int world_size() const { return static_cast<int>(endpoints_.size()); }

  // The transport of `rank`. Call once per rank; the hub must outlive it.
  std::unique_ptr<Transport> CreateTransport(int rank);

  // From now on peers of `rank` see it as dead: their health() reports it,
  // their operations with it fail with kUnavailable, and new ones are refused.
  void KillRank(int rank);

 private:
  friend class LoopbackTransport;
  LoopbackOptions options_;
  std::vector<std::unique_ptr<LoopbackEndpoint>> endpoints_;
};

}  // namespace comm

#endif  // COMM_LOOPBACK_TRANSPORT_H_
