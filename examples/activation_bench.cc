// File: examples/activation_bench.cc
//
// What activation checkpointing and flash attention buy (issue 12's
// benchmark, docs/memory.md):
//
//   bazel run -c opt //examples:activation_bench
//   bazel run -c opt //examples:activation_bench -- --modes=none,all --steps=3 --no_seq_search
//
// 1. Prints the CPU and the kernels the matrix products run.
// 2. Runs one job per mode (--modes: none, every:K, all, each optionally
//    +flash, or flash alone) with --strategy at --nproc ranks x 1 thread (the
//    binary re-launches itself through comm/launcher) and prints, per mode:
//    the activation peak the model predicts (GptActivationBytesByUnit) and
//    the one the ranks' trackers measured (largest over ranks), the
//    workspace, the whole tracked peak per rank against its prediction
//    (fsdp/report/memory_estimate.h), and the step time over the steps after
//    the first, each against mode none's.
// 3. Unless --no_seq_search: for none and for all+flash, the largest
//    seq_len (a multiple of --seq_step) whose predicted per-rank peak fits
//    --seq_budget, then trains --seq_steps steps at that seq_len with the
//    budget enforced by every rank's tracker (an allocation past it fails the
//    job), so "fits" is measured, not only predicted.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/launcher/crash_trace.h"
#include "comm/launcher/launcher.h"
#include "examples/training_job.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/models/gpt_config.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/report/budget.h"
#include "fsdp/report/byte_size.h"
#include "fsdp/report/memory_estimate.h"
#include "fsdp/run/train_options.h"
#include "fsdp/run/train_run.h"
#include "fsdp/plan/strategy.h"

ABSL_FLAG(int, nproc, 2, "ranks per job (1 compute thread each)");
ABSL_FLAG(int, steps, 4, "optimizer steps per job; the first is not timed");
ABSL_FLAG(std::string, modes, "none,every:2,all,flash,all+flash",
          "comma-separated: none, every:K, all, flash, or a checkpointing mode +flash");
ABSL_FLAG(std::string, strategy, "full_shard", "sharding strategy of every job");
ABSL_FLAG(std::string, matmul_backend, "default",
          "default, onednn, openblas or auto (as train_gpt)");
ABSL_FLAG(int, layers, 8, "model layers");
ABSL_FLAG(int, d_model, 512, "model width");
ABSL_FLAG(int, heads, 8, "attention heads");
ABSL_FLAG(int, vocab, 8192, "vocabulary");
ABSL_FLAG(int, seq_len, 256, "sequence length of the mode table");
ABSL_FLAG(int, micro_batch, 4, "sequences per rank per step");
ABSL_FLAG(bool, no_seq_search, false, "skip the largest-seq_len part");
ABSL_FLAG(std::string, seq_budget, "2GiB", "per-rank budget of the largest-seq_len part");
ABSL_FLAG(int, seq_step, 128, "the seq_len search's granularity");
ABSL_FLAG(int, seq_steps, 2, "steps trained at the largest seq_len (>= 1)");
ABSL_FLAG(std::string, bench_rank_config, "", "internal: set on launched ranks");

namespace {

struct Mode {
  std::string name;                               // as given
  fsdp::ActivationCheckpointing checkpointing;    // none, all, every:K
  std::string attention;                          // standard, flash
};

absl::StatusOr<Mode> ParseMode(absl::string_view text, int layers) {
  Mode m{std::string(text), {}, "standard"};
  absl::string_view rest = text;
  if (rest == "flash") {
    m.attention = "flash";
    return m;
  }
  if (absl::ConsumeSuffix(&rest, "+flash")) m.attention = "flash";
  FSDP_ASSIGN_OR_RETURN(m.checkpointing, fsdp::ParseActivationCheckpointing(rest, layers));
  return m;
}

fsdp::TrainOptions JobOptions(const Mode& mode, int seq_len, int64_t budget, int steps) {
  fsdp::TrainOptions o;
  o.layers = absl::GetFlag(FLAGS_layers);
  o.d_model = absl::GetFlag(FLAGS_d_model);
  o.heads = absl::GetFlag(FLAGS_heads);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.seq_len = seq_len;
  o.micro_batch = absl::GetFlag(FLAGS_micro_batch);
  o.steps = steps;
  o.warmup_steps = 1;
  o.threads = 1;
  // main checked the flag before launching any job.
  o.matmul_backend = *fsdp::ParseMatmulBackendChoice(absl::GetFlag(FLAGS_matmul_backend));
  o.nproc = absl::GetFlag(FLAGS_nproc);
  o.sharding.strategy = *fsdp::ParseStrategy(absl::GetFlag(FLAGS_strategy));
  o.activation_checkpointing = mode.checkpointing;
  o.attention = mode.attention == "flash" ? fsdp::Attention::kFlash : fsdp::Attention::kStandard;
  o.mem_budget_bytes = budget;
  return o;
}

std::string ScratchPath(const std::string& what) {
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/activation_bench_", getpid(), "_", what);
}

// A launched rank: "<mode>,<seq_len>,<budget>,<steps>,<metrics path>,<out prefix>".
absl::Status RunRank(const std::string& config) {
  std::vector<std::string> parts = absl::StrSplit(config, ',');
  int seq_len = 0, steps = 0;
  int64_t budget = 0;
  if (parts.size() != 6 || !absl::SimpleAtoi(parts[1], &seq_len) ||
      !absl::SimpleAtoi(parts[2], &budget) || !absl::SimpleAtoi(parts[3], &steps)) {
    return absl::InvalidArgumentError(absl::StrCat("bad --bench_rank_config=", config));
  }
  FSDP_ASSIGN_OR_RETURN(Mode mode, ParseMode(parts[0], absl::GetFlag(FLAGS_layers)));
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  fsdp::TrainOptions o = JobOptions(mode, seq_len, budget, steps);
  o.nproc = world->size();
  if (world->rank() == 0) o.metrics_out = parts[4];
  FSDP_ASSIGN_OR_RETURN(fsdp::RunSummary summary, fsdp::RunTraining(o, *world, nullptr));
  return base::WriteFileAtomically(
      absl::StrCat(parts[5], world->rank()),
      absl::StrCat(summary.memory.peak_total_bytes, " ",
                   summary.memory.peak(fsdp::MemoryCategory::kActivations), " ",
                   summary.memory.peak(fsdp::MemoryCategory::kWorkspace), "\n"));
}

struct JobResult {
  double tokens_per_s = 0;
  int64_t peak_total = 0, peak_activations = 0, peak_workspace = 0;
};

bool RunJob(const Mode& mode, int seq_len, int64_t budget, int steps, char* argv0,
            JobResult* r) {
  static int job = 0;
  const std::string tag = absl::StrCat(seq_len, "_", job++);
  const std::string metrics = ScratchPath(tag + ".jsonl"), peaks = ScratchPath(tag + ".peaks");
  comm::LaunchOptions launch;
  launch.nproc = absl::GetFlag(FLAGS_nproc);
  absl::StatusOr<std::string> self = comm::SelfExecutablePath();
  launch.argv = {self.ok() ? *self : std::string(argv0)};
  for (const char* flag : {"matmul_backend", "layers", "d_model", "heads", "vocab",
                           "micro_batch", "strategy", "nproc"}) {
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
    launch.argv.push_back(absl::StrCat("--", flag, "=", f->CurrentValue()));
  }
  launch.argv.push_back(absl::StrCat("--bench_rank_config=", mode.name, ",", seq_len, ",", budget,
                                     ",", steps, ",", metrics, ",", peaks));
  absl::StatusOr<int> result = comm::LaunchLocalRanks(launch);
  if (!result.ok() || *result != 0) {
    std::fprintf(stderr, "activation_bench: %s job at seq_len %d failed: %s\n", mode.name.c_str(),
                 seq_len,
                 result.ok() ? "non-zero exit" : std::string(result.status().message()).c_str());
    return false;
  }
  const std::string final_line = training_job::ReadFinalMetricsLine(metrics);
  r->tokens_per_s = training_job::JsonNumberField(final_line, "tokens_per_s");
  for (int rank = 0; rank < launch.nproc; ++rank) {
    const std::string path = absl::StrCat(peaks, rank);
    std::ifstream in(path);
    int64_t total = 0, activations = 0, workspace = 0;
    in >> total >> activations >> workspace;
    std::remove(path.c_str());
    r->peak_total = std::max(r->peak_total, total);
    r->peak_activations = std::max(r->peak_activations, activations);
    r->peak_workspace = std::max(r->peak_workspace, workspace);
  }
  return !final_line.empty();
}

absl::StatusOr<int64_t> PredictedTotal(const fsdp::TrainOptions& o) {
  FSDP_ASSIGN_OR_RETURN(fsdp::report::MemoryPoint point,
                        fsdp::report::MemoryPointFromTrainOptions(o));
  FSDP_ASSIGN_OR_RETURN(fsdp::report::RankMemoryEstimate e,
                        fsdp::report::EstimateRankMemory(point));
  return e.total_bytes();
}

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f", bytes / 1048576.0); }

}  // namespace

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::ParseCommandLine(argc, argv);
  const std::string rank_config = absl::GetFlag(FLAGS_bench_rank_config);
  if (!rank_config.empty()) {
    return training_job::RunAsLaunchedRank("activation_bench", RunRank, rank_config);
  }
  const int steps = absl::GetFlag(FLAGS_steps);
  std::vector<Mode> modes;
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_modes), ',', absl::SkipEmpty())) {
    absl::StatusOr<Mode> mode = ParseMode(text, absl::GetFlag(FLAGS_layers));
    if (!mode.ok()) {
      std::fprintf(stderr, "activation_bench: --modes: %s\n",
                   std::string(mode.status().message()).c_str());
      return 2;
    }
    modes.push_back(*mode);
  }
  absl::StatusOr<int64_t> seq_budget = fsdp::report::ParseByteSize(absl::GetFlag(FLAGS_seq_budget));
  if (steps < 2 || modes.empty() || !fsdp::ParseStrategy(absl::GetFlag(FLAGS_strategy)).ok() ||
      !fsdp::ParseMatmulBackendChoice(absl::GetFlag(FLAGS_matmul_backend)).ok() ||
      !seq_budget.ok() || absl::GetFlag(FLAGS_seq_step) < 1 || absl::GetFlag(FLAGS_seq_steps) < 1) {
    std::fprintf(stderr,
                 "activation_bench: needs --steps >= 2, at least one mode, a known --strategy "
                 "and --matmul_backend, "
                 "a --seq_budget like 2GiB, --seq_step >= 1 and --seq_steps >= 1\n");
    return 2;
  }
  for (const Mode& mode : modes) {
    const absl::Status valid =
        fsdp::ValidateTrainOptions(JobOptions(mode, absl::GetFlag(FLAGS_seq_len), 0, steps));
    if (!valid.ok()) {
      std::fprintf(stderr, "activation_bench: %s: %s\n", mode.name.c_str(),
                   std::string(valid.message()).c_str());
      return 2;
    }
  }
  const int nproc = absl::GetFlag(FLAGS_nproc);
  const int seq_len = absl::GetFlag(FLAGS_seq_len);
  const int micro_batch = absl::GetFlag(FLAGS_micro_batch);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, cpu = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::printf("# cpu: %s\n# kernels: %s\n", cpu.c_str(),
              fsdp::MatmulKernelDescription(fsdp::MatmulBackend::kOneDnn).c_str());
  std::printf("# model: GPT L%d C%d H%d V%d, micro-batch %d; %s at %d ranks x 1 thread; %d timed "
              "steps per job (matmul backend %s)\n",
              absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_d_model),
              absl::GetFlag(FLAGS_heads), absl::GetFlag(FLAGS_vocab), micro_batch,
              absl::GetFlag(FLAGS_strategy).c_str(), nproc, steps - 1,
              absl::GetFlag(FLAGS_matmul_backend).c_str());

  std::printf("\n## seq_len %d\n%-12s %12s %12s %10s %12s %12s %9s %9s %9s %9s\n", seq_len,
              "mode", "act pred MiB", "act meas MiB", "ws MiB", "total pred", "total meas",
              "step ms", "tok/s", "act cut", "time");
  bool ok = true;
  double none_ms = 0;
  int64_t none_activations = 0;
  for (const Mode& mode : modes) {
    const fsdp::TrainOptions o = JobOptions(mode, seq_len, 0, steps);
    const fsdp::GptActivationBreakdown predicted =
        fsdp::GptActivationBytesByUnit(fsdp::GptConfigOf(o), micro_batch);
    const absl::StatusOr<int64_t> total = PredictedTotal(o);
    JobResult r;
    if (!RunJob(mode, seq_len, 0, steps, argv[0], &r)) {
      ok = false;
      continue;
    }
    const double step_ms = 1e3 * nproc * micro_batch * seq_len / r.tokens_per_s;
    if (mode.name == "none") {
      none_ms = step_ms;
      none_activations = r.peak_activations;
    }
    std::printf("%-12s %12s %12s %10s %12s %12s %9.0f %9.0f %8.2fx %8.2fx\n", mode.name.c_str(),
                MiB(predicted.peak_bytes()).c_str(), MiB(r.peak_activations).c_str(),
                MiB(r.peak_workspace).c_str(), total.ok() ? MiB(*total).c_str() : "?",
                MiB(r.peak_total).c_str(), step_ms, r.tokens_per_s,
                none_activations > 0 ? double(none_activations) / r.peak_activations : 0.0,
                none_ms > 0 ? step_ms / none_ms : 0.0);
    if (predicted.peak_bytes() != r.peak_activations || !total.ok() || *total != r.peak_total) {
      std::printf("#   %s: measured differs from predicted\n", mode.name.c_str());
      ok = false;
    }
    std::fflush(stdout);
  }
  std::printf("# act: kActivations peak per rank (largest over ranks); ws: kWorkspace; total: "
              "tracked peak per rank; act cut and time: against mode none\n");
  if (absl::GetFlag(FLAGS_no_seq_search)) return ok ? 0 : 1;

  const int64_t budget = *seq_budget;
  const int step = absl::GetFlag(FLAGS_seq_step);
  std::printf("\n## largest seq_len within %s per rank (predicted, then trained %d steps with "
              "the budget enforced)\n%-12s %8s %14s %14s %10s\n",
              absl::GetFlag(FLAGS_seq_budget).c_str(), absl::GetFlag(FLAGS_seq_steps), "mode",
              "seq_len", "pred MiB", "meas MiB", "tok/s");
  int baseline = 0;
  for (const char* name : {"none", "all+flash"}) {
    const Mode mode = *ParseMode(name, absl::GetFlag(FLAGS_layers));
    int largest = 0;
    int64_t largest_bytes = 0;
    for (int t = step; t <= 65536; t += step) {
      const absl::StatusOr<int64_t> total = PredictedTotal(JobOptions(mode, t, 0, 1));
      if (!total.ok() || *total > budget) break;
      largest = t;
      largest_bytes = *total;
    }
    if (largest == 0) {
      std::printf("%-12s nothing fits\n", name);
      continue;
    }
    JobResult r;
    if (!RunJob(mode, largest, budget, absl::GetFlag(FLAGS_seq_steps) + 1, argv[0], &r)) {
      ok = false;
      continue;
    }
    if (baseline == 0) baseline = largest;
    std::printf("%-12s %8d %14s %14s %10.0f   %.1fx none's\n", name, largest,
                MiB(largest_bytes).c_str(), MiB(r.peak_total).c_str(), r.tokens_per_s,
                double(largest) / baseline);
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}
