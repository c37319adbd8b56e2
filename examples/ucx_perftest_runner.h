// File: examples/ucx_perftest_runner.h
//
// Runs `ucx_perftest -t tag_bw` (package ucx-utils) between a server and a
// client process on 127.0.0.1: the point-to-point bandwidth collective_bench
// compares its busbw with. Forks and execs, so call it while no rank of ours
// is running (it would compete for the cores).
//
//   std::vector<Row> perftest = MeasurePerftestSweep({4096, 8192}, /*huge_pages=*/true);
#ifndef EXAMPLES_UCX_PERFTEST_RUNNER_H_
#define EXAMPLES_UCX_PERFTEST_RUNNER_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/bench_results.h"

namespace collective_bench {

// The `collective` column of ucx_perftest rows in the results.
inline constexpr char kPerftestName[] = "ucx_perftest_tag_bw";

// One tag_bw run of `bytes` per message, in GB/s (10^9 B/s). kInternal if
// ucx_perftest fails or is not installed, kDataLoss if its output has no
// bandwidth figure.
// `huge_pages`: ucx_perftest allocates its buffers in transparent huge pages
// (UCX_ALLOC_PRIO=thp) instead of its default. It never writes its send
// buffer: its default buffers are shared memory, whose pages a read fills
// with real (zeroed) pages, but the huge-page ones are anonymous memory, read
// from the kernel's huge zero page, which stays in cache. So with
// `huge_pages` tag_bw is optimistic: ~22 against 15-17 GB/s at 64 MiB with
// the zero page switched off (docs/collective-bench.md).
absl::StatusOr<double> MeasureTagBandwidth(size_t bytes, bool huge_pages);

// The best of a few runs at every size, as rows (ranks 2, time_us = bytes /
// bandwidth), printing a `#` line per size to stdout. A size that fails is
// printed with its error and left out, so the result may be shorter.
std::vector<Row> MeasurePerftestSweep(const std::vector<size_t>& sizes, bool huge_pages);

}  // namespace collective_bench

#endif  // EXAMPLES_UCX_PERFTEST_RUNNER_H_
