// File: examples/bench_goals.h
//
// The speed-goal report of collective_bench: each collective row's busbw
// beside ucx_perftest's tag_bw at the same size, and the project's speed
// goals evaluated on the rows (at 64 MiB and 2 / 4 ranks, and 4 KiB
// all-reduce latency) as "met", "NOT met" or "n/a" with what was missing.
// With work floors (examples/work_floor.h) each bandwidth goal also says
// what the floor allows and how much of it the collective reached: a goal
// its floor misses cannot be met on this host.
// Prints to stdout only; it decides no exit code (the numbers are noisy on a
// shared machine).
//
//   PrintComparison(rows, perftest);
//   PrintGoals(rows, perftest, floors, "huge pages, out of place");
#ifndef EXAMPLES_BENCH_GOALS_H_
#define EXAMPLES_BENCH_GOALS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "examples/bench_results.h"

namespace collective_bench {

// The size the bandwidth goals are judged at (total buffer bytes).
inline constexpr size_t kGoalBytes = size_t{64} << 20;

// One line per collective row with a perftest row of the same nominal size
// (collective rows hold the size rounded down to a multiple of ranks x
// element). Prints nothing if `perftest` is empty.
void PrintComparison(const std::vector<Row>& rows, const std::vector<Row>& perftest);

// One line per goal, under a header naming `conditions` (e.g. "huge pages,
// out of place": the goals hold or fail for that memory and variant only).
// `floors`: MeasureFloorSweep's rows, or empty.
void PrintGoals(const std::vector<Row>& rows, const std::vector<Row>& perftest,
                const std::vector<Row>& floors, const std::string& conditions);

}  // namespace collective_bench

#endif  // EXAMPLES_BENCH_GOALS_H_
