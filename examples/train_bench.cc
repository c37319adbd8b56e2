// File: examples/train_bench.cc
//
// Data-parallel training throughput: for a few GPT sizes, tokens/s with one
// process and with --nproc ranks (same per-rank micro-batch, so the global
// batch grows with the ranks: weak scaling), and the share of step time the
// ranks spent blocked waiting for collectives.
//
//   bazel run -c opt //examples:train_bench -- --nproc=2 --steps=10
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
#include "comm/communicator.h"
#include "comm/launcher/launcher.h"
#include "comm/status_macros.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/train/train_options.h"
#include "fsdp/train/train_run.h"

ABSL_FLAG(int, nproc, 2, "ranks for the multi-rank measurement");
ABSL_FLAG(int, steps, 10, "optimizer steps per measurement (the first is not timed)");
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

double NumberField(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? -1.0 : std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

// A launched rank: "<size index>,<metrics path>".
absl::Status RunRank(const std::string& config) {
  std::vector<std::string> parts = absl::StrSplit(config, ',');
  if (parts.size() != 2) return absl::InvalidArgumentError("bad --bench_rank_config");
  const int size_index = std::atoi(parts[0].c_str());
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  fsdp::TrainOptions options =
      OptionsFor(kSizes[size_index], world->size(), absl::GetFlag(FLAGS_steps));
  if (world->rank() == 0) options.metrics_out = parts[1];
  FSDP_ASSIGN_OR_RETURN(fsdp::RunSummary summary, fsdp::RunTraining(options, *world, nullptr));
  (void)summary;
  return absl::OkStatus();
}

// Launches one job; returns false (after printing why) if it failed.
bool Measure(int size_index, int nproc, char* argv0, double* tokens_per_s, double* comm_share) {
  const std::string metrics = MetricsPath(size_index, nproc);
  comm::LaunchOptions launch;
  launch.nproc = nproc;
  absl::StatusOr<std::string> self = comm::SelfExecutablePath();
  launch.argv = {self.ok() ? *self : std::string(argv0),
                 absl::StrCat("--steps=", absl::GetFlag(FLAGS_steps)),
                 absl::StrCat("--bench_rank_config=", size_index, ",", metrics)};
  absl::StatusOr<int> result = comm::LaunchLocalRanks(launch);
  if (!result.ok() || *result != 0) {
    std::fprintf(stderr, "train_bench: job failed: %s\n",
                 result.ok() ? "non-zero exit" : std::string(result.status().message()).c_str());
    return false;
  }
  std::ifstream in(metrics);
  std::string line, final_line;
  while (std::getline(in, line)) {
    if (line.find("\"final\":true") != std::string::npos) final_line = line;
  }
  std::remove(metrics.c_str());
  *tokens_per_s = NumberField(final_line, "tokens_per_s");
  *comm_share = NumberField(final_line, "comm_wait_share");
  return !final_line.empty();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string rank_config = absl::GetFlag(FLAGS_bench_rank_config);
  if (!rank_config.empty()) {
    absl::Status status = RunRank(rank_config);
    if (!status.ok()) {
      std::fprintf(stderr, "train_bench rank: %s\n", std::string(status.message()).c_str());
      return 1;
    }
    return 0;
  }
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc < 1 || absl::GetFlag(FLAGS_steps) < 2) {
    std::fprintf(stderr, "train_bench: --nproc must be >= 1 and --steps >= 2\n");
    return 2;
  }
  std::printf("# replicated data parallel (no_shard), %d timed steps, 1 compute thread/rank\n",
              absl::GetFlag(FLAGS_steps) - 1);
  std::printf("%-18s %10s %14s %14s %9s %16s\n", "model", "params", "1 rank tok/s",
              absl::StrCat(nproc, " ranks tok/s").c_str(), "speedup", "comm wait share");
  bool ok = true;
  for (int s = 0; s < static_cast<int>(sizeof(kSizes) / sizeof(kSizes[0])); ++s) {
    double one_rate = 0, one_share = 0, n_rate = 0, n_share = 0;
    ok = Measure(s, 1, argv[0], &one_rate, &one_share) && ok;
    ok = Measure(s, nproc, argv[0], &n_rate, &n_share) && ok;
    fsdp::GptConfig config;
    config.layers = kSizes[s].layers;
    config.d_model = kSizes[s].d_model;
    config.heads = kSizes[s].heads;
    config.vocab = kSizes[s].vocab;
    config.seq_len = kSizes[s].seq_len;
    const int64_t params = fsdp::GptNumParams(config);
    std::printf("%-18s %10lld %14.0f %14.0f %8.2fx %15.1f%%\n", kSizes[s].name,
                static_cast<long long>(params), one_rate, n_rate,
                one_rate > 0 ? n_rate / one_rate : 0.0, 100.0 * n_share);
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}
