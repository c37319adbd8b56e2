// File: examples/bench_goals.cc
#include "examples/bench_goals.h"

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "examples/work_floor.h"

namespace collective_bench {
namespace {

const Row* FindRow(const std::vector<Row>& rows, const std::string& collective, int ranks,
                   size_t bytes) {
  for (const Row& row : rows) {
    if (row.collective == collective && row.ranks == ranks && row.bytes == bytes) return &row;
  }
  return nullptr;
}

// Collective rows have their actual total bytes (rounded down to a multiple
// of ranks * element size); perftest rows have the nominal size. A row
// belongs to the smallest nominal size at or above it (sizes double).
const Row* PerftestRowFor(const std::vector<Row>& perftest, size_t bytes) {
  const Row* best = nullptr;
  for (const Row& row : perftest) {
    if (row.bytes >= bytes && row.bytes < 2 * bytes &&
        (best == nullptr || row.bytes < best->bytes)) {
      best = &row;
    }
  }
  return best;
}

// The nominal size a row was measured at (a power-of-two multiple of min).
const Row* RowNear(const std::vector<Row>& rows, const std::string& collective, int ranks,
                   size_t nominal) {
  for (const Row& row : rows) {
    if (row.collective == collective && row.ranks == ranks && row.bytes <= nominal &&
        row.bytes * 2 > nominal) {
      return &row;
    }
  }
  return nullptr;
}

void PrintGoal(const std::string& goal, std::optional<bool> met, const std::string& detail) {
  std::printf("  %-62s %-8s %s\n", goal.c_str(),
              !met.has_value() ? "n/a" : *met ? "met" : "NOT met", detail.c_str());
}

// The work floor of `collective` at `ranks`, or nullptr.
const Row* FloorRow(const std::vector<Row>& floors, const std::string& collective, int ranks) {
  return FindRow(floors, absl::StrCat(kFloorPrefix, collective), ranks, kGoalBytes);
}

// The line under a bandwidth goal, when the floors were measured: what the
// goal's ratio is between the floors (`floor` against `reference_floor`,
// the goal needs `needed` of it), so whether an implementation as fast as
// its floors could meet it here, and how much of `floor` the collective
// reached (`measured_busbw`).
void PrintFloorLine(const Row& floor, const Row& reference_floor, const char* reference_name,
                    double needed, double measured_busbw) {
  const double allows = floor.busbw_gbps / reference_floor.busbw_gbps;
  std::printf("      floors: %.2f / %.2f GB/s (%s) = %.0f%%, goal %.0f%%: %s; reached %.0f%% "
              "of the floor\n",
              floor.busbw_gbps, reference_floor.busbw_gbps, reference_name, 100 * allows,
              100 * needed, allows >= needed ? "within reach" : "out of reach on this host",
              100 * measured_busbw / floor.busbw_gbps);
}

}  // namespace

void PrintComparison(const std::vector<Row>& rows, const std::vector<Row>& perftest) {
  if (perftest.empty()) return;
  std::printf("#\n# busbw beside ucx_perftest tag_bw at the same size\n");
  std::printf("# %-15s %5s %12s %11s %11s %7s\n", "collective", "ranks", "size",
              "busbw(GB/s)", "tag_bw", "ratio");
  for (const Row& row : rows) {
    const Row* p = PerftestRowFor(perftest, row.bytes);
    if (p == nullptr) continue;
    std::printf("  %-15s %5d %12zu %11.3f %11.3f %6.0f%%\n", row.collective.c_str(),
                row.ranks, row.bytes, row.busbw_gbps, p->busbw_gbps,
                100.0 * row.busbw_gbps / p->busbw_gbps);
  }
}

void PrintGoals(const std::vector<Row>& rows, const std::vector<Row>& perftest,
                const std::vector<Row>& floors, const std::string& conditions) {
  std::printf("#\n# speed goals (%s; noisy when the machine is busy)\n", conditions.c_str());
  if (!floors.empty()) {
    std::printf("# (floors: each pattern's copies and sums alone, in pinned processes, this "
                "run's memory and variant, examples/work_floor.h; a goal missed even between "
                "the floors is out of reach on this host)\n");
  }
  const Row* tag = nullptr;
  for (const Row& p : perftest) {
    if (p.bytes == kGoalBytes) tag = &p;
  }
  struct BandwidthGoal {
    const char* collective;
    double fraction;
  };
  for (BandwidthGoal g : {BandwidthGoal{"all_gather", 0.8},
                          BandwidthGoal{"reduce_scatter", 0.4},
                          BandwidthGoal{"all_reduce", 0.4}}) {
    const Row* row = RowNear(rows, g.collective, 2, kGoalBytes);
    std::string goal = absl::StrFormat("%s busbw >= %.0f%% of tag_bw at 64 MiB, 2 ranks",
                                       g.collective, 100 * g.fraction);
    if (row == nullptr || tag == nullptr) {
      PrintGoal(goal, std::nullopt, "(needs --nproc including 2, --perftest, 64M in range)");
      continue;
    }
    double ratio = row->busbw_gbps / tag->busbw_gbps;
    PrintGoal(goal, ratio >= g.fraction,
              absl::StrFormat("%.2f / %.2f GB/s = %.0f%%", row->busbw_gbps, tag->busbw_gbps,
                              100 * ratio));
    const Row* floor = FloorRow(floors, g.collective, 2);
    const Row* point = FindRow(floors, kPointToPointFloorName, 2, kGoalBytes);
    if (floor != nullptr && point != nullptr) {
      PrintFloorLine(*floor, *point, "point to point", g.fraction, row->busbw_gbps);
    }
  }
  {
    const Row* row = FindRow(rows, "all_reduce", 2, 4096);
    std::string goal = "all_reduce of 4 KiB at 2 ranks < 20 us";
    if (row == nullptr) {
      PrintGoal(goal, std::nullopt, "(needs --nproc including 2 and 4K in range)");
    } else {
      PrintGoal(goal, row->time_us < 20, absl::StrFormat("%.1f us", row->time_us));
    }
  }
  for (const char* collective : {"all_gather", "reduce_scatter", "all_reduce", "broadcast"}) {
    const Row* two = RowNear(rows, collective, 2, kGoalBytes);
    const Row* four = RowNear(rows, collective, 4, kGoalBytes);
    std::string goal =
        absl::StrCat(collective, " busbw at 4 ranks >= half of 2 ranks, 64 MiB");
    if (two == nullptr || four == nullptr) {
      PrintGoal(goal, std::nullopt, "(needs --nproc 2,4 and 64M in range)");
      continue;
    }
    PrintGoal(goal, four->busbw_gbps >= 0.5 * two->busbw_gbps,
              absl::StrFormat("%.2f vs %.2f GB/s", four->busbw_gbps, two->busbw_gbps));
    const Row* floor_four = FloorRow(floors, collective, 4);
    const Row* floor_two = FloorRow(floors, collective, 2);
    if (floor_four != nullptr && floor_two != nullptr) {
      PrintFloorLine(*floor_four, *floor_two, "4 / 2 ranks", 0.5, four->busbw_gbps);
    }
  }
}

}  // namespace collective_bench
