// File: examples/batch_report.cc
//
// The batch-size catch, measured: trains the same model at several global
// batch sizes (through ranks and accumulation) to the same number of
// tokens, once with the learning rate scaled linearly with the batch (with
// warmup: --lr_reference_batch) and once with it fixed, and reports the
// validation loss against tokens and against steps, the steps and tokens
// each run needed to reach a target loss, the critical batch those steps
// imply (fsdp/report/batch_sweep.h) and the gradient noise scale the runs
// measured themselves (fsdp/optim/gradient_noise_scale.h).
//
//   tools/batch_report.sh                 # the fortunes quick start's model
//   bazel run -c opt //examples:batch_report -- --out_dir=DIR
//       --batches=4,8,16,32,64 --tokens=600000 -- --data=... --val_data=...
//       --vocab=512 --layers=4 --d_model=128 --heads=4 --seq_len=128
//   (one command line, wrapped here)
//
// Flags after `--` go to every train_gpt run (model and data). Each run's
// metrics and log are kept in DIR/runs/; DIR/batch_report.csv holds the
// table, DIR/curves_<mode>.png the curves (loss against step and tokens).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "examples/training_job.h"
#include "fsdp/report/batch_sweep.h"
#include "fsdp/run/metrics_plot.h"

ABSL_FLAG(std::string, out_dir, "", "directory for the runs, the table and the plots (required)");
ABSL_FLAG(std::string, batches, "4,8,16,32,64", "global batch sizes in sequences, comma-separated");
ABSL_FLAG(int, micro_batch, 4, "sequences per micro-batch; each batch is split into ranks, "
          "then accumulation");
ABSL_FLAG(int, max_ranks, 2, "ranks at most per run (the rest of a batch is accumulation)");
ABSL_FLAG(int64_t, tokens, 600000, "tokens every run trains on");
ABSL_FLAG(int, seq_len, 128, "sequence length (passed to train_gpt)");
ABSL_FLAG(double, lr, 3e-3, "peak learning rate at --reference_batch");
ABSL_FLAG(int, reference_batch, 16, "the batch --lr is tuned for (the quick start's 2 x 8)");
ABSL_FLAG(double, warmup_fraction, 0.05, "share of each run's steps spent warming up");
ABSL_FLAG(std::string, modes, "scaled,fixed", "scaled (lr x batch / reference), fixed, or both");
ABSL_FLAG(int, val_points, 12, "validations per run (the curve's points)");
ABSL_FLAG(double, target_loss, 0,
          "validation loss to reach; 0 = per learning-rate rule, the highest final loss among "
          "that rule's runs (the loss every one of them reached)");
ABSL_FLAG(std::string, train_gpt, "", "the train_gpt binary; default: beside this one");

namespace {

// Set by SIGINT and SIGTERM: the running train_gpt is stopped and the report
// ends, naming the run it stopped.
std::atomic<bool> interrupted{false};
void OnInterrupt(int) { interrupted = true; }

struct Run {
  int64_t batch = 0;
  std::string mode;
  fsdp::report::BatchSplit split;
  int steps = 0;
  double lr = 0;
  std::vector<fsdp::report::LossPoint> val_curve;
  fsdp::MetricsRun metrics;
  double noise_scale = -1, noise_stderr = -1;  // -1: none measured
};

std::string BesideThisBinary(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return name;
  const std::string path(self, n);
  return path.substr(0, path.rfind('/') + 1) + name;
}

absl::Status TrainOne(Run& run, const std::string& train_gpt, const std::string& dir,
                      const std::vector<std::string>& passed) {
  const std::string name = absl::StrCat("b", run.batch, "_", run.mode);
  const std::string metrics = absl::StrCat(dir, "/runs/", name, ".jsonl");
  const std::string log = absl::StrCat(dir, "/runs/", name, ".log");
  std::remove(metrics.c_str());
  const int warmup = std::max(1, static_cast<int>(absl::GetFlag(FLAGS_warmup_fraction) * run.steps));
  std::vector<std::string> argv = {
      train_gpt,
      absl::StrCat("--nproc=", run.split.ranks),
      absl::StrCat("--micro_batch=", absl::GetFlag(FLAGS_micro_batch)),
      absl::StrCat("--accum=", run.split.accum),
      absl::StrCat("--seq_len=", absl::GetFlag(FLAGS_seq_len)),
      absl::StrCat("--steps=", run.steps),
      absl::StrCat("--warmup_steps=", std::min(warmup, run.steps)),
      absl::StrCat("--lr=", absl::GetFlag(FLAGS_lr)),
      absl::StrCat("--val_every=", std::max(1, run.steps / absl::GetFlag(FLAGS_val_points))),
      absl::StrCat("--metrics_out=", metrics)};
  if (run.mode == "scaled") {
    argv.push_back(absl::StrCat("--lr_reference_batch=", absl::GetFlag(FLAGS_reference_batch)));
  }
  argv.insert(argv.end(), passed.begin(), passed.end());
  std::printf("batch_report: batch %lld (%d ranks x %d accum x %d), lr %s, %d steps ...\n",
              static_cast<long long>(run.batch), run.split.ranks, run.split.accum,
              absl::GetFlag(FLAGS_micro_batch), run.mode.c_str(), run.steps);
  std::fflush(stdout);
  base::ProcessOptions options;
  options.output_path = log;
  options.timeout = absl::Hours(2);
  options.cancel = &interrupted;
  FSDP_ASSIGN_OR_RETURN(const int code, base::RunProcess(argv, options));
  if (code != 0) {
    return absl::InternalError(absl::StrCat("train_gpt failed (exit ", code, ") for batch ",
                                            run.batch, " ", run.mode, "; its output is in ", log));
  }
  FSDP_ASSIGN_OR_RETURN(run.metrics,
                        fsdp::ReadMetricsFile(metrics, absl::StrCat("B=", run.batch)));
  for (const fsdp::MetricsPoint& p : run.metrics.points) {
    if (p.has_val) run.val_curve.push_back({p.step, p.tokens, p.val_loss});
  }
  // The final line: the measured noise scale.
  FILE* in = std::fopen(metrics.c_str(), "r");
  if (in != nullptr) {
    char line[8192];
    while (std::fgets(line, sizeof(line), in) != nullptr) {
      const std::string s(line);
      if (s.find("\"final\":true") == std::string::npos) continue;
      run.noise_scale = training_job::JsonNumberField(s, "gradient_noise_scale");
      run.noise_stderr = training_job::JsonNumberField(s, "gradient_noise_scale_stderr");
    }
    std::fclose(in);
  }
  return absl::OkStatus();
}

std::string FormatOptional(std::optional<double> v, const char* format) {
  return v.has_value() ? absl::StrFormat(format, *v) : std::string("-");
}

absl::Status Report(const std::vector<std::string>& passed) {
  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  if (dir.empty()) return absl::InvalidArgumentError("--out_dir is required");
  std::vector<int64_t> batches;
  for (absl::string_view piece : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',',
                                                absl::SkipEmpty())) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(piece, &b) || b <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batches: '", piece, "' is not a positive number of sequences"));
    }
    batches.push_back(b);
  }
  std::vector<std::string> modes =
      absl::StrSplit(absl::GetFlag(FLAGS_modes), ',', absl::SkipEmpty());
  for (const std::string& mode : modes) {
    if (mode != "scaled" && mode != "fixed") {
      return absl::InvalidArgumentError(
          absl::StrCat("--modes: '", mode, "' is neither scaled nor fixed"));
    }
  }
  if (batches.empty() || modes.empty()) {
    return absl::InvalidArgumentError("--batches and --modes need at least one value each");
  }
  const int micro_batch = absl::GetFlag(FLAGS_micro_batch);
  std::vector<Run> runs;
  for (const std::string& mode : modes) {
    for (int64_t batch : batches) {
      Run run;
      run.batch = batch;
      run.mode = mode;
      FSDP_ASSIGN_OR_RETURN(run.split,
                            fsdp::report::SplitGlobalBatch(batch, micro_batch,
                                                           absl::GetFlag(FLAGS_max_ranks)));
      run.steps = fsdp::report::StepsForTokens(absl::GetFlag(FLAGS_tokens), batch,
                                               absl::GetFlag(FLAGS_seq_len));
      run.lr = mode == "scaled" ? absl::GetFlag(FLAGS_lr) * static_cast<double>(batch) /
                                      absl::GetFlag(FLAGS_reference_batch)
                                : absl::GetFlag(FLAGS_lr);
      runs.push_back(run);
    }
  }
  for (const std::string& d : {dir, absl::StrCat(dir, "/runs")}) {
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("creating ", d, ": ", std::strerror(errno)));
    }
  }
  std::string train_gpt = absl::GetFlag(FLAGS_train_gpt);
  if (train_gpt.empty()) train_gpt = BesideThisBinary("train_gpt");
  for (Run& run : runs) FSDP_RETURN_IF_ERROR(TrainOne(run, train_gpt, dir, passed));

  // The target, per learning-rate rule: by default the loss every run of
  // that rule reached (the highest of their final validation losses). One
  // target for both rules would be set by the worse rule's worst run and
  // met by the other rule's runs at their first validations.
  std::map<std::string, double> target_of;  // by mode
  for (const Run& run : runs) {
    double& target = target_of[run.mode];
    if (absl::GetFlag(FLAGS_target_loss) > 0) {
      target = absl::GetFlag(FLAGS_target_loss);
    } else if (!run.val_curve.empty()) {
      target = std::max(target, run.val_curve.back().loss);
    }
  }
  std::map<std::string, std::vector<fsdp::report::StepsAtBatch>> reached;  // by mode
  std::string csv =
      "batch,mode,ranks,accum,steps,tokens,peak_lr,final_val_loss,target_loss,steps_to_target,"
      "tokens_to_target,noise_scale,noise_scale_stderr\n";
  std::printf("\n%6s %6s %5s %5s %6s %9s %8s %8s %8s %10s %13s\n", "batch", "lr", "ranks",
              "accum", "steps", "peak_lr", "val_loss", "steps_to", "tokens_to", "noise", "+-");
  for (const Run& run : runs) {
    const double target = target_of[run.mode];
    const std::optional<fsdp::report::LossPoint> hit =
        fsdp::report::FirstReaching(run.val_curve, target);
    // The fit takes the crossing between validations, not the first one under it.
    if (const std::optional<double> steps = fsdp::report::StepsToReach(run.val_curve, target)) {
      reached[run.mode].push_back({run.batch, *steps});
    }
    const std::optional<double> final_loss =
        run.val_curve.empty() ? std::nullopt : std::optional<double>(run.val_curve.back().loss);
    const std::optional<double> noise =
        run.noise_scale >= 0 ? std::optional<double>(run.noise_scale) : std::nullopt;
    const std::optional<double> noise_se =
        run.noise_stderr >= 0 ? std::optional<double>(run.noise_stderr) : std::nullopt;
    const int64_t tokens = int64_t{run.steps} * run.batch * absl::GetFlag(FLAGS_seq_len);
    absl::StrAppendFormat(&csv, "%d,%s,%d,%d,%d,%d,%.6g,%s,%.6g,%s,%s,%s,%s\n", run.batch,
                          run.mode, run.split.ranks, run.split.accum, run.steps, tokens, run.lr,
                          FormatOptional(final_loss, "%.6f"), target,
                          hit ? absl::StrCat(hit->step) : "", hit ? absl::StrCat(hit->tokens) : "",
                          FormatOptional(noise, "%.4g"), FormatOptional(noise_se, "%.3g"));
    std::printf("%6lld %6s %5d %5d %6d %9.2e %8s %8s %8s %10s %13s\n",
                static_cast<long long>(run.batch), run.mode.c_str(), run.split.ranks,
                run.split.accum, run.steps, run.lr, FormatOptional(final_loss, "%.4f").c_str(),
                hit ? absl::StrCat(hit->step).c_str() : "not",
                hit ? absl::StrCat(hit->tokens).c_str() : "reached",
                FormatOptional(noise, "%.1f").c_str(), FormatOptional(noise_se, "%.1f").c_str());
  }
  FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(absl::StrCat(dir, "/batch_report.csv"), csv));
  std::printf("\n");
  for (const std::string& mode : modes) {
    std::printf("target validation loss (lr %s) %.4f\n", mode.c_str(), target_of[mode]);
  }
  for (const std::string& mode : modes) {
    const auto& points = reached[mode];
    absl::StatusOr<fsdp::report::CriticalBatchFit> fit = fsdp::report::FitCriticalBatch(points);
    const std::optional<int64_t> knee = fsdp::report::DiminishingReturnsBatch(points);
    std::printf("lr %s: %s; %s\n", mode.c_str(),
                fit.ok() ? absl::StrFormat("steps ~ %.0f (1 + %.1f / B): critical batch %.1f",
                                           fit->min_steps, fit->critical_batch,
                                           fit->critical_batch)
                               .c_str()
                         : fit.status().message().data(),
                knee.has_value()
                    ? absl::StrFormat("doubling to %d sequences first saved less than a third "
                                      "of the steps",
                                      *knee)
                          .c_str()
                    : "every doubling in the sweep still saved a third of the steps or more");
    std::vector<fsdp::MetricsRun> curves;
    for (const Run& run : runs) {
      if (run.mode == mode) curves.push_back(run.metrics);
    }
    absl::Status plotted = fsdp::PlotMetrics(
        curves, absl::StrCat(dir, "/curves_", mode, ".png"), absl::Minutes(2));
    if (!plotted.ok()) std::printf("  (no plot: %s)\n", plotted.ToString().c_str());
  }
  // The noise scale the runs measured, per batch (the scaled runs').
  for (const Run& run : runs) {
    if (run.mode != modes.front() || run.noise_scale < 0) continue;
    std::printf("measured gradient noise scale at batch %lld: %.1f +- %.1f sequences\n",
                static_cast<long long>(run.batch), run.noise_scale, run.noise_stderr);
  }
  std::printf("table: %s/batch_report.csv; curves: %s/curves_<mode>.png; runs: %s/runs/\n",
              dir.c_str(), dir.c_str(), dir.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains one model at several global batch sizes to the same tokens and reports the "
      "loss against tokens and steps, the steps to a target loss and the noise scale.\n"
      "  batch_report --out_dir=DIR [--batches=4,8,16,32,64] -- <train_gpt flags>");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  std::vector<std::string> passed(positional.begin() + 1, positional.end());
  absl::Status status = Report(passed);
  if (!status.ok()) {
    std::fprintf(stderr, "batch_report: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
