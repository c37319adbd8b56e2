// File: examples/speed_bench.cc
//
// Training speed against this machine's own GEMM floor, for each precision
// and sharding strategy (issue 11's benchmark):
//
//   bazel run -c opt //examples:speed_bench
//   bazel run -c opt //examples:speed_bench -- --precisions=fp32 --strategies=no_shard --steps=4
//
// 1. Prints the CPU, its relevant instruction-set flags, and the kernels each
//    matmul backend runs here.
// 2. Measures the GEMM floor in this process, before any job starts: every
//    matrix product of one training step of the model (forward, the two
//    backward products of each Linear, all layers and the head; attention's
//    per-head products excluded), each timed best-of-N on one thread with
//    the backend the jobs will use. Floor = the sum of those times; its rate is
//    the step's Linear FLOPs over that sum, the peak the step can reach.
//    Measured twice: in this process with the other cores idle, and in a
//    launched job of --nproc ranks that time each product at the same moment
//    (the "busy" floor: the ranks of a job share caches and memory bandwidth,
//    and on a VM the host's cores, which can make each of them slower than
//    one core alone).
// 3. Runs one job per (precision, strategy) at --nproc ranks x 1 thread
//    (the binary re-launches itself through comm/launcher, as train_bench
//    does) and reads rank 0's final metrics: tokens/s over the steps after
//    the first, the share of step time in matrix products and their rate,
//    the tracked peak; every rank reports its peak RSS.
// 4. Runs the PyTorch reference on the same model and ranks and prints
//    issue 11's goals against it (examples/speed_goals.h).
//
// Default model: GPT, 8 layers, width 512, 8 heads, vocab 8192, seq_len 256,
// micro-batch 4, AdamW (33.7 M parameters): the model of the PyTorch
// comparison in ../shared/notes/compute-facts.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "base/bfloat16.h"
#include "comm/dtype.h"
#include "comm/launcher/crash_trace.h"
#include "comm/launcher/launcher.h"
#include "examples/speed_goals.h"
#include "examples/training_job.h"
#include "fsdp/memory/memory_tracker.h"
#include "fsdp/nn/compute_threads.h"
#include "fsdp/nn/gpt_spec.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/run/train_options.h"
#include "fsdp/run/train_run.h"
#include "fsdp/plan/strategy.h"

ABSL_FLAG(int, nproc, 2, "ranks per job (1 compute thread each)");
ABSL_FLAG(int, steps, 6, "optimizer steps per job; the first is not timed");
ABSL_FLAG(std::string, precisions, "fp32,bf16",
          "comma-separated: fp32, bf16 (2-byte gradients), bf16_fp32grad (--reduce_dtype=fp32), "
          "fp32_exact, bf16_exact (--exact)");
ABSL_FLAG(std::string, strategies, "no_shard,full_shard", "comma-separated strategies");
ABSL_FLAG(std::string, matmul_backend, "default",
          "default, onednn, openblas or auto (as train_gpt)");
ABSL_FLAG(int, layers, 8, "model layers");
ABSL_FLAG(int, d_model, 512, "model width");
ABSL_FLAG(int, heads, 8, "attention heads");
ABSL_FLAG(int, vocab, 8192, "vocabulary");
ABSL_FLAG(int, seq_len, 256, "sequence length");
ABSL_FLAG(int, micro_batch, 4, "sequences per rank per step");
ABSL_FLAG(bool, floor_detail, false, "print each GEMM of the floor with its rate");
ABSL_FLAG(std::string, pytorch_reference, "",
          "gpt_ddp.py to run after the jobs for the goals' PyTorch figures; empty: "
          "examples/pytorch_reference/gpt_ddp.py of the workspace (under bazel run); none: skip");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "the Python with torch for the reference");
ABSL_FLAG(std::string, bench_rank_config, "", "internal: set on launched ranks");
ABSL_FLAG(std::string, bench_floor_config, "", "internal: set on the busy floor's ranks");

namespace {

using Clock = std::chrono::steady_clock;

fsdp::TrainOptions ModelOptions() {
  fsdp::TrainOptions o;
  o.layers = absl::GetFlag(FLAGS_layers);
  o.d_model = absl::GetFlag(FLAGS_d_model);
  o.heads = absl::GetFlag(FLAGS_heads);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.seq_len = absl::GetFlag(FLAGS_seq_len);
  o.micro_batch = absl::GetFlag(FLAGS_micro_batch);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.warmup_steps = 1;
  o.threads = 1;
  // main checked the flag before launching any job.
  o.matmul_backend = *fsdp::ParseMatmulBackendChoice(absl::GetFlag(FLAGS_matmul_backend));
  return o;
}

// What train_gpt's --precision (and --reduce_dtype, --exact) set: fp32, bf16
// (2-byte gradients), bf16_fp32grad (--precision=bf16 --reduce_dtype=fp32),
// fp32_exact or bf16_exact (--exact).
absl::Status ApplyPrecision(const std::string& precision, fsdp::TrainOptions& o) {
  if (precision == "bf16_fp32grad") {
    FSDP_ASSIGN_OR_RETURN(o.sharding.precision, fsdp::ParsePrecisionPolicy("bf16", "fp32"));
    return absl::OkStatus();
  }
  if (precision == "fp32_exact" || precision == "bf16_exact") {
    FSDP_ASSIGN_OR_RETURN(o.sharding.precision,
                          fsdp::ParsePrecisionPolicy(precision.substr(0, 4), "", /*exact=*/true));
    return absl::OkStatus();
  }
  if (precision != "fp32" && precision != "bf16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "precision '", precision,
        "' is not one of fp32, bf16, bf16_fp32grad, fp32_exact, bf16_exact"));
  }
  FSDP_ASSIGN_OR_RETURN(o.sharding.precision, fsdp::ParsePrecisionPolicy(precision, ""));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- GEMM floor

struct Gemm {
  int64_t m, n, k;
  bool a_t, b_t, accumulate;
  int count;  // how many times a step runs it
};

// One step's Linear products, forward and backward, for a GPT (docs/model.md):
// per block qkv, attn proj, fc, mlp proj; the head; each as y = x W^T,
// dx += dy W, dW += dy^T x.
std::vector<Gemm> StepGemms(const fsdp::TrainOptions& o) {
  const int64_t n = int64_t{o.micro_batch} * o.seq_len, c = o.d_model;
  const struct {
    int64_t in, out;
    int count;
  } linears[] = {{c, 3 * c, o.layers}, {c, c, o.layers}, {c, 4 * c, o.layers},
                 {4 * c, c, o.layers}, {c, o.vocab, 1}};
  std::vector<Gemm> gemms;
  for (const auto& l : linears) {
    gemms.push_back({n, l.out, l.in, false, true, false, l.count});  // forward
    gemms.push_back({n, l.in, l.out, false, false, true, l.count});  // dinp
    gemms.push_back({l.out, l.in, n, true, false, true, l.count});   // dweight
  }
  return gemms;
}

struct Floor {
  double seconds = 0;  // per step, one rank
  double flops = 0;
  double gflops() const { return seconds > 0 ? flops / seconds / 1e9 : 0; }
};

// Times each of the step's products best-of-5 after a warm-up. `before_each`
// runs before each product's warm-up: the busy floor's barrier, so that every
// rank times the same product at the same time.
absl::StatusOr<Floor> MeasureFloor(const fsdp::TrainOptions& o, fsdp::NumType type,
                                   const std::function<absl::Status()>& before_each = nullptr) {
  Floor floor;
  for (const Gemm& g : StepGemms(o)) {
    const size_t a_elems = g.m * g.k, b_elems = g.k * g.n;
    std::vector<float> a(a_elems, 0.01f), b(b_elems, 0.02f), c(g.m * g.n, 0.0f);
    std::vector<uint16_t> a16(a_elems, base::ToBf16Bits(0.01f)),
        b16(b_elems, base::ToBf16Bits(0.02f));
    const bool bf16 = type == fsdp::NumType::kBF16;
    fsdp::MatmulArgs x;
    x.m = g.m, x.n = g.n, x.k = g.k;
    x.a = {bf16 ? static_cast<const void*>(a16.data()) : a.data(), type, g.a_t ? g.m : g.k,
           g.a_t};
    x.b = {bf16 ? static_cast<const void*>(b16.data()) : b.data(), type, g.b_t ? g.k : g.n,
           g.b_t};
    x.c = c.data();
    x.ldc = g.n;
    x.accumulate = g.accumulate;
    if (before_each) FSDP_RETURN_IF_ERROR(before_each());
    fsdp::Matmul(x);  // warm-up: primitive creation, first touch
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      const Clock::time_point start = Clock::now();
      fsdp::Matmul(x);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    floor.seconds += best * g.count;
    floor.flops += 2.0 * g.m * g.n * g.k * g.count;
    if (absl::GetFlag(FLAGS_floor_detail)) {
      std::printf("#   %s %5lld x %5lld x %5lld  A%s B%s%s  x%-2d %7.0f GFLOP/s\n",
                  bf16 ? "bf16" : "fp32", static_cast<long long>(g.m),
                  static_cast<long long>(g.n), static_cast<long long>(g.k), g.a_t ? "^T" : "  ",
                  g.b_t ? "^T" : "  ", g.accumulate ? " +=" : "   ", g.count,
                  2.0 * g.m * g.n * g.k / best / 1e9);
    }
  }
  return floor;
}

// ---------------------------------------------------------------- jobs

std::string ScratchPath(const std::string& what) {
  const char* tmp = std::getenv("TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/speed_bench_", getpid(), "_", what);
}

// The model's flags as this run has them ("--layers=8", ...), for the
// launched ranks and the PyTorch reference, which take the same names.
std::vector<std::string> ModelFlags(absl::Span<const char* const> names) {
  std::vector<std::string> args;
  for (const char* name : names) {
    args.push_back(absl::StrCat("--", name, "=", absl::FindCommandLineFlag(name)->CurrentValue()));
  }
  return args;
}

constexpr const char* kModelShape[] = {"layers", "d_model", "heads",
                                       "vocab",  "seq_len", "micro_batch"};

// --nproc ranks of this binary with the model's flags, `extra` and `config`.
absl::StatusOr<int> LaunchSelf(char* argv0, const std::vector<std::string>& extra,
                               const std::string& config) {
  comm::LaunchOptions launch;
  launch.nproc = absl::GetFlag(FLAGS_nproc);
  absl::StatusOr<std::string> self = comm::SelfExecutablePath();
  launch.argv = {self.ok() ? *self : std::string(argv0)};
  for (const std::string& arg : ModelFlags(kModelShape)) launch.argv.push_back(arg);
  launch.argv.insert(launch.argv.end(), extra.begin(), extra.end());
  launch.argv.push_back(config);
  return comm::LaunchLocalRanks(launch);
}

// A launched rank: "<precision>,<strategy>,<metrics path>,<rss path prefix>".
absl::Status RunRank(const std::string& config) {
  std::vector<std::string> parts = absl::StrSplit(config, ',');
  if (parts.size() != 4) return absl::InvalidArgumentError("bad --bench_rank_config");
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  fsdp::TrainOptions o = ModelOptions();
  o.nproc = world->size();
  FSDP_RETURN_IF_ERROR(ApplyPrecision(parts[0], o));
  FSDP_ASSIGN_OR_RETURN(o.sharding.strategy, fsdp::ParseStrategy(parts[1]));
  if (world->rank() == 0) o.metrics_out = parts[2];
  FSDP_ASSIGN_OR_RETURN(fsdp::RunSummary summary, fsdp::RunTraining(o, *world, nullptr));
  FSDP_ASSIGN_OR_RETURN(int64_t rss, fsdp::PeakRssBytes());
  return base::WriteFileAtomically(absl::StrCat(parts[3], world->rank()),
                                   absl::StrCat(rss, " ", summary.peak_bytes, "\n"));
}

// A launched rank of the busy floor: "<precision>,<backend>,<result path prefix>".
// Every rank times the step's products at the same time as the others (a
// barrier before each product), so the floor is what the cores reach together,
// sharing caches and memory bandwidth as the training ranks do.
absl::Status RunFloorRank(const std::string& config) {
  std::vector<std::string> parts = absl::StrSplit(config, ',');
  if (parts.size() != 3) return absl::InvalidArgumentError("bad --bench_floor_config");
  FSDP_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> world,
                        comm::Communicator::CreateFromEnvironment());
  FSDP_RETURN_IF_ERROR(fsdp::SetComputeThreads(1));
  FSDP_ASSIGN_OR_RETURN(fsdp::MatmulBackend backend, fsdp::ParseMatmulBackend(parts[1]));
  fsdp::SetMatmulBackend(backend);
  const fsdp::NumType type =
      parts[0].rfind("bf16", 0) == 0 ? fsdp::NumType::kBF16 : fsdp::NumType::kF32;
  FSDP_ASSIGN_OR_RETURN(const Floor floor,
                        MeasureFloor(ModelOptions(), type, [&]() -> absl::Status {
                          FSDP_ASSIGN_OR_RETURN(comm::WorkHandle barrier, world->Barrier());
                          return barrier->Wait(absl::Seconds(120));
                        }));
  return base::WriteFileAtomically(absl::StrCat(parts[2], world->rank()),
                                   absl::StrCat(floor.seconds, " ", floor.flops, "\n"));
}

// The floor with every rank's core computing at once: the mean over ranks of
// each rank's floor. Seconds 0 when the job failed (said on stderr).
Floor MeasureBusyFloor(const std::string& precision, fsdp::MatmulBackend backend, char* argv0) {
  const std::string prefix = ScratchPath(precision + ".floor");
  const int nproc = absl::GetFlag(FLAGS_nproc);
  absl::StatusOr<int> result =
      LaunchSelf(argv0, {}, absl::StrCat("--bench_floor_config=", precision, ",",
                                         fsdp::MatmulBackendName(backend), ",", prefix));
  Floor mean;
  bool complete = result.ok() && *result == 0;
  for (int rank = 0; rank < nproc; ++rank) {
    const std::string path = absl::StrCat(prefix, rank);
    std::ifstream in(path);
    double seconds = 0, flops = 0;
    if (!(in >> seconds >> flops)) complete = false;
    std::remove(path.c_str());
    mean.seconds += seconds / nproc;
    mean.flops = flops;
  }
  if (!complete) {
    std::fprintf(stderr, "speed_bench: the %s busy floor job failed: %s\n", precision.c_str(),
                 result.ok() ? "a rank wrote no result"
                             : std::string(result.status().message()).c_str());
    return Floor{};
  }
  return mean;
}

struct JobResult {
  double tokens_per_s = 0, matmul_share = 0, matmul_gflops = 0;
  int64_t tracked_peak = 0, rss_min = 0, rss_max = 0;
};

bool RunJob(const std::string& precision, const std::string& strategy, char* argv0,
            JobResult* r) {
  const std::string tag = absl::StrCat(precision, "_", strategy);
  const std::string metrics = ScratchPath(tag + ".jsonl"), rss = ScratchPath(tag + ".rss");
  const int nproc = absl::GetFlag(FLAGS_nproc);
  absl::StatusOr<int> result = LaunchSelf(
      argv0, ModelFlags({"steps", "matmul_backend"}),
      absl::StrCat("--bench_rank_config=", precision, ",", strategy, ",", metrics, ",", rss));
  if (!result.ok() || *result != 0) {
    std::fprintf(stderr, "speed_bench: %s job failed: %s\n", tag.c_str(),
                 result.ok() ? "non-zero exit" : std::string(result.status().message()).c_str());
    return false;
  }
  const std::string final_line = training_job::ReadFinalMetricsLine(metrics);
  r->tokens_per_s = training_job::JsonNumberField(final_line, "tokens_per_s");
  r->matmul_share = training_job::JsonNumberField(final_line, "matmul_share");
  r->matmul_gflops = training_job::JsonNumberField(final_line, "matmul_gflops");
  r->rss_min = INT64_MAX;
  for (int rank = 0; rank < nproc; ++rank) {
    const std::string path = absl::StrCat(rss, rank);
    std::ifstream rin(path);
    int64_t bytes = 0, tracked = 0;
    rin >> bytes >> tracked;
    std::remove(path.c_str());
    r->rss_min = std::min(r->rss_min, bytes);
    r->rss_max = std::max(r->rss_max, bytes);
    r->tracked_peak = std::max(r->tracked_peak, tracked);
  }
  return !final_line.empty();
}

std::string GiB(int64_t bytes) { return absl::StrFormat("%.2f", bytes / double(1 << 30)); }

// The PyTorch reference on the same model, right after the jobs, and the
// goals judged against it (examples/speed_goals.h).
void PrintGoals(const std::vector<speed_goals::Measured>& measured,
                const std::vector<std::string>& precisions) {
  std::string script = absl::GetFlag(FLAGS_pytorch_reference);
  if (script == "none") return;
  if (script.empty()) {
    const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    script = absl::StrCat(workspace != nullptr ? workspace : ".",
                          "/examples/pytorch_reference/gpt_ddp.py");
  }
  speed_goals::PyTorchOptions o;
  o.python = absl::GetFlag(FLAGS_python);
  o.script = script;
  // gpt_ddp.py takes the same flags; the layouts set --nproc, --threads and
  // --micro_batch (speed_goals.h).
  o.args = ModelFlags({"layers", "d_model", "heads", "vocab", "seq_len", "steps"});
  o.nproc = absl::GetFlag(FLAGS_nproc);
  o.micro_batch = absl::GetFlag(FLAGS_micro_batch);
  auto wanted = [&](const char* prefix) {
    for (const std::string& p : precisions) {
      if (p.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  speed_goals::PyTorchResult fp32, bf16;
  fp32.why_not = bf16.why_not = "precision not measured";
  if (wanted("fp32")) fp32 = speed_goals::RunPyTorchReference(o, /*bf16=*/false);
  if (wanted("bf16")) bf16 = speed_goals::RunPyTorchReference(o, /*bf16=*/true);
  speed_goals::PrintSpeedGoals(measured, fp32, bf16, speed_goals::CpuHasAmx());
}

}  // namespace

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::ParseCommandLine(argc, argv);
  const std::string rank_config = absl::GetFlag(FLAGS_bench_rank_config);
  if (!rank_config.empty()) {
    return training_job::RunAsLaunchedRank("speed_bench", RunRank, rank_config);
  }
  const std::string floor_config = absl::GetFlag(FLAGS_bench_floor_config);
  if (!floor_config.empty()) {
    return training_job::RunAsLaunchedRank("speed_bench", RunFloorRank, floor_config);
  }
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc < 1 || absl::GetFlag(FLAGS_steps) < 2) {
    std::fprintf(stderr, "speed_bench: --nproc must be >= 1 and --steps >= 2\n");
    return 2;
  }
  fsdp::TrainOptions model = ModelOptions();
  model.nproc = nproc;
  const std::vector<std::string> precisions =
      absl::StrSplit(absl::GetFlag(FLAGS_precisions), ',', absl::SkipEmpty());
  const std::vector<std::string> strategies =
      absl::StrSplit(absl::GetFlag(FLAGS_strategies), ',', absl::SkipEmpty());
  for (const std::string& p : precisions) {
    fsdp::TrainOptions check = model;
    if (absl::Status s = ApplyPrecision(p, check); !s.ok()) {
      std::fprintf(stderr, "speed_bench: --precisions: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  for (const std::string& s : strategies) {
    if (!fsdp::ParseStrategy(s).ok()) {
      std::fprintf(stderr, "speed_bench: --strategies: unknown strategy '%s'\n", s.c_str());
      return 2;
    }
  }

  // The backend the jobs will pick, and the floor measured with it.
  if (!fsdp::SetComputeThreads(1).ok()) return 1;
  fsdp::MatmulBackend backend = fsdp::MatmulBackend::kOneDnn;
  const absl::StatusOr<fsdp::MatmulBackendChoice> choice =
      fsdp::ParseMatmulBackendChoice(absl::GetFlag(FLAGS_matmul_backend));
  if (!choice.ok()) {
    std::fprintf(stderr, "speed_bench: %s\n", std::string(choice.status().message()).c_str());
    return 2;
  }
  std::string how = fsdp::MatmulBackendChoiceName(*choice);
  if (*choice == fsdp::MatmulBackendChoice::kDefault) {
    const fsdp::DefaultBackendChoice rule = fsdp::DefaultMatmulBackend();
    backend = rule.backend;
    how = "default: " + rule.reason;
  } else if (*choice == fsdp::MatmulBackendChoice::kAuto) {
    const fsdp::BackendMeasurement m = fsdp::MeasureMatmulBackends();
    backend = m.chosen;
    how = absl::StrFormat("auto: onednn %.0f, openblas %.0f GFLOP/s fp32", m.onednn_gflops,
                          m.openblas_gflops);
  } else {
    backend = *fsdp::ParseMatmulBackend(how);
  }
  fsdp::SetMatmulBackend(backend);
  fsdp::GptConfig config;
  config.layers = model.layers;
  config.d_model = model.d_model;
  config.heads = model.heads;
  config.vocab = model.vocab;
  config.seq_len = model.seq_len;
  std::printf("# cpu: %s\n", training_job::CpuLine().c_str());
  std::printf("# matmul backend: %s (%s)\n", fsdp::MatmulBackendName(backend), how.c_str());
  std::printf("# kernels: %s\n#          %s\n",
              fsdp::MatmulKernelDescription(fsdp::MatmulBackend::kOneDnn).c_str(),
              fsdp::MatmulKernelDescription(fsdp::MatmulBackend::kOpenBlas).c_str());
  std::printf("# model: GPT L%d C%d H%d V%d T%d, micro-batch %d, %lld parameters; %d ranks x 1 "
              "thread, %d timed steps per job\n",
              model.layers, model.d_model, model.heads, model.vocab, model.seq_len,
              model.micro_batch, static_cast<long long>(fsdp::GptNumParams(config)), nproc,
              model.steps - 1);
  const double tokens_per_rank_step = double(model.micro_batch) * model.seq_len;

  std::printf("\n%-13s %-11s %9s %9s %8s %9s %9s %9s %9s %9s %11s %12s\n", "prec",
              "strategy", "tok/s", "step ms", "matmul", "GFLOP/s", "of peak", "of floor",
              "of busy", "vs no_sh", "tracked/GiB", "RSS/GiB");
  bool ok = true;
  std::vector<speed_goals::Measured> measured;
  for (const std::string& precision : precisions) {
    const fsdp::NumType type =
        precision.rfind("bf16", 0) == 0 ? fsdp::NumType::kBF16 : fsdp::NumType::kF32;
    const Floor floor = *MeasureFloor(model, type);  // nothing to wait for: cannot fail
    const double floor_tokens_per_s = nproc * tokens_per_rank_step / floor.seconds;
    std::printf("# %s GEMM floor, one core alone: %.0f ms per step per rank (%.1f GFLOP of "
                "Linear products at %.0f GFLOP/s) = %.0f tok/s at %d ranks\n",
                precision.c_str(), 1e3 * floor.seconds, floor.flops / 1e9, floor.gflops(),
                floor_tokens_per_s, nproc);
    const Floor busy = nproc > 1 ? MeasureBusyFloor(precision, backend, argv[0]) : floor;
    const double busy_tokens_per_s =
        busy.seconds > 0 ? nproc * tokens_per_rank_step / busy.seconds : 0;
    if (busy.seconds <= 0) ok = false;
    if (nproc > 1 && busy.seconds > 0) {
      std::printf("# %s GEMM floor, %d ranks computing at once: %.0f ms per step per rank (%.0f "
                  "GFLOP/s) = %.0f tok/s\n",
                  precision.c_str(), nproc, 1e3 * busy.seconds, busy.gflops(),
                  busy_tokens_per_s);
    }
    double no_shard_ms = 0;
    for (const std::string& strategy : strategies) {
      JobResult r;
      if (!RunJob(precision, strategy, argv[0], &r)) {
        ok = false;
        continue;
      }
      const double step_ms = 1e3 * nproc * tokens_per_rank_step / r.tokens_per_s;
      if (strategy == "no_shard") no_shard_ms = step_ms;
      measured.push_back({precision, strategy, r.tokens_per_s});
      std::printf("%-13s %-11s %9.0f %9.0f %7.1f%% %9.0f %8.0f%% %8.0f%% %8.0f%% %8.2fx %11s "
                  "%5s-%s\n",
                  precision.c_str(), strategy.c_str(), r.tokens_per_s, step_ms,
                  100 * r.matmul_share, r.matmul_gflops, 100 * r.matmul_gflops / floor.gflops(),
                  100 * r.tokens_per_s / floor_tokens_per_s,
                  busy_tokens_per_s > 0 ? 100 * r.tokens_per_s / busy_tokens_per_s : 0.0,
                  no_shard_ms > 0 ? step_ms / no_shard_ms : 0.0, GiB(r.tracked_peak).c_str(),
                  GiB(r.rss_min).c_str(), GiB(r.rss_max).c_str());
      std::fflush(stdout);
    }
  }
  std::printf("\n# matmul: share of rank 0's step time in matrix products (Linear and "
              "attention); GFLOP/s: their rate; of peak: that rate over the floor's rate (one "
              "core alone); of floor: tok/s over the floor's tok/s; of busy: over the tok/s of "
              "the floor measured with every rank computing at once (the mean over ranks; "
              "0 if that job failed)\n");
  PrintGoals(measured, precisions);
  return ok ? 0 : 1;
}
