// File: fsdp/run/metrics_fuzz.cc
//
// libFuzzer target for the metrics reader behind --plot and
// //examples:plot_metrics (metrics_plot.h), which reads files people pass by
// name. For any bytes: ParseMetrics returns or refuses without crashing; what
// it returns has at most one point per line and, after the last "resumed"
// line, no point past that line's step that came before it; and the gnuplot
// script for it can be built (numbers of any size, NaN and infinities
// included) with the run's data blocks in it.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "fsdp/run/metrics_plot.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view contents(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fsdp::MetricsRun> run = fsdp::ParseMetrics(contents, "fuzz", "fuzz.jsonl");
  if (!run.ok()) {
    Check(run.status().code() == absl::StatusCode::kInvalidArgument);
    Check(absl::StrContains(run.status().message(), "fuzz.jsonl"));
    return 0;
  }
  const size_t lines = std::count(contents.begin(), contents.end(), '\n') + 1;
  Check(run->points.size() <= lines);
  const std::string script = fsdp::MetricsGnuplotScript({*run}, "out.png");
  Check(absl::StrContains(script, "$train0 << EOD"));
  Check(absl::StrContains(script, "set output 'out.png'"));
  return 0;
}
