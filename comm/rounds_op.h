// File: comm/rounds_op.h
//
// A collective made of rounds: in each round a fixed set of sends and
// receives is posted together, and when all of them have finished an
// optional action runs (e.g. reduce the received data), then the next round
// starts. The latency algorithms (recursive doubling, direct all-gather,
// binomial broadcast, dissemination barrier) are lists of rounds built up
// front; this class is their resumable state machine.
//
// A round's sends may read memory its action later writes: the action runs
// only after every send of the round has finished, so that is safe.
#ifndef COMM_ROUNDS_OP_H_
#define COMM_ROUNDS_OP_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/collective_op.h"

namespace comm {

struct PlannedTransfer {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer_global = 0;
  int tag_step = 0;
  void* data = nullptr;  // sends only read it
  size_t num_bytes = 0;
  std::string what;  // "recv of round 2 (distance 4)"
};

struct Round {
  std::vector<PlannedTransfer> transfers;
  std::function<void()> after;  // may be empty
};

class RoundsOp : public CollectiveOp {
 public:
  absl::StatusOr<bool> Step(bool* progressed) override;
  AwaitedPeer Awaited() const override;
  bool HasPendingTransportOps() const override;

 protected:
  explicit RoundsOp(const GroupContext& context) : context_(context) {}
  // Derived constructors append rounds; they run in order.
  void AddRound(Round round) { rounds_.push_back(std::move(round)); }
  const GroupContext& context() const { return context_; }

 private:
  GroupContext context_;
  std::vector<Round> rounds_;
  size_t current_ = 0;
  bool posted_ = false;
  // Completions of every round so far (a failed op may leave some pending).
  CompletionList completions_;
  size_t round_first_completion_ = 0;
};

}  // namespace comm

#endif  // COMM_ROUNDS_OP_H_
