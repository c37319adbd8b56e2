// File: comm/communicator.h
//
// The public collective API: the only part of comm/ that fsdp/ uses.
//
// A Communicator is a group of ranks that run collectives together. Every
// collective is asynchronous: it is posted, returns a Work handle at once, and
// progresses in the background (the progress engine, comm/progress_engine.h)
// while the caller computes. Several collectives may be in flight; ranks must
// post them in the same order. Wait() takes a timeout, and its error names this
// rank, the peer it was waiting for, the operation and the time waited.
//
// Example:
//
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
//                         comm::Communicator::CreateFromEnvironment());
//   comm::AllReduceOptions options;
//   options.buffer = comm::AsBytes(absl::MakeSpan(grads));
//   options.dtype = comm::Dtype::kFloat32;
//   options.op = comm::ReduceOp::kAverage;
//   FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world->AllReduce(options));
//   ... compute ...
//   FSDP_RETURN_IF_ERROR(work->Wait(absl::Seconds(60)));
//
// Hangs: a rank that stops (SIGSTOP, a debugger) or is stuck in a
// computation while others wait for it makes every other rank fail within
// the hang bound (CommunicatorOptions::hang_timeout, default 20 s), not the
// collective's own timeout: pending collectives end with kUnavailable "rank 3
// is hung: ..." naming it (docs/comm-transport.md, "Hang detection"). The
// bound must exceed the longest computation between two communicator calls
// of a rank that others wait for; KeepAlive() stretches it.
//
// Buffers are bytes plus a Dtype, not templates. Counts are in elements of the
// dtype. Semantics for counts that do not divide by the group size are stated
// per collective below.
#ifndef COMM_COMMUNICATOR_H_
#define COMM_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/collective_enums.h"
#include "comm/dtype.h"

namespace comm {

class Transport;

// ReduceOp and Algorithm: comm/collective_enums.h.

// An in-flight collective.
class Work {
 public:
  virtual ~Work() = default;
  // True once the collective finished (successfully or not). Never blocks;
  // may drive progress.
  virtual bool Test() = 0;
  // Blocks until the collective finishes or `timeout` passes. On timeout:
  // kDeadlineExceeded naming this rank, the peer awaited, the op and the time.
  // Returns the collective's final status once finished (again on every call).
  // After a timeout the collective is still in flight and may be waited on
  // again; its buffers must stay alive until it finishes.
  virtual absl::Status Wait(absl::Duration timeout) = 0;
};
using WorkHandle = std::shared_ptr<Work>;

// All-gather: every rank contributes `input` (same size on every rank); every
// rank receives all contributions concatenated in rank order in `output`
// (group_size * input.size() bytes). `input` may alias its slot in `output`
// (in place: saves the local copy of the input, which otherwise runs while
// the transfers do). As with every collective, all buffers must stay alive
// and `input` unchanged until the collective finishes.
struct AllGatherOptions {
  absl::Span<const std::byte> input;
  absl::Span<std::byte> output;
  Algorithm algorithm = Algorithm::kAuto;
};

// Reduce-scatter: `input` holds count elements on every rank; rank r receives
// the reduction of chunk r in `output`. Chunks: the count is split into
// group_size chunks of ceil(count / group_size) elements, the last ones
// shorter (possibly empty). `output` must hold at least chunk r's elements;
// it may be exactly chunk r of `input`, and must not overlap it otherwise.
struct ReduceScatterOptions {
  absl::Span<const std::byte> input;
  absl::Span<std::byte> output;
  Dtype dtype = Dtype::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
};

// All-reduce in place: every rank ends with the reduction of all `buffer`s.
struct AllReduceOptions {
  absl::Span<std::byte> buffer;
  Dtype dtype = Dtype::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
};

// Shift: every rank sends `input` to group rank (rank + distance) mod size
// and receives the input of group rank (rank - distance) mod size in
// `output`; both the same size on every rank, not overlapping. distance mod
// size must not be 0 (the input would be its own output) unless the group
// has one rank, which only copies. A ring's neighbour exchange (comm/shift.h).
struct ShiftOptions {
  absl::Span<const std::byte> input;
  absl::Span<std::byte> output;
  int distance = 1;
};

// Broadcast in place from group rank `root`.
struct BroadcastOptions {
  absl::Span<std::byte> buffer;
  int root = 0;
};

// The hang bound when neither CommunicatorOptions::hang_timeout nor
// FSDP_HANG_TIMEOUT_S says otherwise.
inline constexpr absl::Duration kDefaultHangTimeout = absl::Seconds(20);

struct CommunicatorOptions {
  // Messages larger than this are split into segments that are pipelined.
  size_t max_segment_bytes = size_t{1} << 20;
  // kAuto uses the latency algorithm for messages up to this many bytes.
  size_t small_message_bytes = 64 * 1024;
  // Above that, kAuto uses the direct reduce-scatter
  // (comm/direct_reduce_scatter.h) in groups of at most this many ranks on
  // one host, and the ring in larger groups or across hosts. Measured at
  // 64 MiB on 2 cores with huge-page buffers: direct is 25-40% faster at 3
  // and 4 ranks, even at 8 (docs/collective-bench.md).
  int direct_max_ranks = 4;
  // How long a caller in Work::Wait keeps polling the transport after the
  // last progress before it blocks in the transport (comm/progress_engine.h).
  // Longer: lower latency when ranks have their own cores; shorter: less CPU
  // taken from ranks that share a core.
  absl::Duration wait_spin = absl::Milliseconds(1);
  // How long the rendezvous waits for every rank to arrive.
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // The hang bound (CreateFromEnvironment): how long a rank may be silent
  // (stopped) or outside the communicator while another rank's collective
  // waits for it before every rank is told it hung. Unset: FSDP_HANG_TIMEOUT_S
  // from the environment (seconds, 0 = off), else kDefaultHangTimeout.
  // absl::InfiniteDuration() turns hang detection off. Rank 0's value is the
  // job's. See docs/comm-transport.md.
  std::optional<absl::Duration> hang_timeout;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // Joins the job described by the environment (torchrun RANK/WORLD_SIZE/
  // LOCAL_RANK/MASTER_ADDR/MASTER_PORT, Open MPI OMPI_COMM_WORLD_*, or Slurm
  // SLURM_*; see comm/rendezvous/job_env.h): rendezvous, then a UCX
  // transport. With a world size of 1 it needs no network at all. Defined in
  // //comm/environment:communicator_from_environment (which links UCX); depend on it too.
  static absl::StatusOr<std::unique_ptr<Communicator>> CreateFromEnvironment(
      const CommunicatorOptions& options = {});

  // A communicator over an existing transport (e.g. the loopback fake in
  // tests). The transport must outlive the communicator and its children.
  static absl::StatusOr<std::unique_ptr<Communicator>> CreateOverTransport(
      Transport* transport, const CommunicatorOptions& options = {});

  // This rank within the group, and the group's size.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Whether every rank of the group runs on one host: the same host name at
  // rendezvous (gethostname()), or the transport's HostIndex. A group of one
  // is. kAuto takes the direct reduce-scatter only then.
  virtual bool on_one_host() const = 0;

  virtual absl::StatusOr<WorkHandle> AllGather(const AllGatherOptions& options) = 0;
  virtual absl::StatusOr<WorkHandle> ReduceScatter(const ReduceScatterOptions& options) = 0;
  virtual absl::StatusOr<WorkHandle> AllReduce(const AllReduceOptions& options) = 0;
  virtual absl::StatusOr<WorkHandle> Broadcast(const BroadcastOptions& options) = 0;
  virtual absl::StatusOr<WorkHandle> Barrier() = 0;
  virtual absl::StatusOr<WorkHandle> Shift(const ShiftOptions& options) = 0;

  // Collective over this communicator: ranks passing the same `color` form a
  // sub-communicator, ordered by (`key`, rank). Every rank must call it.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(
      int color, int key, absl::Duration timeout = absl::Seconds(60)) = 0;

  // Tells the hang detector that this rank's caller is alive, e.g. from
  // inside a computation that may outlast the hang bound while others wait
  // for this rank. Cheap (an atomic store), callable from any thread; shared
  // by a communicator and its Split children. Does nothing without hang
  // detection.
  virtual void KeepAlive() {}
};

// Views a span of trivially copyable values as bytes.
template <typename T>
absl::Span<std::byte> AsBytes(absl::Span<T> values) {
  return absl::Span<std::byte>(reinterpret_cast<std::byte*>(values.data()),
                               values.size() * sizeof(T));
}
template <typename T>
absl::Span<const std::byte> AsConstBytes(absl::Span<const T> values) {
  return absl::Span<const std::byte>(
      reinterpret_cast<const std::byte*>(values.data()), values.size() * sizeof(T));
}

}  // namespace comm

#endif  // COMM_COMMUNICATOR_H_
