// File: examples/memory_report.cc
//
// Memory per rank against model size, predicted and measured (docs/memory.md):
//
//   bazel run -c opt //examples:memory_report -- --out_dir=docs/memory-report
//   bazel run -c opt //examples:memory_report -- --preset=small --mem_budget=2MiB
//   bazel run -c opt //examples:memory_report -- --predict_only --params=7.5e9
//       --ranks=1,64,1024 --precision=mixed                  (one command line)
//   bazel run -c opt //examples:memory_report -- --predict_only --layers=36
//       --d_model=4096 --heads=32 --vocab=50304 --seq_len=2048 --micro_batch=1 --ranks=64
//   bazel run -c opt //examples:memory_report -- --predict_only --model=llama3-8b
//       --ranks=8,64 --precision=mixed --activation_checkpointing=all
//
// --predict_only takes a GPT shape, a Llama shape (--model=llama with
// --kv_heads and --ffn_hidden too) or a Llama 3 by name (--model=llama3-8b,
// llama3-70b, llama3-405b: fsdp/report/llama3_models.h). The sweep trains
// the GPT family only.
//
// Sweep mode visits every point of the preset (fsdp/report/sweep.h): the
// model sweep (sizes x strategies x ranks x precisions x activation modes)
// and the sequence-length sweep (one model, seq_len x activation modes),
// predicts each point (fsdp/report/memory_estimate.h) and, when the training
// runtime accepts it, measures it: the binary re-launches itself as the
// point's ranks (comm/launcher), each rank trains a few steps and writes its
// per-category tracker peaks and peak RSS to a file, and the parent takes
// the maximum over ranks. Outputs in --out_dir, each written atomically:
// memory.csv, memory.md, memory_<precision>.png (gnuplot), memory_seq_len.csv,
// memory_seq_len.md, memory_seq_len.png and the .gp scripts.
//
// Exit code: 0; 1 if a measured point failed or a file could not be
// written; 2 for bad flags.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/atomic_file.h"
#include "base/gnuplot.h"
#include "base/posix_file.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/launcher/crash_trace.h"
#include "comm/launcher/launcher.h"
#include "fsdp/optim/gradient_noise_scale.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/plan/strategy.h"
#include "fsdp/report/activation_mode.h"
#include "fsdp/report/budget.h"
#include "fsdp/report/byte_size.h"
#include "fsdp/report/gpt_family.h"
#include "fsdp/report/llama3_models.h"
#include "fsdp/report/measure_training.h"
#include "fsdp/report/memory_estimate.h"
#include "fsdp/report/rank_measurement.h"
#include "fsdp/report/report_plot.h"
#include "fsdp/report/report_rows.h"
#include "fsdp/report/report_tables.h"
#include "fsdp/report/sweep.h"

ABSL_FLAG(std::string, preset, "full", "sweep preset: small (seconds) or full (a few minutes)");
ABSL_FLAG(std::string, out_dir, "memory-report",
          "sweep outputs go here (relative paths are taken from where bazel run was invoked)");
ABSL_FLAG(std::string, mem_budget, "",
          "per-rank memory budget, e.g. 2GiB or 500MB: report the largest model that fits and "
          "draw the budget line");
ABSL_FLAG(double, noise_scale, 0,
          "the gradient noise scale measured on this model, in sequences (train_gpt's closing "
          "line; docs/batch-size.md): the budget check then says which suggested rank counts "
          "take the global batch beyond it; 0: unknown");
ABSL_FLAG(std::string, strategy, "all",
          "comma-separated strategies, or all: no_shard, shard_optimizer, shard_grad_op, "
          "full_shard, hybrid_shard");
ABSL_FLAG(std::string, precision, "fp32,bf16,mixed",
          "comma-separated: fp32, bf16 (the "
          "runtime's --precision=bf16 --reduce_dtype=fp32: 2-byte parameters and compute, "
          "4-byte gradients, fp32 master), mixed (the runtime's --precision=bf16: ZeRO's "
          "2-byte parameters and gradients, fp32 master)");
ABSL_FLAG(std::string, ranks, "",
          "comma-separated rank counts (default: the preset's; with --predict_only 1,8,64,1024)");
ABSL_FLAG(int, group_size, 0,
          "hybrid_shard's ranks per shard group (default: half the ranks); must divide ranks");
ABSL_FLAG(std::string, activation_checkpointing, "none",
          "comma-separated activation checkpointing modes of the model sweep (and "
          "--predict_only): none, all, every:K");
ABSL_FLAG(std::string, attention, "standard",
          "comma-separated attention of the model sweep (and --predict_only): standard, flash "
          "(memory-efficient)");
ABSL_FLAG(std::string, seq_lens, "",
          "the sequence-length sweep's seq_len values (default: the preset's), or none to skip "
          "it; its modes are none, every:2, all, flash, all+flash");
ABSL_FLAG(int, steps, 0, "training steps per measured point (default: the preset's)");
ABSL_FLAG(std::string, measure_cap, "6GiB",
          "measure a point only if ranks x predicted bytes per rank stays below this");
ABSL_FLAG(bool, exact, false,
          "--predict_only: train_gpt's --exact (int64 gradient sums, docs/exact.md); the "
          "measured sweep does not run it yet");
ABSL_FLAG(bool, predict_only, false,
          "print predictions for --params, a GPT or Llama shape, or a Llama 3 by name, and "
          "exit; nothing is trained");
ABSL_FLAG(std::string, model, "gpt",
          "--predict_only: the model family of the shape flags, gpt or llama (as train_gpt's "
          "--model), or a Llama 3 by name: llama3-8b, llama3-70b, llama3-405b (their "
          "published shapes; --seq_len default 8192). The sweep trains the GPT only");
ABSL_FLAG(std::string, params, "",
          "--predict_only: a parameter count (e.g. 7.5e9), predicted by the ZeRO formulas");
ABSL_FLAG(int, layers, 0, "--predict_only shape: transformer blocks");
ABSL_FLAG(int, d_model, 0, "--predict_only shape: width");
ABSL_FLAG(int, heads, 0, "--predict_only shape: attention heads");
ABSL_FLAG(int, kv_heads, 0,
          "--predict_only --model=llama: key/value heads, dividing --heads; 0 = --heads");
ABSL_FLAG(int, ffn_hidden, 0,
          "--predict_only --model=llama: SwiGLU width; 0 = 8/3 d_model rounded up to a "
          "multiple of 256");
ABSL_FLAG(int, vocab, 0, "--predict_only shape: vocabulary");
ABSL_FLAG(int, seq_len, 0,
          "--predict_only shape: tokens per sequence (a Llama 3 by name: default 8192)");
ABSL_FLAG(int, micro_batch, 1, "--predict_only shape: sequences per rank per micro-batch");
// Set by the sweep for the ranks it launches; not for people.
ABSL_FLAG(std::string, rank_point, "",
          "internal: 'strategy,ranks,layers,d_model,heads,vocab,seq_len,micro_batch,steps,"
          "group_size,precision,activation_checkpointing,attention' of the point this "
          "launched rank measures");
ABSL_FLAG(std::string, rank_out, "", "internal: where this launched rank writes its measurement");

namespace {

using fsdp::report::ActivationMode;
using fsdp::report::FitRow;
using fsdp::report::MemoryPoint;
using fsdp::report::Precision;
using fsdp::report::RankMeasurement;
using fsdp::report::RankMemoryEstimate;
using fsdp::report::ReportData;
using fsdp::report::ReportRow;
using fsdp::report::SweepOptions;

// ---------------------------------------------------------------------------
// Flags.

absl::StatusOr<std::vector<int>> ParseIntList(const std::string& flag, const std::string& text) {
  std::vector<int> values;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int value = 0;
    if (!absl::SimpleAtoi(item, &value) || value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "=", text, ": '", item, "' is not a positive integer"));
    }
    values.push_back(value);
  }
  if (values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return values;
}

absl::StatusOr<std::vector<fsdp::proto::ShardingStrategy>> ParseStrategies(
    const std::string& text) {
  if (text == "all") {
    return std::vector<fsdp::proto::ShardingStrategy>{
        fsdp::proto::NO_SHARD, fsdp::proto::SHARD_OPTIMIZER, fsdp::proto::SHARD_GRAD_OP,
        fsdp::proto::FULL_SHARD, fsdp::proto::HYBRID_SHARD};
  }
  std::vector<fsdp::proto::ShardingStrategy> strategies;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    FSDP_ASSIGN_OR_RETURN(fsdp::proto::ShardingStrategy strategy,
                          fsdp::plan::ParseShardingStrategy(item));
    strategies.push_back(strategy);
  }
  if (strategies.empty()) return absl::InvalidArgumentError("--strategy is empty");
  return strategies;
}

absl::StatusOr<std::vector<Precision>> ParsePrecisions(const std::string& text) {
  std::vector<Precision> precisions;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    FSDP_ASSIGN_OR_RETURN(Precision precision, fsdp::report::ParsePrecision(item));
    precisions.push_back(precision);
  }
  if (precisions.empty()) return absl::InvalidArgumentError("--precision is empty");
  return precisions;
}

// --noise_scale, checked (fsdp/optim/gradient_noise_scale.h).
absl::StatusOr<double> NoiseScaleFromFlag() {
  const double noise_scale = absl::GetFlag(FLAGS_noise_scale);
  FSDP_RETURN_IF_ERROR(fsdp::ValidateNoiseScaleFlag(noise_scale));
  return noise_scale;
}

// 0 when the flag is empty.
absl::StatusOr<int64_t> BudgetFromFlag() {
  const std::string text = absl::GetFlag(FLAGS_mem_budget);
  if (text.empty()) return 0;
  FSDP_ASSIGN_OR_RETURN(int64_t budget, fsdp::report::ParseByteSize(text));
  if (budget <= 0) return absl::InvalidArgumentError("--mem_budget must be positive");
  return budget;
}

int GroupSizeFor(fsdp::proto::ShardingStrategy strategy, int ranks) {
  if (strategy != fsdp::proto::HYBRID_SHARD) return 0;
  const int flag = absl::GetFlag(FLAGS_group_size);
  return flag > 0 ? flag : fsdp::report::SweepHybridGroupSize(ranks);
}

// The point a budget question asks about: `config` under activation `mode`,
// on `ranks` ranks of `strategy`.
MemoryPoint BudgetPoint(fsdp::GptConfig config, const ActivationMode& mode, int micro_batch,
                        fsdp::proto::ShardingStrategy strategy, int ranks, Precision precision) {
  MemoryPoint point;
  point.config = config;
  point.config.activation_checkpoint_every = mode.checkpoint_every;
  point.config.flash_attention = mode.flash_attention;
  point.micro_batch = micro_batch;
  point.strategy = strategy;
  point.ranks = ranks;
  point.group_size = GroupSizeFor(strategy, ranks);
  point.precision = precision;
  return point;
}

// A path as the user meant it: relative to where `bazel run` was invoked.
std::string UserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  return cwd != nullptr ? absl::StrCat(cwd, "/", path) : path;
}

// ---------------------------------------------------------------------------
// Launched rank: measure one point and write the measurement.

// The point as --rank_point carries it to the launched ranks.
std::string RankPointFlag(const MemoryPoint& point, int steps) {
  const fsdp::GptConfig& c = point.config;
  return absl::StrCat("--rank_point=", fsdp::plan::ShardingStrategyName(point.strategy), ",",
                      point.ranks, ",", c.layers, ",", c.d_model, ",", c.heads, ",", c.vocab, ",",
                      c.seq_len, ",", point.micro_batch, ",", steps, ",", point.group_size, ",",
                      fsdp::report::PrecisionName(point.precision), ",",
                      fsdp::ActivationCheckpointingName(c.activation_checkpoint_every), ",",
                      c.flash_attention ? "flash" : "standard");
}

absl::Status RunMeasuringRank() {
  std::vector<std::string> f = absl::StrSplit(absl::GetFlag(FLAGS_rank_point), ',');
  std::vector<int> n;
  for (size_t i = 1; i < f.size() && i < 10; ++i) {
    int v = 0;
    if (!absl::SimpleAtoi(f[i], &v)) break;
    n.push_back(v);
  }
  if (f.size() != 13 || n.size() != 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank_point='", absl::GetFlag(FLAGS_rank_point), "' is malformed"));
  }
  MemoryPoint point;
  FSDP_ASSIGN_OR_RETURN(point.strategy, fsdp::plan::ParseShardingStrategy(f[0]));
  point.ranks = n[0];
  point.config.layers = n[1];
  point.config.d_model = n[2];
  point.config.heads = n[3];
  point.config.vocab = n[4];
  point.config.seq_len = n[5];
  point.micro_batch = n[6];
  point.group_size = n[8];
  FSDP_ASSIGN_OR_RETURN(point.precision, fsdp::report::ParsePrecision(f[10]));
  FSDP_ASSIGN_OR_RETURN(const std::vector<ActivationMode> modes,
                        fsdp::report::ParseActivationModes(f[11], f[12]));
  FSDP_RETURN_IF_ERROR(fsdp::report::ApplyActivationMode(modes.front(), point.config));
  FSDP_ASSIGN_OR_RETURN(fsdp::TrainOptions options,
                        fsdp::report::TrainOptionsForPoint(point, /*steps=*/n[7]));
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  FSDP_ASSIGN_OR_RETURN(RankMeasurement measurement,
                        fsdp::report::MeasureTrainingMemory(options, *world));
  return base::WriteFileAtomically(
      absl::StrCat(absl::GetFlag(FLAGS_rank_out), ".rank", world->rank()),
      fsdp::report::RankMeasurementToText(measurement));
}

// ---------------------------------------------------------------------------
// Sweep: predict every point, measure those the runtime accepts.

absl::StatusOr<RankMeasurement> MeasurePoint(const MemoryPoint& point, int steps,
                                             const std::string& scratch_dir, int index) {
  const std::string out = absl::StrCat(scratch_dir, "/point", index);
  FSDP_ASSIGN_OR_RETURN(std::string self, comm::SelfExecutablePath());
  comm::LaunchOptions launch;
  launch.nproc = point.ranks;
  launch.argv = {self, RankPointFlag(point, steps), absl::StrCat("--rank_out=", out)};
  FSDP_ASSIGN_OR_RETURN(int exit_code, comm::LaunchLocalRanks(launch));
  if (exit_code != 0) {
    return absl::InternalError(absl::StrCat("the ranks exited with code ", exit_code));
  }
  std::vector<RankMeasurement> ranks;
  for (int r = 0; r < point.ranks; ++r) {
    const std::string path = absl::StrCat(out, ".rank", r);
    FSDP_ASSIGN_OR_RETURN(std::string text, base::ReadWholeFile(path));
    absl::StatusOr<RankMeasurement> m = fsdp::report::ParseRankMeasurement(text);
    if (!m.ok()) {
      return absl::InternalError(absl::StrCat("rank ", r, " (", path, "): ", m.status().message()));
    }
    ranks.push_back(*m);
    std::remove(path.c_str());
  }
  return fsdp::report::MaxOverRanks(ranks);
}

// Writes out_dir/<stem>.gp (naming <stem>.png, to rerun from out_dir) and
// draws out_dir/<stem>.png with it (base/gnuplot.h: published whole or not at
// all). `script_for(png)` makes the script.
absl::Status WritePlot(const std::string& out_dir, const std::string& stem,
                       const std::function<std::string(const std::string&)>& script_for) {
  base::GnuplotPlot plot;
  plot.png_path = absl::StrCat(out_dir, "/", stem, ".png");
  plot.script_path = absl::StrCat(out_dir, "/", stem, ".gp");
  plot.script_output = stem + ".png";
  return base::DrawWithGnuplot(plot, script_for);
}

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// Whether a measurement equals its prediction in the total and every
// tracker category, to the byte.
bool MeasuredEqualsPredicted(const ReportRow& row) {
  if (!row.measured.has_value()) return false;
  if (row.measured->peak_total_bytes != row.predicted.total_bytes()) return false;
  for (int c = 0; c < fsdp::kNumMemoryCategories; ++c) {
    const auto category = static_cast<fsdp::MemoryCategory>(c);
    if (row.measured->peak(category) != row.predicted.tracker_bytes(category)) return false;
  }
  return true;
}

struct MeasureLimits {
  int max_measured_width = 0;
  int max_measured_seq_len = 0;  // 0: any
  int64_t measure_cap_bytes = 0;
  double max_measured_rank_params = 0;
  int steps = 2;
};

// Predicts every point and measures those within the limits the runtime
// accepts; prints a line per point. Returns the rows; counts failed
// measurements in *failures.
std::vector<ReportRow> PredictAndMeasure(const std::vector<MemoryPoint>& points,
                                         const MeasureLimits& limits,
                                         const std::string& scratch_dir, int* index,
                                         int total_points, int* failures) {
  std::vector<ReportRow> rows;
  for (const MemoryPoint& point : points) {
    const int i = (*index)++;
    ReportRow row;
    row.point = point;
    absl::StatusOr<RankMemoryEstimate> predicted = fsdp::report::EstimateRankMemory(point);
    if (!predicted.ok()) {
      std::printf("[%d/%d] %s: cannot predict: %s\n", i + 1, total_points,
                  fsdp::report::MemoryPointToString(point).c_str(),
                  std::string(predicted.status().message()).c_str());
      continue;
    }
    row.predicted = *predicted;
    const absl::Time start = absl::Now();
    absl::StatusOr<fsdp::TrainOptions> run =
        fsdp::report::TrainOptionsForPoint(point, limits.steps);
    if (!run.ok()) {
      row.status = absl::StrCat("not measured: ", run.status().message());
    } else if (point.config.d_model > limits.max_measured_width) {
      row.status = absl::StrCat("predicted only: wider than the preset measures (d_model ",
                                limits.max_measured_width, ")");
    } else if (limits.max_measured_seq_len > 0 &&
               point.config.seq_len > limits.max_measured_seq_len) {
      row.status = absl::StrCat("predicted only: longer than the preset measures (seq_len ",
                                limits.max_measured_seq_len, ", compute time)");
    } else if (static_cast<double>(point.ranks) * row.predicted.total_bytes() >
               static_cast<double>(limits.measure_cap_bytes)) {
      row.status = absl::StrCat("predicted only: ", point.ranks, " x ",
                                Mib(row.predicted.total_bytes()), " is over --measure_cap=",
                                absl::GetFlag(FLAGS_measure_cap));
    } else if (static_cast<double>(point.ranks) * row.predicted.num_params >
               limits.max_measured_rank_params) {
      row.status = absl::StrFormat(
          "predicted only: %d ranks x %.3g parameters is over the preset's %.3g (compute time)",
          point.ranks, static_cast<double>(row.predicted.num_params),
          limits.max_measured_rank_params);
    } else {
      absl::StatusOr<RankMeasurement> measured =
          MeasurePoint(point, limits.steps, scratch_dir, i);
      if (!measured.ok()) {
        // One retry: the launcher picks a free MASTER_PORT that another
        // process on this shared machine can take before rank 0 binds it
        // ("MASTER_PORT ... is in use"); a real failure fails again.
        std::printf("[%d/%d] launch failed (%s); retrying once on a new port\n", i + 1,
                    total_points, std::string(measured.status().message()).c_str());
        std::fflush(stdout);
        measured = MeasurePoint(point, limits.steps, scratch_dir, i);
      }
      if (measured.ok()) {
        row.measured = *measured;
        row.status = "measured";
      } else {
        row.status = absl::StrCat("measurement failed: ", measured.status().message());
        ++*failures;
      }
    }
    std::string line = absl::StrFormat(
        "[%d/%d] %s params=%.3g: predicted %s", i + 1, total_points,
        fsdp::report::MemoryPointToString(point), static_cast<double>(row.predicted.num_params),
        Mib(row.predicted.total_bytes()));
    if (row.measured.has_value()) {
      absl::StrAppend(
          &line,
          absl::StrFormat(", measured %s (x%.4f%s), peak RSS %s (%.1f s)",
                          Mib(row.measured->peak_total_bytes),
                          static_cast<double>(row.measured->peak_total_bytes) /
                              row.predicted.total_bytes(),
                          MeasuredEqualsPredicted(row) ? ", every category exact" : "",
                          Mib(row.measured->peak_rss_bytes),
                          absl::ToDoubleSeconds(absl::Now() - start)));
    } else {
      absl::StrAppend(&line, "; ", row.status);
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    rows.push_back(std::move(row));
  }
  return rows;
}

// With a budget, each mode's curve of the sequence-length plot continues
// past the sweep's longest seq_len, doubling, up to the first point over the
// budget, so the plot shows where each mode stops fitting (predicted only).
absl::StatusOr<std::vector<MemoryPoint>> PointsTowardTheBudget(
    const std::vector<MemoryPoint>& seq_points, int64_t budget) {
  std::vector<MemoryPoint> beyond;
  if (budget <= 0) return beyond;
  // The longest point of each mode.
  std::vector<MemoryPoint> last;
  for (const MemoryPoint& point : seq_points) {
    const ActivationMode mode = fsdp::report::ActivationModeOf(point.config);
    auto same = std::find_if(last.begin(), last.end(), [&](const MemoryPoint& p) {
      return fsdp::report::ActivationModeOf(p.config) == mode;
    });
    if (same == last.end()) {
      last.push_back(point);
    } else if (point.config.seq_len > same->config.seq_len) {
      *same = point;
    }
  }
  for (const MemoryPoint& longest : last) {
    FSDP_ASSIGN_OR_RETURN(RankMemoryEstimate at_end, fsdp::report::EstimateRankMemory(longest));
    if (at_end.total_bytes() > budget) continue;  // the sweep already crosses it
    MemoryPoint point = longest;
    while (point.config.seq_len <= fsdp::report::kMaxSearchedSeqLen / 2) {
      point.config.seq_len *= 2;
      beyond.push_back(point);
      FSDP_ASSIGN_OR_RETURN(RankMemoryEstimate e, fsdp::report::EstimateRankMemory(point));
      if (e.total_bytes() > budget) break;
    }
  }
  return beyond;
}

// The budget modes: with and without checkpointing and flash attention.
std::vector<ActivationMode> BudgetModes() {
  return {ActivationMode{0, false}, ActivationMode{2, false}, ActivationMode{1, false},
          ActivationMode{0, true}, ActivationMode{1, true}};
}

// With a budget: the largest family model and the longest sequence of the
// sequence-length sweep's model that fit, per precision, strategy, ranks
// and mode; printed one line per (precision, strategy, ranks).
absl::Status ComputeFits(const SweepOptions& sweep, int64_t budget, ReportData& data) {
  std::printf("largest GPT-family model (vocab=%d seq_len=%d micro_batch=%d) within %s per "
              "rank, per activation mode:\n",
              sweep.vocab, sweep.seq_len, sweep.micro_batch, fsdp::FormatBytes(budget).c_str());
  const fsdp::report::SeqLenSweep& seq = sweep.seq_len_sweep;
  for (Precision precision : sweep.precisions) {
    for (fsdp::proto::ShardingStrategy strategy : sweep.strategies) {
      for (int ranks : sweep.ranks) {
        std::string line = absl::StrFormat("  %-16s %-9s ranks=%-3d",
                                           fsdp::plan::ShardingStrategyName(strategy),
                                           fsdp::report::PrecisionName(precision), ranks);
        for (const ActivationMode& mode : BudgetModes()) {
          fsdp::GptConfig family;
          family.vocab = sweep.vocab;
          family.seq_len = sweep.seq_len;
          const MemoryPoint point =
              BudgetPoint(family, mode, sweep.micro_batch, strategy, ranks, precision);
          FSDP_ASSIGN_OR_RETURN(std::optional<fsdp::report::FittingModel> largest,
                                fsdp::report::LargestFittingFamilyModel(point, budget));
          FitRow fit;
          fit.strategy = strategy;
          fit.precision = precision;
          fit.ranks = ranks;
          fit.group_size = point.group_size;
          fit.mode = mode;
          fit.largest = largest;
          data.fits.push_back(fit);
          absl::StrAppend(&line, " | ", fsdp::report::ActivationModeName(mode), " ",
                          largest.has_value()
                              ? absl::StrFormat("%.3g", static_cast<double>(
                                                            largest->estimate.num_params))
                              : std::string("none"));
        }
        std::printf("%s\n", line.c_str());
      }
    }
  }
  if (seq.width == 0) return absl::OkStatus();
  data.seq_len_model = fsdp::report::GptFamilyConfig(seq.width, seq.vocab, 0);
  data.seq_len_micro_batch = seq.micro_batch;
  const fsdp::GptConfig& m = data.seq_len_model;
  std::printf("longest sequence of layers=%d d_model=%d heads=%d vocab=%d micro_batch=%d within "
              "%s per rank, per activation mode:\n",
              m.layers, m.d_model, m.heads, m.vocab, seq.micro_batch,
              fsdp::FormatBytes(budget).c_str());
  for (Precision precision : sweep.precisions) {
    for (fsdp::proto::ShardingStrategy strategy : sweep.strategies) {
      for (int ranks : sweep.ranks) {
        std::string line = absl::StrFormat("  %-16s %-9s ranks=%-3d",
                                           fsdp::plan::ShardingStrategyName(strategy),
                                           fsdp::report::PrecisionName(precision), ranks);
        for (const ActivationMode& mode : BudgetModes()) {
          const MemoryPoint point = BudgetPoint(data.seq_len_model, mode, seq.micro_batch,
                                                strategy, ranks, precision);
          FSDP_ASSIGN_OR_RETURN(std::optional<fsdp::report::FittingSeqLen> longest,
                                fsdp::report::LargestFittingSeqLen(point, budget));
          fsdp::report::SeqLenFitRow fit;
          fit.strategy = strategy;
          fit.precision = precision;
          fit.ranks = ranks;
          fit.group_size = point.group_size;
          fit.mode = mode;
          fit.longest = longest;
          data.seq_len_fits.push_back(fit);
          absl::StrAppend(&line, " | ", fsdp::report::ActivationModeName(mode), " ",
                          longest.has_value() ? absl::StrCat(longest->seq_len)
                                              : std::string("none"));
        }
        std::printf("%s\n", line.c_str());
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> RunSweep() {
  FSDP_ASSIGN_OR_RETURN(SweepOptions sweep,
                        fsdp::report::SweepPreset(absl::GetFlag(FLAGS_preset)));
  FSDP_ASSIGN_OR_RETURN(sweep.strategies, ParseStrategies(absl::GetFlag(FLAGS_strategy)));
  FSDP_ASSIGN_OR_RETURN(sweep.precisions, ParsePrecisions(absl::GetFlag(FLAGS_precision)));
  FSDP_ASSIGN_OR_RETURN(sweep.modes, fsdp::report::ParseActivationModes(
                                         absl::GetFlag(FLAGS_activation_checkpointing),
                                         absl::GetFlag(FLAGS_attention)));
  if (!absl::GetFlag(FLAGS_ranks).empty()) {
    FSDP_ASSIGN_OR_RETURN(sweep.ranks, ParseIntList("ranks", absl::GetFlag(FLAGS_ranks)));
  }
  if (const std::string seq_lens = absl::GetFlag(FLAGS_seq_lens); seq_lens == "none") {
    sweep.seq_len_sweep.width = 0;
  } else if (!seq_lens.empty()) {
    FSDP_ASSIGN_OR_RETURN(sweep.seq_len_sweep.seq_lens, ParseIntList("seq_lens", seq_lens));
  }
  if (absl::GetFlag(FLAGS_steps) > 0) sweep.steps = absl::GetFlag(FLAGS_steps);
  FSDP_ASSIGN_OR_RETURN(sweep.measure_cap_bytes,
                        fsdp::report::ParseByteSize(absl::GetFlag(FLAGS_measure_cap)));
  FSDP_ASSIGN_OR_RETURN(const int64_t budget, BudgetFromFlag());
  FSDP_RETURN_IF_ERROR(NoiseScaleFromFlag().status());  // a bad value stops before any work
  const std::string out_dir = UserPath(absl::GetFlag(FLAGS_out_dir));
  if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::NotFoundError(
        absl::StrCat("cannot create --out_dir '", out_dir, "': ", std::strerror(errno)));
  }
  char scratch_template[] = "/tmp/memory_report.XXXXXX";
  if (mkdtemp(scratch_template) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  const std::string scratch_dir = scratch_template;

  ReportData data;
  data.title = fsdp::report::SweepDescription(sweep);
  data.budget_bytes = budget;
  ReportData seq_data;
  seq_data.title = fsdp::report::SeqLenSweepDescription(sweep);
  seq_data.budget_bytes = budget;
  std::vector<MemoryPoint> points = fsdp::report::SweepPoints(sweep);
  for (MemoryPoint& point : points) {
    point.group_size = GroupSizeFor(point.strategy, point.ranks);
  }
  std::vector<MemoryPoint> seq_points = fsdp::report::SeqLenSweepPoints(sweep);
  for (MemoryPoint& point : seq_points) {
    point.group_size = GroupSizeFor(point.strategy, point.ranks);
  }
  FSDP_ASSIGN_OR_RETURN(const std::vector<MemoryPoint> beyond,
                        PointsTowardTheBudget(seq_points, budget));
  seq_points.insert(seq_points.end(), beyond.begin(), beyond.end());
  const int total = static_cast<int>(points.size() + seq_points.size());
  std::printf("memory_report: %s; %zu points, and %zu of the %s -> %s\n", data.title.c_str(),
              points.size(), seq_points.size(), seq_data.title.c_str(), out_dir.c_str());
  std::fflush(stdout);
  int failures = 0, index = 0;
  MeasureLimits limits;
  limits.max_measured_width = sweep.max_measured_width;
  limits.measure_cap_bytes = sweep.measure_cap_bytes;
  limits.max_measured_rank_params = sweep.max_measured_rank_params;
  limits.steps = sweep.steps;
  data.rows = PredictAndMeasure(points, limits, scratch_dir, &index, total, &failures);
  MeasureLimits seq_limits = limits;
  seq_limits.max_measured_width = std::max(limits.max_measured_width, sweep.seq_len_sweep.width);
  seq_limits.max_measured_seq_len = sweep.seq_len_sweep.max_measured_seq_len;
  seq_data.rows = PredictAndMeasure(seq_points, seq_limits, scratch_dir, &index, total, &failures);
  rmdir(scratch_dir.c_str());

  int measured = 0, exact = 0;
  for (const std::vector<ReportRow>* rows : {&data.rows, &seq_data.rows}) {
    for (const ReportRow& row : *rows) {
      measured += row.measured.has_value() ? 1 : 0;
      exact += MeasuredEqualsPredicted(row) ? 1 : 0;
    }
  }
  std::printf("memory_report: %d of %d measured points equal their prediction to the byte, in "
              "the total and every category\n",
              exact, measured);

  if (budget > 0) {
    FSDP_RETURN_IF_ERROR(ComputeFits(sweep, budget, data));
    seq_data.seq_len_model = data.seq_len_model;
    seq_data.seq_len_micro_batch = data.seq_len_micro_batch;
    seq_data.seq_len_fits = data.seq_len_fits;
  }

  FSDP_RETURN_IF_ERROR(
      base::WriteFileAtomically(out_dir + "/memory.csv", fsdp::report::ReportCsv(data)));
  FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(out_dir + "/memory.md",
                                                          fsdp::report::ReportMarkdown(data)));
  for (Precision precision : sweep.precisions) {
    FSDP_RETURN_IF_ERROR(WritePlot(
        out_dir, absl::StrCat("memory_", fsdp::report::PrecisionName(precision)),
        [&](const std::string& png) {
          return fsdp::report::ReportGnuplotScript(data, precision, png);
        }));
  }
  std::string seq_outputs;
  if (!seq_points.empty()) {
    FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(out_dir + "/memory_seq_len.csv",
                                                            fsdp::report::ReportCsv(seq_data)));
    FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(
        out_dir + "/memory_seq_len.md", fsdp::report::ReportMarkdown(seq_data)));
    FSDP_RETURN_IF_ERROR(WritePlot(out_dir, "memory_seq_len", [&](const std::string& png) {
      return fsdp::report::SeqLenGnuplotScript(seq_data, png);
    }));
    seq_outputs = ", memory_seq_len.{csv,md,png}";
  }
  std::printf("memory_report: wrote %s/memory.csv, memory.md, memory_<precision>.png%s%s\n",
              out_dir.c_str(), seq_outputs.c_str(),
              failures > 0 ? absl::StrCat("; ", failures, " measurement(s) FAILED").c_str() : "");
  return failures > 0 ? 1 : 0;
}

// ---------------------------------------------------------------------------
// --predict_only: instant tables for any size and world.

// The model of --predict_only's shape flags: --model=gpt (--layers --d_model
// --heads --vocab --seq_len), --model=llama (also --kv_heads, --ffn_hidden)
// or a Llama 3 by name (only --seq_len may be given).
absl::StatusOr<MemoryPoint> ShapePointFromFlags() {
  const std::string model = absl::GetFlag(FLAGS_model);
  MemoryPoint point;
  const int layers = absl::GetFlag(FLAGS_layers), d_model = absl::GetFlag(FLAGS_d_model);
  const int heads = absl::GetFlag(FLAGS_heads), vocab = absl::GetFlag(FLAGS_vocab);
  const int kv_heads = absl::GetFlag(FLAGS_kv_heads), ffn_hidden = absl::GetFlag(FLAGS_ffn_hidden);
  const int seq_len = absl::GetFlag(FLAGS_seq_len);
  if (fsdp::report::IsLlama3ModelName(model)) {
    if (layers != 0 || d_model != 0 || heads != 0 || kv_heads != 0 || ffn_hidden != 0 ||
        vocab != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model=", model,
          " is Llama 3's published shape: drop --layers, --d_model, --heads, "
          "--kv_heads, --ffn_hidden and --vocab (--seq_len may be given), or give the shape with "
          "--model=llama"));
    }
    point.family = fsdp::report::ModelFamily::kLlama;
    FSDP_ASSIGN_OR_RETURN(
        point.llama,
        fsdp::report::Llama3Config(model, seq_len > 0 ? seq_len : fsdp::report::kLlama3SeqLen));
    return point;
  }
  absl::StatusOr<fsdp::report::ModelFamily> family = fsdp::report::ParseModelFamily(model);
  if (!family.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--model=", model, ": use gpt, llama or one of ",
                                                   fsdp::report::Llama3ModelNames()));
  }
  point.family = *family;
  if (layers == 0 || d_model == 0 || heads == 0 || vocab == 0 || seq_len == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--predict_only needs --params=COUNT, or a ", model,
        " shape: --layers --d_model "
        "--heads --vocab --seq_len (and --micro_batch, default 1)",
        point.family == fsdp::report::ModelFamily::kLlama
            ? ", with --kv_heads and --ffn_hidden optional"
            : absl::StrCat(", or a Llama 3 by name: --model=", fsdp::report::Llama3ModelNames())));
  }
  if (point.family == fsdp::report::ModelFamily::kGpt) {
    if (kv_heads != 0 || ffn_hidden != 0) {
      return absl::InvalidArgumentError(
          "--kv_heads and --ffn_hidden shape a Llama: add --model=llama, or drop them");
    }
    point.config.layers = layers;
    point.config.d_model = d_model;
    point.config.heads = heads;
    point.config.vocab = vocab;
    point.config.seq_len = seq_len;
    return point;
  }
  point.llama.layers = layers;
  point.llama.d_model = d_model;
  point.llama.heads = heads;
  point.llama.kv_heads = kv_heads > 0 ? kv_heads : heads;
  point.llama.ffn_hidden = ffn_hidden > 0 ? ffn_hidden : fsdp::LlamaDefaultFfnHidden(d_model);
  point.llama.vocab = vocab;
  point.llama.seq_len = seq_len;
  return point;
}

absl::Status PredictOnly() {
  FSDP_ASSIGN_OR_RETURN(const std::vector<fsdp::proto::ShardingStrategy> strategies,
                        ParseStrategies(absl::GetFlag(FLAGS_strategy)));
  FSDP_ASSIGN_OR_RETURN(const std::vector<Precision> precisions,
                        ParsePrecisions(absl::GetFlag(FLAGS_precision)));
  const std::string ranks_text =
      absl::GetFlag(FLAGS_ranks).empty() ? "1,8,64,1024" : absl::GetFlag(FLAGS_ranks);
  FSDP_ASSIGN_OR_RETURN(const std::vector<int> rank_counts, ParseIntList("ranks", ranks_text));
  FSDP_ASSIGN_OR_RETURN(const int64_t budget, BudgetFromFlag());
  FSDP_RETURN_IF_ERROR(NoiseScaleFromFlag().status());  // a bad value stops before any work
  const std::string params_text = absl::GetFlag(FLAGS_params);

  if (!params_text.empty() && absl::GetFlag(FLAGS_model) != "gpt") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--params counts parameters of no particular model; drop it to predict --model=",
        absl::GetFlag(FLAGS_model), " from its shape"));
  }
  if (!params_text.empty()) {
    if (absl::GetFlag(FLAGS_exact)) {
      return absl::InvalidArgumentError(
          "--exact needs a GPT shape (--layers --d_model --heads --vocab --seq_len), not "
          "--params: its buffers follow the model's tensors");
    }
    // By parameter count: the ZeRO paper's formulas, model state only.
    double psi_value = 0;
    if (!absl::SimpleAtod(params_text, &psi_value) || psi_value < 1 || psi_value > 4e18) {
      return absl::InvalidArgumentError(
          absl::StrCat("--params=", params_text, " is not a positive count like 7.5e9"));
    }
    const int64_t psi = static_cast<int64_t>(psi_value + 0.5);
    std::printf("model state per rank for %lld parameters, Adam (ZeRO formulas; GB = 1e9 B; "
                "activations need a shape: use --layers ... instead of --params)\n",
                static_cast<long long>(psi));
    std::printf("%-16s %-6s %7s %6s %20s %20s %20s %20s %12s%s\n", "strategy", "prec", "ranks",
                "group", "parameters B", "gradients B", "optimizer+master B", "model state B",
                "GB", budget > 0 ? "  fits budget" : "");
    for (Precision precision : precisions) {
      for (fsdp::proto::ShardingStrategy strategy : strategies) {
        for (int ranks : rank_counts) {
          const int group = GroupSizeFor(strategy, ranks);
          absl::StatusOr<fsdp::report::ModelStateBytes> state =
              fsdp::report::ZeroModelStateBytes(psi, strategy, ranks, group, precision,
                                                fsdp::plan::OptimizerKind::kAdam);
          if (!state.ok()) {
            std::printf("%-16s %-6s %7d: %s\n", fsdp::plan::ShardingStrategyName(strategy).c_str(),
                        fsdp::report::PrecisionName(precision), ranks,
                        std::string(state.status().message()).c_str());
            continue;
          }
          std::printf("%-16s %-6s %7d %6s %20lld %20lld %20lld %20lld %12.2f%s\n",
                      fsdp::plan::ShardingStrategyName(strategy).c_str(),
                      fsdp::report::PrecisionName(precision), ranks,
                      group > 0 ? absl::StrCat(group).c_str() : "-",
                      static_cast<long long>(state->parameter_bytes),
                      static_cast<long long>(state->gradient_bytes),
                      static_cast<long long>(state->optimizer_state_bytes),
                      static_cast<long long>(state->total_bytes()), state->total_bytes() / 1e9,
                      budget > 0 ? (state->total_bytes() <= budget ? "  yes" : "  no") : "");
        }
      }
    }
    return absl::OkStatus();
  }

  // By shape: the full estimate, through the shard planner.
  FSDP_ASSIGN_OR_RETURN(MemoryPoint base, ShapePointFromFlags());
  base.micro_batch = absl::GetFlag(FLAGS_micro_batch);
  FSDP_ASSIGN_OR_RETURN(const std::vector<ActivationMode> modes,
                        fsdp::report::ParseActivationModes(
                            absl::GetFlag(FLAGS_activation_checkpointing),
                            absl::GetFlag(FLAGS_attention)));
  FSDP_RETURN_IF_ERROR(fsdp::report::ApplyActivationMode(modes.front(), base));
  const int64_t num_params = fsdp::report::PointNumParams(base);
  std::printf(
      "per-rank peak for %s (%lld parameters, %.2fB) micro_batch=%d, Adam%s (GB = 1e9 "
      "B)\n",
      fsdp::report::PointModelToString(base).c_str(), static_cast<long long>(num_params),
      num_params / 1e9, base.micro_batch, absl::GetFlag(FLAGS_exact) ? ", --exact" : "");
  std::printf("%-16s %-6s %7s %6s %-13s %18s %16s %16s %16s %18s %10s %10s%s\n", "strategy",
              "prec", "ranks", "group", "activations", "model state B", "working B", "comm B",
              "activ+work B", "total B", "state GB", "total GB",
              budget > 0 ? "  fits budget" : "");
  for (Precision precision : precisions) {
    for (fsdp::proto::ShardingStrategy strategy : strategies) {
      for (int ranks : rank_counts) {
        for (const ActivationMode& mode : modes) {
          MemoryPoint point = base;
          point.strategy = strategy;
          point.ranks = ranks;
          point.group_size = GroupSizeFor(strategy, ranks);
          point.precision = precision;
          point.exact = absl::GetFlag(FLAGS_exact);
          FSDP_RETURN_IF_ERROR(fsdp::report::ApplyActivationMode(mode, point));
          absl::StatusOr<RankMemoryEstimate> e = fsdp::report::EstimateRankMemory(point);
          if (!e.ok()) {
            std::printf("%-16s %-6s %7d: %s\n", fsdp::plan::ShardingStrategyName(strategy).c_str(),
                        fsdp::report::PrecisionName(precision), ranks,
                        std::string(e.status().message()).c_str());
            continue;
          }
          std::printf("%-16s %-6s %7d %6s %-13s %18lld %16lld %16lld %16lld %18lld %10.2f "
                      "%10.2f%s\n",
                      fsdp::plan::ShardingStrategyName(strategy).c_str(),
                      fsdp::report::PrecisionName(precision), ranks,
                      point.group_size > 0 ? absl::StrCat(point.group_size).c_str() : "-",
                      fsdp::report::ActivationModeName(mode).c_str(),
                      static_cast<long long>(e->model_state_bytes()),
                      // working: units in flight and the fp32 gradient workspace
                      static_cast<long long>(e->gathered_bytes + e->grad_workspace_bytes),
                      static_cast<long long>(e->comm_buffer_bytes),
                      static_cast<long long>(e->activation_bytes + e->workspace_bytes),
                      static_cast<long long>(e->total_bytes()), e->model_state_bytes() / 1e9,
                      e->total_bytes() / 1e9,
                      budget > 0 ? (e->total_bytes() <= budget ? "  yes" : "  no") : "");
        }
      }
    }
  }
  if (budget > 0 && !strategies.empty()) {
    // The budget check's own words for the first configuration, as train_gpt
    // would print them.
    MemoryPoint point = base;
    point.strategy = strategies.front();
    point.ranks = rank_counts.front();
    point.group_size = GroupSizeFor(point.strategy, point.ranks);
    point.precision = precisions.front();
    fsdp::report::BatchScale batch;
    FSDP_ASSIGN_OR_RETURN(batch.noise_scale, NoiseScaleFromFlag());
    const absl::Status fits = fsdp::report::CheckFitsBudget(point, budget, batch);
    std::printf("budget check for %s: %s\n", fsdp::report::MemoryPointToString(point).c_str(),
                fits.ok() ? "fits" : std::string(fits.message()).c_str());
    // The other budget answer for this shape: how long a sequence fits.
    std::string longest = absl::StrCat("longest seq_len within ", fsdp::FormatBytes(budget),
                                       " for ", fsdp::plan::ShardingStrategyName(point.strategy),
                                       " on ", point.ranks,
                                       point.ranks == 1 ? " rank:" : " ranks:");
    for (const ActivationMode& mode : BudgetModes()) {
      MemoryPoint with_mode = point;
      if (!fsdp::report::ApplyActivationMode(mode, with_mode).ok()) continue;
      FSDP_ASSIGN_OR_RETURN(const std::optional<fsdp::report::FittingSeqLen> fit,
                            fsdp::report::LargestFittingSeqLen(with_mode, budget));
      absl::StrAppend(&longest, " ", fsdp::report::ActivationModeName(mode), " ",
                      fit.has_value() ? absl::StrCat(fit->seq_len) : std::string("none"),
                      fit.has_value() && fit->at_search_limit ? "+" : "");
    }
    std::printf("%s\n", longest.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::SetProgramUsageMessage(
      "Per-rank memory against model size, predicted and measured; see docs/memory.md.\n"
      "  memory_report [--preset=small|full] [--out_dir=DIR] [--mem_budget=2GiB]\n"
      "  memory_report --predict_only --params=7.5e9 --ranks=1,64,1024 --precision=mixed");
  absl::ParseCommandLine(argc, argv);
  if (comm::IsLaunchedRank()) {
    const absl::Status status = RunMeasuringRank();
    if (!status.ok()) {
      std::fprintf(stderr, "memory_report rank: %s\n", std::string(status.message()).c_str());
      return 1;
    }
    return 0;
  }
  if (absl::GetFlag(FLAGS_model) != "gpt" && !absl::GetFlag(FLAGS_predict_only)) {
    std::fprintf(stderr,
                 "memory_report: --model=%s is predicted only (add --predict_only); the sweep "
                 "trains and measures the GPT family, whose widths it scans\n",
                 absl::GetFlag(FLAGS_model).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_exact) && !absl::GetFlag(FLAGS_predict_only)) {
    std::fprintf(stderr, "memory_report: --exact is predicted only for now (add --predict_only "
                         "and a GPT shape); the measured sweep does not run it yet\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_predict_only)) {
    const absl::Status status = PredictOnly();
    if (!status.ok()) {
      std::fprintf(stderr, "memory_report: %s\n", std::string(status.message()).c_str());
      return 2;
    }
    return 0;
  }
  const absl::StatusOr<int> result = RunSweep();
  if (!result.ok()) {
    std::fprintf(stderr, "memory_report: %s\n", std::string(result.status().message()).c_str());
    return result.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return *result;
}
