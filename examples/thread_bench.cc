// File: examples/thread_bench.cc
//
// How a rank's step scales with its threads, phase by phase (issue 40):
//
//   bazel run -c opt //examples:thread_bench -- --threads=2 --precision=bf16
//
// Three jobs of one model and one global batch (no_shard): 1 rank x 1
// thread, 1 rank x N threads and N ranks x 1 thread (the layout the threads
// compete with). Each reports rank 0's time per step in the products (the
// matmul backend's calls, on its own clock), the optimizer step, comm wait,
// and the rest (the kernels between the products and the framework's own
// work). For each phase, the speed-up from 1 to N threads and the parallel
// fraction p it implies under Amdahl's law,
//
//   T(N) = T(1) ((1 - p) + p / N),  so  p = (1 - T(N) / T(1)) / (1 - 1 / N),
//
// then the step's speed-up that p predicts at 32, 64 and 128 threads,
// 1 / ((1 - p) + p / n): a 2-core machine's forecast for a node, which
// assumes the parallel part keeps scaling (memory bandwidth and the
// products' efficiency at many threads are not measured here).
//
// Each layout runs --repeats jobs; the fastest is reported. The first step
// of each job is not timed (warm-up).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/launcher/crash_trace.h"
#include "comm/launcher/launcher.h"
#include "examples/training_job.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/run/train_options.h"
#include "fsdp/run/train_run.h"

ABSL_FLAG(int, threads, 2, "N: threads of the one-rank job, and ranks of the N-rank job");
ABSL_FLAG(int, layers, 8, "model: blocks");
ABSL_FLAG(int, d_model, 512, "model: width");
ABSL_FLAG(int, heads, 8, "model: attention heads");
ABSL_FLAG(int, vocab, 8192, "model: vocabulary");
ABSL_FLAG(int, seq_len, 256, "model: sequence length");
ABSL_FLAG(int, micro_batch, 4,
          "sequences per rank of the N-rank job (the one-rank jobs take N x this)");
ABSL_FLAG(std::string, precision, "fp32", "fp32 or bf16");
ABSL_FLAG(int, steps, 10, "optimizer steps per job (the first is not timed)");
ABSL_FLAG(int, repeats, 2, "jobs per layout; the fastest is reported");
ABSL_FLAG(std::string, bench_rank_config, "", "internal: set on launched ranks");

namespace {

// A launched rank: "<micro_batch>,<threads>,<metrics path>".
absl::Status RunRank(const std::string& config) {
  std::vector<std::string> parts = absl::StrSplit(config, ',');
  if (parts.size() != 3) return absl::InvalidArgumentError("bad --bench_rank_config");
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  fsdp::TrainOptions o;
  o.nproc = world->size();
  o.layers = absl::GetFlag(FLAGS_layers);
  o.d_model = absl::GetFlag(FLAGS_d_model);
  o.heads = absl::GetFlag(FLAGS_heads);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.seq_len = absl::GetFlag(FLAGS_seq_len);
  o.micro_batch = std::atoi(parts[0].c_str());
  o.threads = std::atoi(parts[1].c_str());
  o.steps = absl::GetFlag(FLAGS_steps);
  o.warmup_steps = 1;
  FSDP_ASSIGN_OR_RETURN(o.sharding.precision,
                        fsdp::ParsePrecisionPolicy(absl::GetFlag(FLAGS_precision), ""));
  if (world->rank() == 0) o.metrics_out = parts[2];
  return fsdp::RunTraining(o, *world, nullptr).status();
}

// Rank 0's seconds per step, by phase.
struct Phases {
  double step = 0, products = 0, optimizer = 0, comm_wait = 0;
  double tokens_per_s = 0;
  std::string digest;
  double rest() const { return step - products - optimizer - comm_wait; }
};

struct Layout {
  std::string label;
  int nproc, threads, micro_batch;
};

// Runs one job; nullopt-like (tokens_per_s 0) after printing why it failed.
Phases Measure(const Layout& layout, char* argv0) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string metrics =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/thread_bench_", getpid(), "_", layout.nproc,
                   "_", layout.threads, ".jsonl");
  comm::LaunchOptions launch;
  launch.nproc = layout.nproc;
  absl::StatusOr<std::string> self = comm::SelfExecutablePath();
  launch.argv = {self.ok() ? *self : std::string(argv0)};
  for (const auto& [name, value] : std::vector<std::pair<const char*, std::string>>{
           {"layers", absl::StrCat(absl::GetFlag(FLAGS_layers))},
           {"d_model", absl::StrCat(absl::GetFlag(FLAGS_d_model))},
           {"heads", absl::StrCat(absl::GetFlag(FLAGS_heads))},
           {"vocab", absl::StrCat(absl::GetFlag(FLAGS_vocab))},
           {"seq_len", absl::StrCat(absl::GetFlag(FLAGS_seq_len))},
           {"precision", absl::GetFlag(FLAGS_precision)},
           {"steps", absl::StrCat(absl::GetFlag(FLAGS_steps))},
           {"bench_rank_config",
            absl::StrCat(layout.micro_batch, ",", layout.threads, ",", metrics)}}) {
    launch.argv.push_back(absl::StrCat("--", name, "=", value));
  }
  Phases p;
  absl::StatusOr<int> result = comm::LaunchLocalRanks(launch);
  if (!result.ok() || *result != 0) {
    std::fprintf(stderr, "thread_bench: the %s job failed: %s\n", layout.label.c_str(),
                 result.ok() ? "non-zero exit" : std::string(result.status().message()).c_str());
    return p;
  }
  const std::string line = training_job::ReadFinalMetricsLine(metrics);
  const double rate = training_job::JsonNumberField(line, "tokens_per_s");
  if (line.empty() || rate <= 0) return p;
  const double tokens_per_step =
      double{layout.nproc} * layout.micro_batch * absl::GetFlag(FLAGS_seq_len);
  p.tokens_per_s = rate;
  p.step = tokens_per_step / rate;
  p.products = p.step * training_job::JsonNumberField(line, "matmul_share");
  p.optimizer = p.step * training_job::JsonNumberField(line, "optimizer_share");
  p.comm_wait = p.step * training_job::JsonNumberField(line, "comm_wait_share");
  const size_t at = line.find("\"param_sha256\":\"");
  if (at != std::string::npos) p.digest = line.substr(at + 16, 16);
  return p;
}

// Amdahl's parallel fraction from the times at 1 and n threads.
double ParallelFraction(double t1, double tn, int n) {
  return t1 > 0 ? (1.0 - tn / t1) / (1.0 - 1.0 / n) : 0.0;
}

double AmdahlSpeedup(double p, int n) { return 1.0 / ((1.0 - p) + p / n); }

}  // namespace

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::ParseCommandLine(argc, argv);
  const std::string rank_config = absl::GetFlag(FLAGS_bench_rank_config);
  if (!rank_config.empty()) {
    return training_job::RunAsLaunchedRank("thread_bench", RunRank, rank_config);
  }
  const int n = absl::GetFlag(FLAGS_threads);
  const int mb = absl::GetFlag(FLAGS_micro_batch);
  if (n < 2 || mb < 1 || absl::GetFlag(FLAGS_steps) < 2 || absl::GetFlag(FLAGS_repeats) < 1) {
    std::fprintf(stderr,
                 "thread_bench: --threads must be >= 2, --micro_batch and --repeats >= 1, "
                 "--steps >= 2\n");
    return 2;
  }
  fsdp::GptConfig config;
  config.layers = absl::GetFlag(FLAGS_layers);
  config.d_model = absl::GetFlag(FLAGS_d_model);
  config.heads = absl::GetFlag(FLAGS_heads);
  config.vocab = absl::GetFlag(FLAGS_vocab);
  config.seq_len = absl::GetFlag(FLAGS_seq_len);
  std::printf("# cpu: %s\n", training_job::CpuLine().c_str());
  std::printf("# products: %s; kernels between them: %s\n",
              fsdp::MatmulKernelDescription(fsdp::MatmulBackend::kOneDnn).c_str(),
              base::ParallelForIsThreaded() ? "OpenMP (libgomp), the products' team"
                                            : "one thread (built without OpenMP)");
  std::printf(
      "# model: GPT L%d C%d H%d V%d T%d (%lld parameters), %s, no_shard, global batch %d, "
      "%d timed steps per job, best of %d jobs\n",
      config.layers, config.d_model, config.heads, config.vocab, config.seq_len,
      static_cast<long long>(fsdp::GptNumParams(config)), absl::GetFlag(FLAGS_precision).c_str(),
      n * mb, absl::GetFlag(FLAGS_steps) - 1, absl::GetFlag(FLAGS_repeats));
  const std::vector<Layout> layouts = {
      {"1 rank x 1 thread", 1, 1, n * mb},
      {absl::StrCat("1 rank x ", n, " threads"), 1, n, n * mb},
      {absl::StrCat(n, " ranks x 1 thread"), n, 1, mb},
  };
  std::vector<Phases> best(layouts.size());
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    for (size_t i = 0; i < layouts.size(); ++i) {  // layouts alternate within a repeat
      Phases p = Measure(layouts[i], argv[0]);
      if (p.tokens_per_s > best[i].tokens_per_s) best[i] = p;
    }
  }
  std::printf("\n%-22s %9s %9s %10s %10s %10s %10s  %s\n", "layout", "tok/s", "step ms", "products",
              "optimizer", "comm wait", "rest", "params sha256");
  for (size_t i = 0; i < layouts.size(); ++i) {
    const Phases& p = best[i];
    if (p.tokens_per_s <= 0) {
      std::printf("%-22s failed\n", layouts[i].label.c_str());
      return 1;
    }
    std::printf("%-22s %9.0f %9.1f %10.1f %10.1f %10.1f %10.1f  %s\n", layouts[i].label.c_str(),
                p.tokens_per_s, 1e3 * p.step, 1e3 * p.products, 1e3 * p.optimizer,
                1e3 * p.comm_wait, 1e3 * p.rest(), p.digest.c_str());
  }
  const Phases& one = best[0];
  const Phases& threaded = best[1];
  std::printf("\n%-22s %12s %12s %9s %18s\n", "phase (1 rank)", "1 thread ms",
              absl::StrCat(n, " threads ms").c_str(), "speed-up", "parallel fraction");
  const struct {
    const char* name;
    double one, threaded;
  } phases[] = {{"products", one.products, threaded.products},
                {"optimizer", one.optimizer, threaded.optimizer},
                {"rest", one.rest(), threaded.rest()},
                {"step", one.step, threaded.step}};
  for (const auto& phase : phases) {
    std::printf("%-22s %12.1f %12.1f %8.2fx %17.1f%%\n", phase.name, 1e3 * phase.one,
                1e3 * phase.threaded, phase.threaded > 0 ? phase.one / phase.threaded : 0.0,
                100.0 * ParallelFraction(phase.one, phase.threaded, n));
  }
  const double p = ParallelFraction(one.step, threaded.step, n);
  std::printf("\n1 rank x %d threads against %d ranks x 1 thread: %.2fx the tokens/s\n", n, n,
              threaded.tokens_per_s / best[2].tokens_per_s);
  std::printf(
      "the step's parallel fraction %.1f%% predicts %.1fx at 32 threads, %.1fx at 64, "
      "%.1fx at 128\n",
      100.0 * p, AmdahlSpeedup(p, 32), AmdahlSpeedup(p, 64), AmdahlSpeedup(p, 128));
  return 0;
}
