// File: examples/plan_report.cc
//
// How fast, how big and how much lost to failures, per strategy, rank count
// and hybrid group size, for a GPT on a described cluster, without running
// anything (docs/planning.md):
//
//   bazel run -c opt //examples:plan_report -- --layers=4 --d_model=256 --ranks=1,2,4
//   bazel run -c opt //examples:plan_report --
//       --cluster=fsdp/plan/clusters/h100_nvlink_ib400.textproto
//       --layers=32 --d_model=4096 --heads=32 --vocab=128256 --seq_len=8192 --micro_batch=1
//       --precision=bf16 --ranks=64,512 --strategies=full_shard,hybrid_shard --csv=/tmp/plan.csv
//   (one command, written over four lines)
//
// The model flags are train_gpt's (same names, same defaults). Per row: the
// predicted step time (fsdp/plan/step_time_model.h), tokens per second over
// all ranks, MFU (the model's product FLOPs per second over the ranks' peak:
// the description's largest product rate for the dtype), the predicted peak
// bytes per rank (fsdp/report/memory_estimate.h, what the runtime's tracker
// measures), the exposed communication, and goodput:
//
// [Note: goodput] (fsdp/plan/goodput.h): Young/Daly's checkpoint interval
// and the fraction of wall time that trains. The failure rate defaults to
// Llama 3's (Dubey et al. 2024, "The Llama 3 Herd of Models", section
// 3.3.4): 466 job interruptions in 54 days on 16,384 GPUs in 2,048 nodes of
// 8, i.e. 466 / (54 x 24 x 2048) = 1.76e-4 per node-hour. The save and
// restart costs come from the description's checkpoint_cost (measured; the
// state is 12 bytes per parameter, fp32 master and Adam's two moments,
// split evenly over the ranks) when it has one and neither
// --checkpoint_save_s nor --restart_s is given; otherwise from those flags
// (defaults 60 s and 600 s: assumptions, not measurements). Goodput
// multiplies nothing in the other columns: tokens_per_s is while training.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
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
#include "absl/strings/strip.h"
#include "base/atomic_file.h"
#include "base/gnuplot.h"
#include "base/posix_file.h"
#include "base/status_macros.h"
#include "fsdp/optim/gradient_noise_scale.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/plan/framework_kernels.h"
#include "fsdp/plan/goodput.h"
#include "fsdp/plan/gpt_step_prediction.h"
#include "fsdp/plan/memory_model.h"
#include "fsdp/plan/hardware_description.h"
#include "fsdp/plan/shard_planner.h"
#include "fsdp/plan/sharding_strategy.h"
#include "fsdp/plan/step_time_model.h"
#include "fsdp/report/memory_estimate.h"

ABSL_FLAG(std::string, model, "",
          "a preset's dimensions (gpt3-175b, llama3-8b, llama3-70b, llama3-405b; "
          "fsdp/plan/gpt_step_prediction.h); model flags given as well override them");
ABSL_FLAG(int, layers, 2, "transformer blocks (train_gpt's flag)");
ABSL_FLAG(int, d_model, 64, "width (train_gpt's flag)");
ABSL_FLAG(int, heads, 4, "attention heads (train_gpt's flag)");
ABSL_FLAG(int, vocab, 64, "vocabulary size (train_gpt's flag)");
ABSL_FLAG(int, seq_len, 64, "tokens per sequence (train_gpt's flag)");
ABSL_FLAG(int, micro_batch, 8, "sequences per rank per micro-batch (train_gpt's flag)");
ABSL_FLAG(int, accum, 1, "micro-batches per optimizer step (train_gpt's flag)");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32, or bf16 (train_gpt's --precision=bf16 with its default --reduce_dtype=bf16)");
ABSL_FLAG(std::string, activation_checkpointing, "none",
          "train_gpt's flag: none, all or every:K (recomputed forwards are added to the step)");
ABSL_FLAG(std::string, attention, "standard", "train_gpt's flag: standard or flash");
ABSL_FLAG(std::string, kernels, "this_runtime",
          "whose element-wise kernels the run pays (fsdp/plan/framework_kernels.h): "
          "this_runtime (this framework's own count), pytorch_eager (one kernel per PyTorch "
          "op: torchtitan without torch.compile) or fused (one kernel per chain between "
          "products: torch.compile, Megatron-LM); counted on a preset's original block");
ABSL_FLAG(std::string, ranks, "1,2,4", "comma-separated rank counts");
ABSL_FLAG(std::string, strategies, "no_shard,shard_optimizer,shard_grad_op,full_shard,hybrid_shard",
          "comma-separated strategies; hybrid_shard gives one row per group size that divides "
          "the rank count (strictly between 1 and it)");
ABSL_FLAG(std::string, cluster, "fsdp/plan/clusters/this_machine.textproto",
          "cluster description (proto/hardware.proto, text format); relative paths are from "
          "the workspace under bazel run");
ABSL_FLAG(std::string, csv, "", "also write the rows to this CSV file");
ABSL_FLAG(std::string, plot, "",
          "also draw step time and tokens/s against ranks per strategy into this PNG (gnuplot; "
          "the script beside it as FILE.gp)");
ABSL_FLAG(int, prefetch_depth, 1, "train_gpt's --prefetch_depth");
ABSL_FLAG(int, max_gathers_in_flight, 2, "train_gpt's --max_gathers_in_flight");
ABSL_FLAG(double, grad_clip, 1.0, "train_gpt's --grad_clip (0: no norm exchange)");
ABSL_FLAG(double, failures_per_node_hour, 466.0 / (54 * 24 * 2048),
          "failures per node per hour (default: Llama 3's 466 interruptions in 54 days on "
          "2,048 nodes)");
ABSL_FLAG(double, noise_scale, 0,
          "the gradient noise scale a run of this model measured, in sequences (train_gpt's "
          "closing line or its metrics' gradient_noise_scale; docs/batch-size.md); 0: unknown. "
          "A recommendation whose global batch is above it says so");
ABSL_FLAG(double, checkpoint_save_s, 60, "seconds one checkpoint save stops training");
ABSL_FLAG(double, restart_s, 600, "seconds to restart and reload after a failure");

namespace {

struct Options {
  fsdp::GptConfig config;
  int micro_batch = 0;
  int accum = 1;
  bool bf16 = false;
  std::vector<int> ranks;
  std::vector<fsdp::proto::ShardingStrategy> strategies;
  std::string cluster;
  std::string csv;
  std::string plot;
  std::string preset_note;  // the preset's source and approximation, or empty
  fsdp::plan::KernelSoftware kernels = fsdp::plan::KernelSoftware::kThisRuntime;
  std::string kernels_name;  // as given
  // The block another framework's kernels run on: a preset's original when
  // neither --d_model nor --heads overrides it; width 0 (the GPT of
  // `config`) otherwise.
  fsdp::plan::BlockDimensions framework_block;
};

struct Row {
  std::string strategy;
  int ranks = 0;
  int group_size = 0;
  fsdp::plan::StepTimePrediction step;
  double tokens_per_s = 0;
  double mfu = 0;
  int64_t peak_bytes = 0;
  bool fits = false;  // peak_bytes within the rank's share of its processor's memory
  fsdp::plan::CheckpointCosts costs;
  double checkpoint_interval_s = 0;
  double goodput = 0;
};

std::string Resolve(const std::string& path) {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (path.empty() || path[0] == '/' || workspace == nullptr) return path;
  return absl::StrCat(workspace, "/", path);
}

// The flags named on the command line (absl keeps that to itself).
std::set<std::string>& GivenFlags() {
  static auto* given = new std::set<std::string>;
  return *given;
}

void RecordGivenFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) continue;
    GivenFlags().insert(std::string(arg.substr(0, arg.find('='))));
  }
}

bool Given(const std::string& flag) { return GivenFlags().count(flag) > 0; }

// A preset's dimensions, each replaced by its flag when that is given.
absl::Status SetDimensions(Options& o) {
  o.config.layers = absl::GetFlag(FLAGS_layers);
  o.config.d_model = absl::GetFlag(FLAGS_d_model);
  o.config.heads = absl::GetFlag(FLAGS_heads);
  o.config.vocab = absl::GetFlag(FLAGS_vocab);
  o.config.seq_len = absl::GetFlag(FLAGS_seq_len);
  const std::string name = absl::GetFlag(FLAGS_model);
  if (name.empty()) return absl::OkStatus();
  FSDP_ASSIGN_OR_RETURN(const fsdp::plan::GptPreset preset, fsdp::plan::FindGptPreset(name));
  if (!Given("layers")) o.config.layers = preset.config.layers;
  if (!Given("d_model")) o.config.d_model = preset.config.d_model;
  if (!Given("heads")) o.config.heads = preset.config.heads;
  if (!Given("vocab")) o.config.vocab = preset.config.vocab;
  if (!Given("seq_len")) o.config.seq_len = preset.config.seq_len;
  if (!Given("d_model") && !Given("heads")) o.framework_block = preset.block;
  o.preset_note = absl::StrCat("# model ", preset.name, ": ", preset.source,
                               preset.approximation.empty() ? "" : "; here ",
                               preset.approximation, "\n");
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseOptions() {
  Options o;
  FSDP_RETURN_IF_ERROR(SetDimensions(o));
  FSDP_ASSIGN_OR_RETURN(const fsdp::ActivationCheckpointing checkpointing,
                        fsdp::ParseActivationCheckpointing(
                            absl::GetFlag(FLAGS_activation_checkpointing), o.config.layers));
  o.config.activation_checkpoint_every = checkpointing.checkpoint_every();
  const std::string attention = absl::GetFlag(FLAGS_attention);
  if (attention != "standard" && attention != "flash") {
    return absl::InvalidArgumentError(
        absl::StrCat("--attention=", attention, ": valid are standard and flash"));
  }
  o.config.flash_attention = attention == "flash";
  FSDP_RETURN_IF_ERROR(fsdp::ValidateGptConfig(o.config));
  o.micro_batch = absl::GetFlag(FLAGS_micro_batch);
  o.accum = absl::GetFlag(FLAGS_accum);
  if (o.micro_batch < 1 || o.accum < 1) {
    return absl::InvalidArgumentError("--micro_batch and --accum must be at least 1");
  }
  FSDP_RETURN_IF_ERROR(fsdp::ValidateNoiseScaleFlag(absl::GetFlag(FLAGS_noise_scale)));
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "fp32" && precision != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--precision=", precision, ": valid are fp32 and bf16"));
  }
  o.bf16 = precision == "bf16";
  o.kernels_name = absl::GetFlag(FLAGS_kernels);
  if (o.kernels_name == "pytorch_eager") {
    o.kernels = fsdp::plan::KernelSoftware::kPyTorchEager;
  } else if (o.kernels_name == "fused") {
    o.kernels = fsdp::plan::KernelSoftware::kFused;
  } else if (o.kernels_name != "this_runtime") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kernels=", o.kernels_name, ": valid are this_runtime, pytorch_eager and fused"));
  }
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ranks: '", text, "' is not a rank count (a positive integer)"));
    }
    o.ranks.push_back(n);
  }
  if (o.ranks.empty()) return absl::InvalidArgumentError("--ranks is empty");
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_strategies), ',', absl::SkipEmpty())) {
    FSDP_ASSIGN_OR_RETURN(fsdp::proto::ShardingStrategy s, fsdp::plan::ParseShardingStrategy(name));
    o.strategies.push_back(s);
  }
  if (o.strategies.empty()) return absl::InvalidArgumentError("--strategies is empty");
  if (absl::GetFlag(FLAGS_failures_per_node_hour) < 0 || absl::GetFlag(FLAGS_checkpoint_save_s) <= 0 ||
      absl::GetFlag(FLAGS_restart_s) < 0) {
    return absl::InvalidArgumentError(
        "--failures_per_node_hour and --restart_s must be >= 0, --checkpoint_save_s > 0");
  }
  o.cluster = Resolve(absl::GetFlag(FLAGS_cluster));
  o.csv = Resolve(absl::GetFlag(FLAGS_csv));
  o.plot = Resolve(absl::GetFlag(FLAGS_plot));
  return o;
}

// The save and restart costs ([Note: goodput] above) for `ranks` ranks.
fsdp::plan::CheckpointCosts CostsFor(const Options& o, const fsdp::proto::HardwareDescription& hw,
                                     int ranks) {
  fsdp::plan::CheckpointCosts costs;
  costs.save_s = absl::GetFlag(FLAGS_checkpoint_save_s);
  costs.restart_s = absl::GetFlag(FLAGS_restart_s);
  if (!hw.has_checkpoint_cost() || Given("checkpoint_save_s") || Given("restart_s")) return costs;
  const double state_bytes =
      static_cast<double>(fsdp::GptNumParams(o.config)) * 4 *
      (1 + fsdp::plan::OptimizerStatesPerParam(fsdp::plan::OptimizerKind::kAdam));
  return fsdp::plan::CheckpointCostsFor(hw.checkpoint_cost(), state_bytes / ranks);
}

absl::StatusOr<Row> Predict(const Options& o, const fsdp::proto::HardwareDescription& hw,
                            fsdp::proto::ShardingStrategy strategy, int ranks, int group_size) {
  fsdp::plan::GptRun run;
  run.config = o.config;
  run.micro_batch = o.micro_batch;
  run.accum = o.accum;
  run.bf16 = o.bf16;
  run.strategy = strategy;
  run.ranks = ranks;
  run.group_size = group_size;
  run.prefetch_depth = absl::GetFlag(FLAGS_prefetch_depth);
  run.max_gathers_in_flight = absl::GetFlag(FLAGS_max_gathers_in_flight);
  run.grad_clip = absl::GetFlag(FLAGS_grad_clip) > 0;
  run.kernels = o.kernels;
  run.framework_block = o.framework_block;
  FSDP_ASSIGN_OR_RETURN(const fsdp::plan::GptStepPrediction prediction,
                        fsdp::plan::PredictGptStep(run, hw));
  Row row;
  row.strategy = fsdp::plan::ShardingStrategyName(strategy);
  row.ranks = ranks;
  row.group_size = group_size;
  row.step = prediction.step;
  row.tokens_per_s = prediction.tokens_per_s;
  row.mfu = prediction.mfu;

  fsdp::report::MemoryPoint point;
  point.config = o.config;
  point.micro_batch = o.micro_batch;
  point.strategy = strategy;
  point.ranks = ranks;
  point.group_size = group_size;
  point.precision = o.bf16 ? fsdp::report::Precision::kMixed : fsdp::report::Precision::kFp32;
  point.prefetch_depth = run.prefetch_depth;
  FSDP_ASSIGN_OR_RETURN(fsdp::report::RankMemoryEstimate memory,
                        fsdp::report::EstimateRankMemory(point));
  row.peak_bytes = memory.total_bytes();
  row.fits = row.peak_bytes <= hw.memory_bytes_per_processor() * row.step.rank_share;
  const int nodes = (ranks + hw.ranks_per_node() - 1) / hw.ranks_per_node();
  row.costs = CostsFor(o, hw, ranks);
  const fsdp::plan::Goodput goodput = fsdp::plan::YoungDalyGoodput(
      row.step.step_s, nodes, absl::GetFlag(FLAGS_failures_per_node_hour), row.costs);
  row.goodput = goodput.fraction;
  row.checkpoint_interval_s = goodput.interval_s;
  return row;
}

std::string CsvText(const std::vector<Row>& rows) {
  std::string text =
      "strategy,ranks,group_size,step_s,tokens_per_s,mfu,peak_bytes,fits,goodput,compute_s,"
      "optimizer_s,exposed_comm_s,comm_s,straggler_s,checkpoint_interval_s,save_s,restart_s,"
      "contention_s\n";
  for (const Row& r : rows) {
    absl::StrAppendFormat(&text, "%s,%d,%d,%.6g,%.6g,%.4f,%lld,%d,%.4f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n",
                          r.strategy, r.ranks, r.group_size, r.step.step_s, r.tokens_per_s, r.mfu,
                          static_cast<long long>(r.peak_bytes), r.fits ? 1 : 0, r.goodput, r.step.compute_s,
                          r.step.optimizer_s, r.step.exposed_comm_s, r.step.comm_s,
                          r.step.straggler_s, r.checkpoint_interval_s, r.costs.save_s,
                          r.costs.restart_s, r.step.contention_s);
  }
  return text;
}

std::string Configuration(const Row& r) {
  return absl::StrCat(r.strategy, r.group_size > 0 ? absl::StrCat(" in groups of ", r.group_size)
                                                   : "");
}

double UsefulTokensPerSecond(const Row& r) { return r.tokens_per_s * r.goodput; }

// [Note: the recommendation] At each rank count, among the configurations
// that fit: those within 2% of the most useful tokens/s (tokens/s x
// goodput; 2% is below what the model can tell apart), and of those the one
// with the least memory per rank (the most headroom). The reason printed
// with it: what it was chosen over, by how much, and what sets the gap
// (exposed communication, or compute, optimizer and stragglers), and which
// faster configurations do not fit. Empty when nothing fits at `ranks`.
std::string Recommendation(const std::vector<Row>& rows, int ranks,
                           const fsdp::proto::HardwareDescription& hw) {
  std::vector<const Row*> fitting;
  for (const Row& r : rows) {
    if (r.ranks == ranks && r.fits) fitting.push_back(&r);
  }
  if (fitting.empty()) return "";
  std::stable_sort(fitting.begin(), fitting.end(), [](const Row* a, const Row* b) {
    return UsefulTokensPerSecond(*a) > UsefulTokensPerSecond(*b);
  });
  const Row& fastest = *fitting[0];
  const Row* chosen = &fastest;
  int near = 0;
  for (const Row* r : fitting) {
    if (UsefulTokensPerSecond(*r) < 0.98 * UsefulTokensPerSecond(fastest)) break;
    ++near;
    if (r->peak_bytes < chosen->peak_bytes) chosen = r;
  }
  std::string text = absl::StrFormat(
      "# recommended at %d ranks: %s, %.0f useful tokens/s (%.0f x goodput %.3f), %.1f MiB per "
      "rank. Why: ",
      ranks, Configuration(*chosen), UsefulTokensPerSecond(*chosen), chosen->tokens_per_s,
      chosen->goodput, chosen->peak_bytes / 1048576.0);
  if (fitting.size() == 1) {
    absl::StrAppend(&text, "the only configuration that fits");
  } else if (near > 1) {
    absl::StrAppendFormat(&text,
                          "%d configurations that fit are within 2%% of the fastest (%s, %.0f); "
                          "of those it needs the least memory",
                          near, Configuration(fastest), UsefulTokensPerSecond(fastest));
  } else {
    const Row& next = *fitting[1];
    const double gap = 1 - UsefulTokensPerSecond(next) / UsefulTokensPerSecond(fastest);
    const double exposed_gap = next.step.exposed_comm_s - fastest.step.exposed_comm_s;
    const double step_gap = next.step.step_s - fastest.step.step_s;
    absl::StrAppendFormat(&text, "the fastest that fits; the next, %s, is %.1f%% slower",
                          Configuration(next), 100 * gap);
    if (step_gap > 0 && exposed_gap >= 0.5 * step_gap) {
      absl::StrAppendFormat(&text, ", mostly exposed communication (%.1f ms against %.1f)",
                            next.step.exposed_comm_s * 1e3, fastest.step.exposed_comm_s * 1e3);
    } else if (step_gap > 0) {
      absl::StrAppendFormat(&text,
                            ", mostly compute, optimizer and stragglers (%.1f ms of its %.1f ms "
                            "step against %.1f of %.1f)",
                            (next.step.step_s - next.step.exposed_comm_s) * 1e3,
                            next.step.step_s * 1e3,
                            (fastest.step.step_s - fastest.step.exposed_comm_s) * 1e3,
                            fastest.step.step_s * 1e3);
    } else {
      absl::StrAppend(&text, ", by goodput (its larger job fails more often)");
    }
  }
  for (const Row& r : rows) {
    if (r.ranks == ranks && !r.fits &&
        UsefulTokensPerSecond(r) > UsefulTokensPerSecond(fastest)) {
      absl::StrAppendFormat(&text, "; faster but not fitting: %s (%.1f MiB of %.1f)",
                            Configuration(r), r.peak_bytes / 1048576.0,
                            hw.memory_bytes_per_processor() * r.step.rank_share / 1048576.0);
    }
  }
  return text;
}

std::string PlotTitle(const Options& o, const fsdp::proto::HardwareDescription& hw) {
  return absl::StrCat(fsdp::GptConfigToString(o.config), " micro_batch=", o.micro_batch,
                      " ", o.bf16 ? "bf16" : "fp32", " on ", hw.name());
}

// [Note: the plot] Two panels against the rank count (log scale): step time
// and tokens/s, one line per strategy; hybrid_shard as its best group size
// at each rank count. Rows that do not fit are drawn too (open points).
absl::Status DrawPlot(const std::vector<Row>& rows, const std::string& png,
                      const std::string& title) {
  FSDP_RETURN_IF_ERROR(base::CheckGnuplotText(title, "the plot's title"));
  std::vector<std::string> strategies;
  for (const Row& r : rows) {
    if (std::find(strategies.begin(), strategies.end(), r.strategy) == strategies.end()) {
      strategies.push_back(r.strategy);
    }
  }
  std::string data;
  for (size_t i = 0; i < strategies.size(); ++i) {
    absl::StrAppend(&data, "$s", i, " << EOD\n");
    std::vector<const Row*> best_per_count;
    for (const Row& r : rows) {
      if (r.strategy != strategies[i]) continue;
      auto same = std::find_if(best_per_count.begin(), best_per_count.end(),
                               [&](const Row* b) { return b->ranks == r.ranks; });
      if (same == best_per_count.end()) {
        best_per_count.push_back(&r);
      } else if (r.tokens_per_s > (*same)->tokens_per_s) {
        *same = &r;
      }
    }
    for (const Row* r : best_per_count) {
      absl::StrAppendFormat(&data, "%d %.9g %.9g %d\n", r->ranks, r->step.step_s,
                            r->tokens_per_s, r->fits ? 1 : 0);
    }
    absl::StrAppend(&data, "EOD\n");
  }
  base::GnuplotPlot plot;
  plot.png_path = png;
  plot.script_path = png + ".gp";
  return base::DrawWithGnuplot(plot, [&](const std::string& output) {
    std::string script = data;
    absl::StrAppend(&script, "set terminal pngcairo size 1200,500\n",
                    "set output ", base::GnuplotQuoted(output), "\n",
                    "set multiplot layout 1,2 title ", base::GnuplotQuoted(title), "\n",
                    "set logscale x 2\nset xlabel 'ranks'\nset grid\nset key top left\n");
    for (const auto& [column, label] :
         std::vector<std::pair<int, std::string>>{{2, "step time (s)"}, {3, "tokens/s"}}) {
      absl::StrAppend(&script, "set ylabel ", base::GnuplotQuoted(label), "\nplot ");
      for (size_t i = 0; i < strategies.size(); ++i) {
        absl::StrAppendFormat(&script,
                              "%s$s%d using 1:%d with linespoints lw 2 title %s", i ? ", " : "",
                              i, column, base::GnuplotQuoted(strategies[i]));
      }
      absl::StrAppend(&script, "\n");
    }
    absl::StrAppend(&script, "unset multiplot\n");
    return script;
  });
}

absl::Status Run() {
  FSDP_ASSIGN_OR_RETURN(const Options o, ParseOptions());
  FSDP_ASSIGN_OR_RETURN(std::string text, base::ReadWholeFile(o.cluster));
  FSDP_ASSIGN_OR_RETURN(const fsdp::proto::HardwareDescription hw,
                        fsdp::plan::ParseHardwareDescription(text, o.cluster));
  std::printf("# plan_report: %s micro_batch=%d accum=%d precision=%s, %lld parameters, "
              "cluster %s (%s), kernels %s\n",
              fsdp::GptConfigToString(o.config).c_str(), o.micro_batch, o.accum,
              o.bf16 ? "bf16" : "fp32", static_cast<long long>(fsdp::GptNumParams(o.config)),
              hw.name().c_str(), o.cluster.c_str(), o.kernels_name.c_str());
  std::printf("%s", o.preset_note.c_str());
  std::vector<Row> rows;
  for (int ranks : o.ranks) {
    for (fsdp::proto::ShardingStrategy strategy : o.strategies) {
      std::vector<int> group_sizes = {0};
      if (strategy == fsdp::proto::HYBRID_SHARD) {
        group_sizes.clear();
        for (int g = 2; g < ranks; ++g) {
          if (ranks % g == 0) group_sizes.push_back(g);
        }
      }
      for (int g : group_sizes) {
        FSDP_ASSIGN_OR_RETURN(Row row, Predict(o, hw, strategy, ranks, g));
        rows.push_back(row);
      }
    }
  }
  std::printf("%-16s %6s %6s %10s %12s %6s %12s %4s %10s %10s %8s %10s\n", "strategy", "ranks",
              "group", "step_ms", "tokens/s", "mfu", "peak_MiB", "fits", "exposed_ms",
              "straggl_ms", "goodput", "ckpt_steps");
  const Row* smallest = nullptr;
  bool any_fits = false;
  for (const Row& r : rows) {
    std::printf("%-16s %6d %6d %10.2f %12.0f %6.3f %12.1f %4s %10.2f %10.2f %8.4f %10.0f\n",
                r.strategy.c_str(), r.ranks, r.group_size, r.step.step_s * 1e3, r.tokens_per_s,
                r.mfu, r.peak_bytes / 1048576.0, r.fits ? "yes" : "no",
                r.step.exposed_comm_s * 1e3, r.step.straggler_s * 1e3, r.goodput,
                std::ceil(r.checkpoint_interval_s / r.step.step_s));
    if (smallest == nullptr || r.peak_bytes < smallest->peak_bytes) smallest = &r;
    any_fits = any_fits || r.fits;
  }
  const double noise_scale = absl::GetFlag(FLAGS_noise_scale);
  for (int ranks : o.ranks) {
    const std::string text = Recommendation(rows, ranks, hw);
    if (text.empty()) continue;
    std::printf("%s\n", text.c_str());
    const int64_t global_batch = int64_t{o.micro_batch} * o.accum * ranks;
    if (fsdp::BeyondNoiseScale(global_batch, noise_scale)) {
      std::printf(
          "#   its global batch, %lld sequences, is above the measured gradient noise scale "
          "(%.0f): past it a larger batch cuts the steps to a given loss by less than it adds "
          "to each (docs/batch-size.md); the added ranks buy less training than tokens/s\n",
          static_cast<long long>(global_batch), noise_scale);
    }
  }
  if (!o.plot.empty()) {
    FSDP_RETURN_IF_ERROR(DrawPlot(rows, o.plot, PlotTitle(o, hw)));
    std::printf("# plotted %s (script %s.gp)\n", o.plot.c_str(), o.plot.c_str());
  }
  if (!o.csv.empty()) {
    FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(o.csv, CsvText(rows)));
    std::printf("# wrote %s\n", o.csv.c_str());
  }
  if (!any_fits && smallest != nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "no configuration fits: the smallest, %s at %d ranks%s, needs %.1f MiB per rank, "
        "above the %.1f MiB a rank has (memory_bytes_per_processor %.4g of %s, x %.3g "
        "processors per rank); add ranks, shard more (full_shard), or shorten micro_batch or "
        "seq_len",
        smallest->strategy, smallest->ranks,
        smallest->group_size > 0 ? absl::StrCat(" in groups of ", smallest->group_size) : "",
        smallest->peak_bytes / 1048576.0,
        hw.memory_bytes_per_processor() * smallest->step.rank_share / 1048576.0,
        hw.memory_bytes_per_processor(), hw.name(), smallest->step.rank_share));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Predicted step time, tokens/s, MFU, memory and goodput per strategy:\n"
      "  bazel run -c opt //examples:plan_report -- --layers=4 --d_model=256 --ranks=1,2,4");
  RecordGivenFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "plan_report: %s\n", status.message().data());
    return 1;
  }
  return 0;
}
