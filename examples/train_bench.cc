// File: examples/train_bench.cc
//
// Data-parallel training throughput: for a few GPT sizes, tokens/s with one
// process and with --nproc ranks (same per-rank micro-batch, so the global
// batch grows with the ranks: weak scaling), and the share of step time the
// ranks spent blocked waiting for collectives.
//
//   bazel run -c opt //examples:train_bench -- --nproc=2 --steps=10
//
// --mode=strategies instead compares sharding strategies at --nproc ranks
// on the same global batch: step time and tokens/s of no_shard, full_shard
// without prefetch (--prefetch_depth=0) and full_shard with prefetch (1), and
// full_shard's step time relative to no_shard's (best of --repeats jobs each,
// to damp the noise of a shared machine):
//
//   bazel run -c opt //examples:train_bench -- --mode=strategies --nproc=2 --steps=12
//
// Each measurement is a separate job: this binary re-launches itself with
// --bench_rank_config=<model>,<nproc> through comm/launcher; rank 0 of the
// job writes RunTraining's final metrics line, which the parent reads.
// Every rank uses one compute thread, so N ranks use N cores. The first step
// of each job is excluded from the rates (warm-up).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/launcher/crash_trace.h"
#include "comm/launcher/launcher.h"
#include "examples/training_job.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/run/train_options.h"
#include "fsdp/run/train_run.h"
#include "fsdp/plan/strategy.h"

ABSL_FLAG(int, nproc, 2, "ranks for the multi-rank measurement");
ABSL_FLAG(int, steps, 10, "optimizer steps per measurement (the first is not timed)");
ABSL_FLAG(std::string, mode, "scaling",
          "scaling: 1 rank vs --nproc ranks, no_shard; strategies: no_shard vs full_shard "
          "with and without prefetch at --nproc ranks");
ABSL_FLAG(int, repeats, 3, "strategies mode: jobs per variant; the fastest is reported");
ABSL_FLAG(std::string, bench_rank_config, "", "internal: set on launched ranks");

namespace {

struct ModelSize {
  const char* name;
  int layers, d_model, heads, vocab, seq_len, micro_batch;
};
constexpr ModelSize kSizes[] = {
    {"tiny   (L2 C64)", 2, 64, 4, 256, 64, 4},
    {"small  (L4 C128)", 4, 128, 4, 512, 64, 4},
    {"medium (L4 C256)", 4, 256, 8, 1024, 128, 2},
};

fsdp::TrainOptions OptionsFor(const ModelSize& size, int nproc, int steps) {
  fsdp::TrainOptions o;
  o.nproc = nproc;
  o.layers = size.layers;
  o.d_model = size.d_model;
  o.heads = size.heads;
  o.vocab = size.vocab;
  o.seq_len = size.seq_len;
  o.micro_batch = size.micro_batch;
  o.steps = steps;
  o.warmup_steps = 1;
  o.threads = 1;
  return o;
}

std::string MetricsPath(int size_index, int nproc) {
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/train_bench_", getpid(), "_", size_index,
                      "_", nproc, ".jsonl");
}

// What one job runs: a strategy and its prefetch depth.
struct Variant {
  const char* label;
  const char* strategy;  // flag spelling
  int prefetch_depth;
};

// A launched rank: "<size index>,<metrics path>,<strategy>,<prefetch depth>".
absl::Status RunRank(const std::string& config) {
  std::vector<std::string> parts = absl::StrSplit(config, ',');
  if (parts.size() != 4) return absl::InvalidArgumentError("bad --bench_rank_config");
  const int size_index = std::atoi(parts[0].c_str());
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  fsdp::TrainOptions options =
      OptionsFor(kSizes[size_index], world->size(), absl::GetFlag(FLAGS_steps));
  FSDP_ASSIGN_OR_RETURN(options.sharding.strategy, fsdp::ParseStrategy(parts[2]));
  options.sharding.prefetch_depth = std::atoi(parts[3].c_str());
  if (world->rank() == 0) options.metrics_out = parts[1];
  FSDP_ASSIGN_OR_RETURN(fsdp::RunSummary summary, fsdp::RunTraining(options, *world, nullptr));
  (void)summary;
  return absl::OkStatus();
}

// Launches one job; returns false (after printing why) if it failed.
bool Measure(int size_index, int nproc, const Variant& variant, char* argv0,
             double* tokens_per_s, double* comm_share) {
  const std::string metrics = MetricsPath(size_index, nproc);
  comm::LaunchOptions launch;
  launch.nproc = nproc;
  absl::StatusOr<std::string> self = comm::SelfExecutablePath();
  launch.argv = {self.ok() ? *self : std::string(argv0),
                 absl::StrCat("--steps=", absl::GetFlag(FLAGS_steps)),
                 absl::StrCat("--bench_rank_config=", size_index, ",", metrics, ",",
                              variant.strategy, ",", variant.prefetch_depth)};
  absl::StatusOr<int> result = comm::LaunchLocalRanks(launch);
  if (!result.ok() || *result != 0) {
    std::fprintf(stderr, "train_bench: job failed: %s\n",
                 result.ok() ? "non-zero exit" : std::string(result.status().message()).c_str());
    return false;
  }
  const std::string final_line = training_job::ReadFinalMetricsLine(metrics);
  *tokens_per_s = training_job::JsonNumberField(final_line, "tokens_per_s");
  *comm_share = training_job::JsonNumberField(final_line, "comm_wait_share");
  return !final_line.empty();
}

constexpr Variant kNoShard = {"no_shard", "no_shard", 1};

fsdp::GptConfig ConfigOf(const ModelSize& size) {
  fsdp::GptConfig config;
  config.layers = size.layers;
  config.d_model = size.d_model;
  config.heads = size.heads;
  config.vocab = size.vocab;
  config.seq_len = size.seq_len;
  return config;
}

// no_shard vs full_shard with and without prefetch, same global batch.
int CompareStrategies(int nproc, char* argv0) {
  const Variant variants[] = {kNoShard,
                              {"full_shard, no prefetch", "full_shard", 0},
                              {"full_shard, prefetch 1", "full_shard", 1}};
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::printf("# %d ranks, %d timed steps, 1 compute thread/rank, best of %d jobs\n", nproc,
              absl::GetFlag(FLAGS_steps) - 1, repeats);
  std::printf("%-18s %-24s %12s %12s %16s %14s\n", "model", "variant", "step ms", "tok/s",
              "comm wait share", "vs no_shard");
  bool ok = true;
  for (int s = 1; s < static_cast<int>(sizeof(kSizes) / sizeof(kSizes[0])); ++s) {
    const fsdp::TrainOptions o = OptionsFor(kSizes[s], nproc, 2);
    const double tokens_per_step = static_cast<double>(o.tokens_per_step());
    double no_shard_ms = 0.0;
    for (const Variant& variant : variants) {
      double best_rate = 0.0, best_share = 0.0;
      for (int r = 0; r < repeats; ++r) {
        double rate = 0.0, share = 0.0;
        ok = Measure(s, nproc, variant, argv0, &rate, &share) && ok;
        if (rate > best_rate) {
          best_rate = rate;
          best_share = share;
        }
      }
      const double step_ms = best_rate > 0 ? 1e3 * tokens_per_step / best_rate : 0.0;
      if (variant.strategy == kNoShard.strategy) no_shard_ms = step_ms;
      std::printf("%-18s %-24s %12.2f %12.0f %15.1f%% %13.2fx\n", kSizes[s].name, variant.label,
                  step_ms, best_rate, 100.0 * best_share,
                  no_shard_ms > 0 ? step_ms / no_shard_ms : 0.0);
      std::fflush(stdout);
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::ParseCommandLine(argc, argv);
  const std::string rank_config = absl::GetFlag(FLAGS_bench_rank_config);
  if (!rank_config.empty()) {
    return training_job::RunAsLaunchedRank("train_bench", RunRank, rank_config);
  }
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc < 1 || absl::GetFlag(FLAGS_steps) < 2 || absl::GetFlag(FLAGS_repeats) < 1) {
    std::fprintf(stderr, "train_bench: --nproc and --repeats must be >= 1 and --steps >= 2\n");
    return 2;
  }
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "strategies") return CompareStrategies(nproc, argv[0]);
  if (mode != "scaling") {
    std::fprintf(stderr, "train_bench: --mode='%s' is not one of: scaling, strategies\n",
                 mode.c_str());
    return 2;
  }
  std::printf("# replicated data parallel (no_shard), %d timed steps, 1 compute thread/rank\n",
              absl::GetFlag(FLAGS_steps) - 1);
  std::printf("%-18s %10s %14s %14s %9s %16s\n", "model", "params", "1 rank tok/s",
              absl::StrCat(nproc, " ranks tok/s").c_str(), "speedup", "comm wait share");
  bool ok = true;
  for (int s = 0; s < static_cast<int>(sizeof(kSizes) / sizeof(kSizes[0])); ++s) {
    double one_rate = 0, one_share = 0, n_rate = 0, n_share = 0;
    ok = Measure(s, 1, kNoShard, argv[0], &one_rate, &one_share) && ok;
    ok = Measure(s, nproc, kNoShard, argv[0], &n_rate, &n_share) && ok;
    const int64_t params = fsdp::GptNumParams(ConfigOf(kSizes[s]));
    std::printf("%-18s %10lld %14.0f %14.0f %8.2fx %15.1f%%\n", kSizes[s].name,
                static_cast<long long>(params), one_rate, n_rate,
                one_rate > 0 ? n_rate / one_rate : 0.0, 100.0 * n_share);
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}
