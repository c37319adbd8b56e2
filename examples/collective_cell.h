// File: examples/collective_cell.h
//
// One measured cell of collective_bench: a (collective, size) pair run on
// every rank of a job. MeasureCell runs `warmup` untimed iterations, a
// barrier, `iters` timed ones (post, Wait, repeat), then one iteration on
// fresh deterministic inputs that each rank checks element by element
// against a reference computed here; the row carries the slowest rank's mean
// time and the total mismatches over ranks.
//
//   CellOptions options;  // dtype, algorithm, warmup, iters, timeout
//   FSDP_ASSIGN_OR_RETURN(Row row, MeasureCell(comm, options,
//                                              Collective::kAllReduce, 4096));
//
// Every rank of the job must make the same calls in the same order: each is
// a collective over `comm`.
#ifndef EXAMPLES_COLLECTIVE_CELL_H_
#define EXAMPLES_COLLECTIVE_CELL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
#include "comm/transfer_memory.h"
#include "examples/bench_results.h"

namespace collective_bench {

enum class Collective { kAllGather, kReduceScatter, kAllReduce, kBroadcast };

// "all_gather", "reduce_scatter", "all_reduce", "broadcast": the flag value
// and the `collective` column.
const char* CollectiveName(Collective c);

// busbw / algbw at `n` ranks, nccl-tests' PERFORMANCE.md: (n-1)/n for
// all-gather and reduce-scatter, 2(n-1)/n for all-reduce, 1 for broadcast.
double BusFactor(Collective c, int n);

// How to run a cell (collective_bench fills it from its flags).
struct CellOptions {
  comm::Dtype dtype = comm::Dtype::kFloat32;
  comm::Algorithm algorithm = comm::Algorithm::kAuto;  // not used by broadcast
  int warmup = 0;                                      // untimed iterations
  int iters = 1;                                       // timed iterations, >= 1
  absl::Duration timeout = absl::Seconds(600);         // of every Wait()
  // Buffers in transparent huge pages (comm/transfer_memory.h), as the
  // training allocates them; false: ordinary 4 KiB pages.
  bool huge_pages = true;
  // nccl-tests' in-place variant: all-gather's input is this rank's slot of
  // the output, reduce-scatter's output is this rank's chunk of the input.
  // (All-reduce and broadcast are always in place.)
  bool in_place = false;
};

// Buffers and posting for one (collective, size) cell. The total buffer is
// `nominal_bytes` rounded down to a multiple of the element size (times the
// rank count for all-gather / reduce-scatter).
class Cell {
 public:
  Cell(comm::Communicator& comm, const CellOptions& options, Collective collective,
       size_t nominal_bytes);

  // Elements per rank for all-gather / reduce-scatter, per buffer otherwise.
  size_t count() const { return count_; }
  // The "size" column: all-gather output, reduce-scatter input, the buffer.
  size_t total_bytes() const { return big_.size; }

  // Posts one iteration on the current buffers.
  absl::StatusOr<comm::WorkHandle> Post();

  // Fresh inputs for the checked iteration. (The timed ones run on zeros: an
  // in-place all-reduce of anything else grows without bound.)
  void FillInputs();

  // Elements of this rank's result that differ from the reference; call
  // after an iteration that followed FillInputs().
  int64_t CountWrong() const;

 private:
  comm::Communicator& comm_;
  const comm::Dtype dtype_;
  const comm::Algorithm algorithm_;
  const Collective collective_;
  // Zeroed bytes, in huge pages or not (CellOptions::huge_pages).
  struct Buffer {
    std::unique_ptr<std::byte, comm::FreeDeleter> memory;
    size_t size = 0;
    std::byte* data() const { return memory.get(); }
    absl::Span<std::byte> span() const { return absl::Span<std::byte>(data(), size); }
  };
  static Buffer Allocate(size_t bytes, bool huge_pages);
  // This rank's slot of big_ (in-place all-gather input and reduce-scatter
  // output).
  absl::Span<std::byte> OwnSlot() const;
  // Where all-gather reads its input and reduce-scatter writes its output.
  absl::Span<std::byte> PerRankSide() const { return in_place_ ? OwnSlot() : small_.span(); }

  const bool in_place_;
  size_t count_ = 0;
  Buffer big_;    // the total buffer ("size" column)
  Buffer small_;  // per-rank side of all-gather / reduce-scatter (out of place)
};

// Post() then Wait(timeout).
absl::Status PostAndWait(Cell& cell, absl::Duration timeout);

// Max of `time_us` and sum of `wrong` over ranks, via an all-gather (the
// API has no max reduction).
absl::StatusOr<std::pair<double, int64_t>> CombineOverRanks(comm::Communicator& comm,
                                                             double time_us, int64_t wrong,
                                                             absl::Duration timeout);

// The whole measurement described at the top of this file, as a Row with
// ranks = comm.size() and algbw = bytes / time, busbw = algbw * BusFactor.
absl::StatusOr<Row> MeasureCell(comm::Communicator& comm, const CellOptions& options,
                                Collective collective, size_t nominal_bytes);

}  // namespace collective_bench

#endif  // EXAMPLES_COLLECTIVE_CELL_H_
