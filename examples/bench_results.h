// File: examples/bench_results.h
//
// One result row of //examples:collective_bench and its CSV file, the format
// the driver and its ranks exchange results in and the one --csv writes:
//
//   collective,ranks,bytes,time_us,algbw_gbps,busbw_gbps
//   all_reduce,2,4096,12.345,0.3318,0.3318
//
// `count` and `wrong` are printed in the tables but not stored in the CSV, so
// ReadCsv leaves them zero.
#ifndef EXAMPLES_BENCH_RESULTS_H_
#define EXAMPLES_BENCH_RESULTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace collective_bench {

// One measured (collective, ranks, size) cell, or one ucx_perftest size.
struct Row {
  std::string collective;
  int ranks = 0;
  size_t bytes = 0;
  size_t count = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong = 0;
};

// The first line of every results file.
inline constexpr char kCsvHeader[] = "collective,ranks,bytes,time_us,algbw_gbps,busbw_gbps";

// `row` as one CSV line, without the newline.
std::string CsvLine(const Row& row);

// Header plus one line per row, written atomically (base/atomic_file.h):
// a reader sees the old file or the whole new one.
absl::Status WriteCsv(const std::string& path, const std::vector<Row>& rows);

// The rows of a file WriteCsv wrote. kNotFound if it cannot be opened,
// kDataLoss naming the path and line if the header or a line is malformed.
absl::StatusOr<std::vector<Row>> ReadCsv(const std::string& path);

}  // namespace collective_bench

#endif  // EXAMPLES_BENCH_RESULTS_H_
