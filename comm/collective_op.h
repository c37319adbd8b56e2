// File: comm/collective_op.h
//
// The interface every collective algorithm implements so the progress engine
// (comm/progress_engine.h) can drive it: a resumable state machine in the
// style of UCC's *_progress functions.
//
// Step() posts every transport operation it may post now, reaps finished
// ones, applies their effect (e.g. reduces a received segment) and returns
// whether the whole collective finished. It never blocks and never waits:
// whatever is not ready is left for the next Step(). The engine calls Step()
// with the transport lock held, so implementations call the Transport freely.
//
// Lifetime: a CollectiveOp owns the Completion objects of the operations it
// posted. After Step() fails it may still have some posted; the engine then
// aborts the transport (Transport::Abort finishes them all) before it frees
// the op and reports the failure.
#ifndef COMM_COLLECTIVE_OP_H_
#define COMM_COLLECTIVE_OP_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "comm/scratch_pool.h"
#include "comm/transport.h"

namespace comm {

// What a collective is blocked on, for timeout messages:
// "rank 4 (recv of segment 2 at ring step 1)".
struct AwaitedPeer {
  int global_rank = -1;  // -1: nothing remote (e.g. not started)
  std::string what;
};

class CollectiveOp {
 public:
  virtual ~CollectiveOp() = default;

  // Posts what it can, reaps completions. Sets *progressed if anything
  // happened. Returns true when finished, or the error that ended it.
  virtual absl::StatusOr<bool> Step(bool* progressed) = 0;

  // What it waits for right now (meaningful while Step() returns false).
  virtual AwaitedPeer Awaited() const = 0;

  // True while the transport may still write into completions owned here.
  virtual bool HasPendingTransportOps() const = 0;
};

// Where a collective runs: the group, this rank in it, and its tag.
struct GroupContext {
  Transport* transport = nullptr;
  std::vector<int> global_ranks;  // group rank -> global (transport) rank
  int rank = 0;                   // this rank, in the group numbering
  uint64_t tag_base = 0;          // CollectiveTagBase(...) of this collective
  size_t max_segment_bytes = size_t{1} << 20;
  std::shared_ptr<ScratchPool> scratch_pool;  // shared by the engine's collectives

  int size() const { return static_cast<int>(global_ranks.size()); }
  int global(int group_rank) const { return global_ranks[group_rank]; }
};

// Completions with stable addresses (a deque never moves its elements) and a
// record of what each was, for error messages.
class CompletionList {
 public:
  Completion* Add() { return &completions_.emplace_back(); }
  Completion& at(size_t index) { return completions_[index]; }
  const Completion& at(size_t index) const { return completions_[index]; }
  size_t size() const { return completions_.size(); }
  bool AnyPending() const {
    for (const Completion& c : completions_) {
      if (!c.done) return true;
    }
    return false;
  }

 private:
  std::deque<Completion> completions_;
};

// The status of a finished completion, with `what` ("recv of segment 2 at
// ring step 1 from rank 4") prefixed to an error.
inline absl::Status CompletionStatus(const Completion& completion, const std::string& what) {
  if (completion.status.ok()) return absl::OkStatus();
  return absl::Status(completion.status.code(),
                      absl::StrCat(what, " failed: ", completion.status.message()));
}

// A receive that delivered fewer bytes than both sides agreed on means the
// ranks disagree about sizes: report it instead of using garbage.
inline absl::Status CheckReceivedBytes(const Completion& completion, size_t expected,
                                       const std::string& what) {
  if (completion.received_bytes == expected) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      what, " delivered ", completion.received_bytes, " bytes, expected ", expected,
      ": ranks posted collectives with different sizes or in different orders"));
}

}  // namespace comm

#endif  // COMM_COLLECTIVE_OP_H_
