// File: fsdp/report/rank_measurement.cc
#include "fsdp/report/rank_measurement.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fsdp {
namespace report {

std::string RankMeasurementToText(const RankMeasurement& m) {
  std::string text;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    absl::StrAppend(&text, MemoryCategoryName(static_cast<MemoryCategory>(c)), " ",
                    m.peak_bytes[c], "\n");
  }
  absl::StrAppend(&text, "peak_total ", m.peak_total_bytes, "\n", "peak_rss ", m.peak_rss_bytes,
                  "\n", "baseline_rss ", m.baseline_rss_bytes, "\n");
  return text;
}

absl::StatusOr<RankMeasurement> ParseRankMeasurement(absl::string_view text) {
  std::map<std::string, int64_t> values;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    ++line_number;
    std::vector<absl::string_view> fields =
        absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipEmpty());
    int64_t value = 0;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank measurement line ", line_number, " '", line, "' is not '<name> <bytes>'"));
    }
    values[std::string(fields[0])] = value;
  }
  auto take = [&values](const std::string& key, int64_t* out) -> absl::Status {
    auto it = values.find(key);
    if (it == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank measurement has no '", key, "' line (was the file cut short?)"));
    }
    *out = it->second;
    return absl::OkStatus();
  };
  RankMeasurement m;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    absl::Status status =
        take(MemoryCategoryName(static_cast<MemoryCategory>(c)), &m.peak_bytes[c]);
    if (!status.ok()) return status;
  }
  for (auto [key, out] : {std::pair<const char*, int64_t*>{"peak_total", &m.peak_total_bytes},
                          {"peak_rss", &m.peak_rss_bytes},
                          {"baseline_rss", &m.baseline_rss_bytes}}) {
    absl::Status status = take(key, out);
    if (!status.ok()) return status;
  }
  return m;
}

RankMeasurement MaxOverRanks(absl::Span<const RankMeasurement> ranks) {
  RankMeasurement max = ranks.front();
  for (const RankMeasurement& m : ranks) {
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      max.peak_bytes[c] = std::max(max.peak_bytes[c], m.peak_bytes[c]);
    }
    max.peak_total_bytes = std::max(max.peak_total_bytes, m.peak_total_bytes);
    max.peak_rss_bytes = std::max(max.peak_rss_bytes, m.peak_rss_bytes);
    max.baseline_rss_bytes = std::max(max.baseline_rss_bytes, m.baseline_rss_bytes);
  }
  return max;
}

}  // namespace report
}  // namespace fsdp
