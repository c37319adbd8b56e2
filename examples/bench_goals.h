// File: examples/bench_goals.h
//
// The speed-goal report of collective_bench: each collective row's busbw
// beside ucx_perftest's tag_bw at the same size, and the project's speed
// goals evaluated on the rows (at 64 MiB and 2 / 4 ranks, and 4 KiB
// all-reduce latency) as "met", "NOT met" or "n/a" with what was missing.
// Prints to stdout only; it decides no exit code (the numbers are noisy on a
// shared machine).
//
//   PrintComparison(rows, perftest);
//   PrintGoals(rows, perftest, "huge pages, out of place");
#ifndef EXAMPLES_BENCH_GOALS_H_
#define EXAMPLES_BENCH_GOALS_H_

#include <string>
#include <vector>

#include "examples/bench_results.h"

namespace collective_bench {

// One line per collective row with a perftest row of the same nominal size
// (collective rows hold the size rounded down to a multiple of ranks x
// element). Prints nothing if `perftest` is empty.
void PrintComparison(const std::vector<Row>& rows, const std::vector<Row>& perftest);

// One line per goal, under a header naming `conditions` (e.g. "huge pages,
// out of place": the goals hold or fail for that memory and variant only).
void PrintGoals(const std::vector<Row>& rows, const std::vector<Row>& perftest,
                const std::string& conditions);

}  // namespace collective_bench

#endif  // EXAMPLES_BENCH_GOALS_H_
