// File: examples/work_floor.h
//
// The work floor of a collective on one host: the copies and sums its
// pattern cannot avoid, done by n processes pinned as collective_bench pins
// its ranks, with process_vm_readv (the single copy UCX runs on one host)
// and nothing else: no UCX, no tags, no protocol, no progress engine.
//
// What it is for: the speed goals are ratios (all-gather busbw against
// tag_bw, 4 ranks against 2). The same ratio between two floors (the
// all-gather floor against the point-to-point floor, say) says whether an
// implementation as fast as its floors could meet the goal on this host,
// and a collective's busbw against its floor says what the library itself
// costs. A floor is an estimate, not a proof: it is measured, so it is
// noisy, and a collective can beat it by a little (in one sitting the
// reduce-scatter did, by about 5%, with the same copies in smaller pieces).
//
//   FloorCase c{Collective::kAllGather, /*ranks=*/2, /*in_place=*/false};
//   absl::StatusOr<Floor> floor = MeasureWorkFloor(c, 64 << 20, /*huge_pages=*/true, 20);
//
// The patterns (S = total bytes, C = S / n the chunk; every rank r reads
// from the others' buffers, the least copying each needs):
//   all_gather      reads chunk j of rank j's input for every j != r (nearest
//                   first); out of place it also copies its own input into
//                   its slot.
//   reduce_scatter  per segment, reads its chunk r from every other rank into
//                   a receive slot (4 MiB per peer at 2 ranks, 4 MiB / (n-1)
//                   beyond) and sums the n contributions in one pass
//                   (comm::ReduceSumChain) into its chunk (in place) or a
//                   separate output (out of place, non-temporal stores from
//                   4 MiB, as comm/direct_reduce_scatter.h does).
//   all_reduce      reduce_scatter in place, then every peer's reduced chunk,
//                   segment by segment as soon as that peer has reduced it.
//   broadcast       every rank but 0 reads all S bytes from rank 0 (a flat
//                   tree: one copy per receiver, the fewest possible).
//   point to point  (PointToPointFloor) rank 1 reads S from rank 0: the copy
//                   of ucx_perftest tag_bw.
// Buffers are zeros (sums stay finite), faulted in before timing.
//
// Timing: two untimed iterations, a barrier, then `iters` iterations back
// to back with no barrier between them (as collective_bench posts its
// collectives); the result is the slowest rank's time divided by `iters`,
// busbw = S / time x BusFactor, as collective_bench reports its rows.
#ifndef EXAMPLES_WORK_FLOOR_H_
#define EXAMPLES_WORK_FLOOR_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "examples/bench_results.h"
#include "examples/collective_cell.h"

namespace collective_bench {

struct FloorCase {
  Collective collective = Collective::kAllGather;
  int ranks = 2;
  bool in_place = false;  // all-gather and reduce-scatter only
};

struct Floor {
  double time_us = 0;
  double busbw_gbps = 0;
};

// Forks `c.ranks` processes (2 to 64), pins them (comm/launcher's
// CoresForRank, as --bind_cores does), measures, and reaps them. Buffers are
// transfer memory (huge pages) or 4 KiB pages. kInvalidArgument for a bad
// case or size; kInternal when fork or process_vm_readv fails (the message
// names the rank and the call; process_vm_readv needs ptrace permission
// over the peer); kDeadlineExceeded naming the ranks still running after
// `timeout` (they are killed).
absl::StatusOr<Floor> MeasureWorkFloor(const FloorCase& c, size_t total_bytes, bool huge_pages,
                                       int iters, absl::Duration timeout = absl::Seconds(120));

// Rank 1 reading `total_bytes` from rank 0, two pinned processes.
absl::StatusOr<Floor> PointToPointFloor(size_t total_bytes, bool huge_pages, int iters,
                                        absl::Duration timeout = absl::Seconds(120));

// "all_gather 2 ranks, out of place" and the like.
std::string FloorCaseName(const FloorCase& c);

// The `collective` column of floor rows: "floor_" + the collective's name,
// and kPointToPointFloorName for the point-to-point copy.
inline constexpr char kFloorPrefix[] = "floor_";
inline constexpr char kPointToPointFloorName[] = "floor_point_to_point";

// The point-to-point floor, then every collective's floor at every rank
// count of `nprocs` that splits `total_bytes` into whole fp32 elements, as
// rows (collective "floor_<name>"), printing a `#` line per case to stdout.
// A case that fails is printed with its error and left out. Call it while
// no rank of ours is running (it would compete for the cores).
std::vector<Row> MeasureFloorSweep(const std::vector<Collective>& collectives,
                                   const std::vector<int>& nprocs, size_t total_bytes,
                                   bool huge_pages, bool in_place, int iters);

}  // namespace collective_bench

#endif  // EXAMPLES_WORK_FLOOR_H_
