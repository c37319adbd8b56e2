// File: examples/plot_metrics.cc
//
// Curves of one or more train_gpt runs side by side (fsdp/run/metrics_plot.h):
//
//   bazel run -c opt //examples:plot_metrics -- --metrics=/tmp/a.jsonl,/tmp/b.jsonl --labels=no_shard,full_shard --out=/tmp/curves.png
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "fsdp/run/metrics_plot.h"

ABSL_FLAG(std::string, metrics, "", "comma-separated train_gpt --metrics_out files");
ABSL_FLAG(std::string, labels, "", "comma-separated legend labels; empty = the file names");
ABSL_FLAG(std::string, out, "", "the PNG to write (the gnuplot script goes to OUT.gp)");

namespace {

absl::Status Run() {
  const std::vector<std::string> files =
      absl::StrSplit(absl::GetFlag(FLAGS_metrics), ',', absl::SkipEmpty());
  std::vector<std::string> labels =
      absl::StrSplit(absl::GetFlag(FLAGS_labels), ',', absl::SkipEmpty());
  const std::string out = absl::GetFlag(FLAGS_out);
  if (files.empty() || out.empty()) {
    return absl::InvalidArgumentError("give --metrics=FILE[,FILE...] and --out=FILE.png");
  }
  if (labels.empty()) labels = files;
  if (labels.size() != files.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--labels has ", labels.size(), " entries for ", files.size(), " --metrics files"));
  }
  std::vector<fsdp::MetricsRun> runs;
  for (size_t i = 0; i < files.size(); ++i) {
    FSDP_ASSIGN_OR_RETURN(fsdp::MetricsRun run, fsdp::ReadMetricsFile(files[i], labels[i]));
    runs.push_back(std::move(run));
  }
  FSDP_RETURN_IF_ERROR(fsdp::PlotMetrics(runs, out, absl::Seconds(120)));
  std::printf("plot_metrics: wrote %s (gnuplot script %s.gp)\n", out.c_str(), out.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Plots train_gpt metrics files to a PNG.");
  absl::ParseCommandLine(argc, argv);
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "plot_metrics: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  return 0;
}
