// File: comm/communicator_impl.h
//
// The Communicator implementation (comm/communicator.h): a group of global
// ranks over one shared progress engine. It validates arguments, picks the
// algorithm, numbers the collective (comm/tag.h) and hands the state machine
// to the engine. Split() makes children that share the engine.
//
// Algorithm choice (Algorithm::kAuto), by the size of the whole vector so
// that a reduce-scatter and an all-reduce of the same input always take the
// same algorithm (and so produce the same bits on each chunk):
//   all-gather:     output bytes <= small_message_bytes -> direct exchange
//                   (comm/direct_all_gather.h), else the ring.
//   reduce-scatter, input / buffer bytes <= small_message_bytes -> recursive
//   all-reduce:     doubling (comm/recursive_doubling_all_reduce.h), else
//                   the ring (comm/ring_reduce_scatter.h, ring_all_reduce.h).
//   broadcast:      pipelined binomial tree (comm/broadcast.h), always.
//   barrier:        dissemination (comm/barrier.h), always.
#ifndef COMM_COMMUNICATOR_IMPL_H_
#define COMM_COMMUNICATOR_IMPL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mutex>
#include "comm/collective_op.h"
#include "comm/communicator.h"
#include "comm/progress_engine.h"

namespace comm {

class CommunicatorImpl : public Communicator {
 public:
  CommunicatorImpl(std::shared_ptr<ProgressEngine> engine, std::vector<int> global_ranks,
                   int rank, uint32_t id, const CommunicatorOptions& options);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(global_ranks_.size()); }
  bool on_one_host() const override { return on_one_host_; }

  absl::StatusOr<WorkHandle> AllGather(const AllGatherOptions& options) override;
  absl::StatusOr<WorkHandle> ReduceScatter(const ReduceScatterOptions& options) override;
  absl::StatusOr<WorkHandle> AllReduce(const AllReduceOptions& options) override;
  absl::StatusOr<WorkHandle> Broadcast(const BroadcastOptions& options) override;
  absl::StatusOr<WorkHandle> Barrier() override;
  absl::StatusOr<WorkHandle> Shift(const ShiftOptions& options) override;
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key,
                                                      absl::Duration timeout) override;
  void KeepAlive() override { engine_->NoteCall(); }

  uint32_t id() const { return id_; }
  const std::vector<int>& global_ranks() const { return global_ranks_; }

 private:
  // Claims the next sequence number: the context for one collective and its
  // name for errors ("all_reduce #12 on communicator 0x1 (tag 0x...)").
  struct Posting {
    GroupContext context;
    std::string description;
  };
  Posting NextPosting(const char* op_name);
  // AllGather, with `keep_alive` owned by the collective until it is done.
  absl::StatusOr<WorkHandle> PostAllGather(const AllGatherOptions& options,
                                           std::shared_ptr<void> keep_alive);
  std::string Where() const;  // "rank 3 (group rank 1 of 4, communicator 0x1)"

  std::shared_ptr<ProgressEngine> engine_;
  const std::vector<int> global_ranks_;
  const int rank_;
  const uint32_t id_;
  const CommunicatorOptions options_;
  // Every member on one host (Transport::HostIndex): kAuto may then take the
  // direct reduce-scatter (comm/algorithm_choice.h).
  const bool on_one_host_;
  std::mutex mu_;  // std::, so ThreadSanitizer sees it (Debian's Abseil is not instrumented)
  uint32_t next_sequence_ = 0;  // guarded by mu_
  uint32_t next_split_ = 0;     // guarded by mu_
};

// OK if `transport` reports a sane rank/world size and `options` are usable.
absl::Status CheckTransportAndOptions(const Transport* transport,
                                      const CommunicatorOptions& options);

// The world communicator over `engine`'s transport (shared by
// CreateOverTransport and CreateFromEnvironment).
absl::StatusOr<std::unique_ptr<Communicator>> CreateWorldCommunicator(
    std::shared_ptr<ProgressEngine> engine, const CommunicatorOptions& options);

}  // namespace comm

#endif  // COMM_COMMUNICATOR_IMPL_H_
