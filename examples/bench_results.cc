// File: examples/bench_results.cc
#include "examples/bench_results.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/atomic_file.h"

namespace collective_bench {

std::string CsvLine(const Row& row) {
  return absl::StrFormat("%s,%d,%d,%.3f,%.4f,%.4f", row.collective, row.ranks, row.bytes,
                         row.time_us, row.algbw_gbps, row.busbw_gbps);
}

absl::Status WriteCsv(const std::string& path, const std::vector<Row>& rows) {
  std::string text = absl::StrCat(kCsvHeader, "\n");
  for (const Row& row : rows) absl::StrAppend(&text, CsvLine(row), "\n");
  return base::WriteFileAtomically(path, text);
}

absl::StatusOr<std::vector<Row>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no results in ", path));
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);
  if (line != kCsvHeader) {
    return absl::DataLossError(absl::StrCat(path, ": unexpected header '", line, "'"));
  }
  while (std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    Row row;
    if (fields.size() != 6 || !absl::SimpleAtoi(fields[1], &row.ranks) ||
        !absl::SimpleAtoi(fields[2], &row.bytes) ||
        !absl::SimpleAtod(fields[3], &row.time_us) ||
        !absl::SimpleAtod(fields[4], &row.algbw_gbps) ||
        !absl::SimpleAtod(fields[5], &row.busbw_gbps)) {
      return absl::DataLossError(absl::StrCat(path, ": malformed line '", line, "'"));
    }
    row.collective = fields[0];
    rows.push_back(row);
  }
  return rows;
}

}  // namespace collective_bench
