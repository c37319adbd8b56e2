// File: examples/work_floors.cc
//
// Prints the work floors of the collectives (examples/work_floor.h): what
// each pattern's copies and sums alone take on this host, in processes
// pinned as collective_bench pins its ranks. collective_bench --perftest
// measures the same at 64 MiB and judges its goals against them; this runs
// them alone, at any size:
//
//   bazel run -c opt //examples:work_floors -- --nproc 2,4 --bytes 64M [--in_place]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "examples/work_floor.h"
#include "fsdp/report/byte_size.h"

ABSL_FLAG(std::string, nproc, "2,4", "Comma-separated process counts (2 to 64).");
ABSL_FLAG(std::string, bytes, "64M",
          "Total buffer bytes: 64M, 64MiB (binary), 64MB (SI), 67108864.");
ABSL_FLAG(int, iters, 20, "Timed iterations per case (1 to 1024).");
ABSL_FLAG(bool, huge_pages, true, "Buffers in transparent huge pages; false: 4 KiB pages.");
ABSL_FLAG(bool, in_place, false, "In-place all-gather and reduce-scatter.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Work floors of the collectives on this host.\n"
      "  bazel run -c opt //examples:work_floors -- --nproc 2,4 --bytes 64M");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<int64_t> parsed = fsdp::report::ParseByteSize(absl::GetFlag(FLAGS_bytes));
  if (!parsed.ok() || *parsed <= 0) {
    const std::string why =
        parsed.ok() ? "expected a positive size" : std::string(parsed.status().message());
    std::fprintf(stderr, "work_floors: --bytes=%s: %s\n", absl::GetFlag(FLAGS_bytes).c_str(),
                 why.c_str());
    return 2;
  }
  const size_t bytes = static_cast<size_t>(*parsed);
  std::vector<int> nprocs;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_nproc), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 2 || n > 64) {
      std::fprintf(stderr, "work_floors: --nproc=%s: expected numbers from 2 to 64\n",
                   absl::GetFlag(FLAGS_nproc).c_str());
      return 2;
    }
    if (bytes % (static_cast<size_t>(n) * sizeof(float)) != 0) {
      std::fprintf(stderr,
                   "work_floors: --bytes=%zu does not split into %d ranks of whole fp32 "
                   "elements: pick a multiple of %zu\n",
                   bytes, n, static_cast<size_t>(n) * sizeof(float));
      return 2;
    }
    nprocs.push_back(n);
  }
  const int iters = absl::GetFlag(FLAGS_iters);
  if (iters < 1 || iters > 1024) {
    std::fprintf(stderr, "work_floors: --iters=%d: expected 1 to 1024\n", iters);
    return 2;
  }
  using collective_bench::Collective;
  std::vector<collective_bench::Row> rows = collective_bench::MeasureFloorSweep(
      {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce,
       Collective::kBroadcast},
      nprocs, bytes, absl::GetFlag(FLAGS_huge_pages), absl::GetFlag(FLAGS_in_place), iters);
  // One point-to-point row plus four per process count; fewer means a case failed.
  return rows.size() == 1 + 4 * nprocs.size() ? 0 : 1;
}
