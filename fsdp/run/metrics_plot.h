// File: fsdp/run/metrics_plot.h
//
// Curves from --metrics_out files (fsdp/run/metrics_writer.h): one PNG
// with three panels, training and validation loss against step, the same
// against tokens seen, and tokens/s against step, one colour per run, so
// runs can be compared side by side (no_shard against full_shard, 1 rank
// against 4). gnuplot draws it from a self-contained script (data inline as
// datablocks) written next to the PNG as PNG.gp.
//
//   FSDP_ASSIGN_OR_RETURN(MetricsRun run, ReadMetricsFile("/tmp/m.jsonl", "full_shard"));
//   FSDP_RETURN_IF_ERROR(PlotMetrics({run}, "/tmp/curves.png", absl::Seconds(60)));
#ifndef FSDP_RUN_METRICS_PLOT_H_
#define FSDP_RUN_METRICS_PLOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fsdp {

struct MetricsPoint {
  int step = 0;
  int64_t tokens = 0;        // tokens trained on after this step
  double loss = 0;           // training loss of the step (has_loss)
  double tokens_per_s = 0;
  double val_loss = 0;       // has_val
  bool has_loss = false;
  bool has_val = false;
};

struct MetricsRun {
  std::string label;
  std::vector<MetricsPoint> points;  // file order
};

// Parses the step lines of a metrics file (the "final" line is skipped). A
// "resumed" line drops the points after its step that an earlier attempt
// wrote (the file keeps them).
// InvalidArgument naming the file and line for a line without "step".
absl::StatusOr<MetricsRun> ParseMetrics(absl::string_view contents, const std::string& label,
                                        const std::string& path_for_errors);
absl::StatusOr<MetricsRun> ReadMetricsFile(const std::string& path, const std::string& label);

// The gnuplot script that draws `runs` into `output_path` (pngcairo,
// 1500x500). Its series titles are "<label> train", "<label> val" and
// "<label> tok/s".
std::string MetricsGnuplotScript(const std::vector<MetricsRun>& runs,
                                 const std::string& output_path);

// Writes png_path + ".gp" and draws png_path with it (base/gnuplot.h:
// killed after `timeout`, published whole or not at all). FailedPrecondition
// when gnuplot is not installed (run tools/setup.sh); Internal when it fails;
// DeadlineExceeded on timeout.
absl::Status PlotMetrics(const std::vector<MetricsRun>& runs, const std::string& png_path,
                         absl::Duration timeout);

}  // namespace fsdp

#endif  // FSDP_RUN_METRICS_PLOT_H_
