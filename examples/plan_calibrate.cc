// File: examples/plan_calibrate.cc
//
// Measures this machine for the step-time model and writes its description
// (proto/hardware.proto, text format):
//
//   bazel run -c opt //examples:plan_calibrate                # writes fsdp/plan/clusters/this_machine.textproto
//   bazel run -c opt //examples:plan_calibrate -- --out=/tmp/here.textproto
//
// What it measures, on one core with one thread (the model's "processor": a
// rank on this host computes on its share of the cores), and the products
// again with every core as one rank's threads (a lone rank's):
//   - matrix product rates, fp32 and bf16 operands, through fsdp/nn/matmul
//     on the backend train_gpt's auto choice takes, one product shape per
//     shape class (the smallest dimension 16 to 1024: attention's head size
//     up to a wide layer), best of ten short timed rounds, operands cycled
//     through a 128 MiB pool (cold, as in a training step);
//   - memory bandwidth: a three-array element-wise pass (two reads, one
//     write) over 64 MiB arrays on one core, best of five;
//   - compute_time_cv: the robust spread of 21 timings of 50 ms of products
//     (what other processes on the host do to a rank's step);
//   - the link: --ranks ranks (launched as this binary, like
//     collective_bench) all-gather 1 KiB and 64 MiB (examples/collective_cell:
//     huge-page buffers, as training allocates them); with t = a + S (n-1)/n / B
//     for both sizes it solves for the latency a and the bandwidth B;
//   - framework_overhead.collective_compute_share: how much slower those
//     ranks' products run while 64 MiB all-gathers are in flight (the copies
//     are the cores' work here); kernel_launch_s 0 (the rates hold it).
// There is no second node here: inter_node repeats intra_node, and says so.
//
// Why a core and not the host: the first calibration measured the host with
// all its threads as one processor shared by the ranks, which predicted 4
// ranks (one thread each on 2 cores) at 4x one rank's step; they took
// 1.7x (docs/planning.md): separate ranks use both cores fully, while a
// second thread of one product gains what the backend makes of it (little
// on an AMD EPYC with OpenBLAS, 1.3-1.9x on an Intel Xeon). So the
// all-core rates are entries of their own (ProductRate.threads), taken
// only by a rank that has the cores to itself.
// The file's header records the command, the date, the CPU and the kernels.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/posix_file.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/launcher/launcher.h"
#include "examples/bench_results.h"
#include "examples/collective_cell.h"
#include "fsdp/nn/matmul.h"
#include "fsdp/plan/hardware_description.h"
#include "proto/hardware.pb.h"

ABSL_FLAG(std::string, out, "fsdp/plan/clusters/this_machine.textproto",
          "where to write the description (relative to the workspace under bazel run)");
ABSL_FLAG(std::string, matmul_backend, "default",
          "train_gpt's flag: default (the machine's rule, as train_gpt), onednn, openblas, or "
          "auto (timed); the one the runs to be predicted use");
ABSL_FLAG(int, ranks, 2, "ranks of the collective measurement (>= 2)");
ABSL_FLAG(int, ranks_per_node, 8, "the most ranks a job runs on this host (the model's ranks_per_node)");

namespace {

constexpr char kResultFileVariable[] = "FSDP_PLAN_CALIBRATE_RESULT_FILE";
constexpr size_t kSmallBytes = 1024;
constexpr size_t kLargeBytes = size_t{64} << 20;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Shape {
  int64_t min_dimension;  // the class it stands for
  int64_t m, n, k;
};

// One product per shape class: attention's Q K^T with 16- and 32-wide
// heads over 256 positions, then Linear layers (3d outputs, as qkv) of
// width 64 to 1024 over 1024 tokens.
const Shape kShapes[] = {{0, 256, 256, 16},      {32, 256, 256, 32},       {64, 1024, 192, 64},
                         {128, 1024, 384, 128},  {256, 1024, 768, 256},    {512, 1024, 1536, 512},
                         {1024, 1024, 3072, 1024}};

// Operands of m x k and n x k (a Linear's transposed weight), filled with
// small values of the product's dtype, and the output: fp32, or bf16 for
// bf16 operands, as the runtime's bf16 forward and weight-gradient products
// write it (fsdp/nn/linear.cc; on OpenBLAS the output is then narrowed
// after the product, on one thread, which a second thread does not speed).
struct Operands {
  std::vector<float> a32, b32;
  std::vector<uint16_t> a16, b16;
  std::vector<float> c;
  std::vector<uint16_t> c16;
};

fsdp::MatmulArgs ArgsFor(const Shape& s, fsdp::NumType type, Operands& o) {
  const bool bf16 = type == fsdp::NumType::kBF16;
  fsdp::MatmulArgs args;
  args.m = s.m;
  args.n = s.n;
  args.k = s.k;
  args.a = {bf16 ? static_cast<const void*>(o.a16.data()) : o.a32.data(), type, s.k};
  args.b = {bf16 ? static_cast<const void*>(o.b16.data()) : o.b32.data(), type, s.k, true};
  args.c = bf16 ? static_cast<void*>(o.c16.data()) : o.c.data();
  args.c_type = bf16 ? fsdp::NumType::kBF16 : fsdp::NumType::kF32;
  args.ldc = s.n;
  return args;
}

Operands OperandsFor(const Shape& s) {
  Operands o;
  o.a32.assign(s.m * s.k, 0.01f);
  o.b32.assign(s.n * s.k, 0.02f);
  o.a16.assign(s.m * s.k, 0x3c24);  // about 0.01 in bf16
  o.b16.assign(s.n * s.k, 0x3ca4);  // about 0.02
  o.c.assign(s.m * s.n, 0.0f);
  o.c16.assign(s.m * s.n, 0);
  return o;
}

// Operand sets a measurement cycles through: at least 128 MiB in all (2 to
// 512 sets), so that every product starts with operands outside the caches
// it could keep to itself, as in a training step, where a product reads
// activations and weights that the rest of the step (tens to hundreds of MiB
// of weights, gradients, optimizer state and activations) has since pushed
// out. On an Intel Xeon with 2 MiB of L2 per core and a shared L3, products
// on the same operands over and over ran 20-25% faster (1024 x 768 x 256
// fp32: 158 against 124 GFLOP/s over 80 MiB of operands), 35 MiB of
// operands in between, and train_gpt's products at one thread averaged 121.
constexpr size_t kOperandPoolBytes = size_t{128} << 20;

// Best of ten rounds of at least 0.03 s each, after a warm-up, with
// `threads` threads: on a shared host the best rounds are the ones nobody
// else interrupted.
double ProductRate(const Shape& s, fsdp::NumType type, int threads) {
  const size_t set_bytes =
      (s.m * s.k + s.n * s.k + s.m * s.n) * (type == fsdp::NumType::kBF16 ? 2 : sizeof(float));
  const size_t sets = std::clamp<size_t>(kOperandPoolBytes / set_bytes + 1, 2, 512);
  std::vector<Operands> pool;
  std::vector<fsdp::MatmulArgs> args;
  pool.reserve(sets);
  for (size_t i = 0; i < sets; ++i) {
    pool.push_back(OperandsFor(s));
    args.push_back(ArgsFor(s, type, pool.back()));
  }
  fsdp::SetMatmulThreads(threads);
  for (size_t i = 0; i < sets; ++i) fsdp::Matmul(args[i]);
  const double flops = 2.0 * s.m * s.n * s.k;
  double best = 0;
  for (int round = 0; round < 10; ++round) {
    size_t calls = 0;
    const Clock::time_point start = Clock::now();
    double seconds = 0;
    do {
      fsdp::Matmul(args[calls % sets]);
      ++calls;
      seconds = SecondsSince(start);
    } while (seconds < 0.03);
    best = std::max(best, flops * calls / seconds);
  }
  fsdp::SetMatmulThreads(1);
  return best;
}

// The spread of one rank's compute time: 21 timings of about 50 ms of the
// width-256 product each (a short step's worth), as a robust coefficient of
// variation, 1.4826 x the median absolute deviation over the median (the
// standard deviation for normal noise; one preemption in a single timing
// does not set it, which a plain standard deviation over short timings let
// happen: 1.37 in one sitting).
double ComputeTimeCv() {
  const Shape& s = kShapes[4];
  Operands o = OperandsFor(s);
  const fsdp::MatmulArgs args = ArgsFor(s, fsdp::NumType::kF32, o);
  for (int i = 0; i < 3; ++i) fsdp::Matmul(args);
  const Clock::time_point probe = Clock::now();
  fsdp::Matmul(args);
  const int calls = std::max(1, static_cast<int>(0.05 / std::max(1e-6, SecondsSince(probe))));
  std::vector<double> times;
  for (int i = 0; i < 21; ++i) {
    const Clock::time_point start = Clock::now();
    for (int c = 0; c < calls; ++c) fsdp::Matmul(args);
    times.push_back(SecondsSince(start));
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  const double mid = median(times);
  std::vector<double> deviations;
  for (double t : times) deviations.push_back(std::abs(t - mid));
  return 1.4826 * median(deviations) / mid;
}

// z = x + 0.5 y over `threads` slices at once; bytes read + written per second.
double MemoryBandwidth(int threads) {
  const size_t n = (size_t{64} << 20) / sizeof(float);
  std::vector<float> x(n, 1.0f), y(n, 2.0f), z(n, 0.0f);
  auto pass = [&] {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const size_t begin = n * t / threads, end = n * (t + 1) / threads;
        for (size_t i = begin; i < end; ++i) z[i] = x[i] + 0.5f * y[i];
      });
    }
    for (std::thread& w : workers) w.join();
  };
  pass();
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    const Clock::time_point start = Clock::now();
    pass();
    best = std::max(best, 3.0 * n * sizeof(float) / SecondsSince(start));
  }
  return best;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

// The backend train_gpt takes for the same flag (fsdp/run/compute_backend.h),
// set for this process.
absl::StatusOr<fsdp::MatmulBackend> UseChosenBackend() {
  const std::string backend_name = absl::GetFlag(FLAGS_matmul_backend);
  FSDP_ASSIGN_OR_RETURN(const fsdp::MatmulBackendChoice choice,
                        fsdp::ParseMatmulBackendChoice(backend_name));
  fsdp::MatmulBackend backend = fsdp::DefaultMatmulBackend().backend;
  if (choice == fsdp::MatmulBackendChoice::kAuto) {
    backend = fsdp::MeasureMatmulBackends().chosen;
  } else if (choice != fsdp::MatmulBackendChoice::kDefault) {
    FSDP_ASSIGN_OR_RETURN(backend, fsdp::ParseMatmulBackend(backend_name));
  }
  fsdp::SetMatmulBackend(backend);
  return backend;
}

// What a running collective takes from compute on this host: every rank
// runs one product shape (one thread) for a while with no collective in
// flight, then while 64 MiB all-gathers run, one after another, and
// compares the rates. On one host a collective's copies are the cores' own
// work (the peers' reads, each rank's progress thread), not a copy
// engine's, so overlapped communication is not free here. Both phases run
// on every rank at once, so the share holds no more than the collective.
absl::StatusOr<double> CollectiveComputeShare(comm::Communicator& comm) {
  const Shape& s = kShapes[4];
  Operands o = OperandsFor(s);
  const fsdp::MatmulArgs args = ArgsFor(s, fsdp::NumType::kF32, o);
  fsdp::SetMatmulThreads(1);
  for (int i = 0; i < 3; ++i) fsdp::Matmul(args);
  const double flops = 2.0 * s.m * s.n * s.k;
  std::vector<std::byte> input(kLargeBytes / comm.size()), output(input.size() * comm.size());
  comm::AllGatherOptions gather;
  gather.input = absl::MakeConstSpan(input);
  gather.output = absl::MakeSpan(output);
  auto barrier = [&]() -> absl::Status {
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, comm.Barrier());
    return work->Wait(absl::Seconds(60));
  };
  {  // first touch of the buffers
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, comm.AllGather(gather));
    FSDP_RETURN_IF_ERROR(work->Wait(absl::Seconds(60)));
  }
  double alone_s = 0, overlapped_s = 0;
  int64_t alone_calls = 0, overlapped_calls = 0;
  // A fixed count of rounds: every rank posts the same collectives.
  for (int round = 0; round < 64; ++round) {
    FSDP_RETURN_IF_ERROR(barrier());
    Clock::time_point start = Clock::now();
    for (int i = 0; i < 8; ++i, ++alone_calls) fsdp::Matmul(args);
    alone_s += SecondsSince(start);
    FSDP_RETURN_IF_ERROR(barrier());
    start = Clock::now();
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, comm.AllGather(gather));
    int calls = 0;
    double last_end = 0;
    while (!work->Test()) {
      fsdp::Matmul(args);
      ++calls;
      last_end = SecondsSince(start);
    }
    FSDP_RETURN_IF_ERROR(work->Wait(absl::Seconds(60)));
    overlapped_s += last_end;
    overlapped_calls += calls;
  }
  if (alone_calls == 0 || overlapped_calls == 0 || overlapped_s <= 0) {
    return absl::InternalError("the collective ended before one product: no overlap measured");
  }
  const double alone = flops * alone_calls / alone_s;
  const double overlapped = flops * overlapped_calls / overlapped_s;
  return std::clamp(1 - overlapped / alone, 0.0, 0.95);
}

// A launched rank: the two all-gathers and the collectives' share of
// compute; rank 0 writes the rows, and the share to the same file + ".share".
int RunRank() {
  comm::CommunicatorOptions options;
  options.rendezvous_timeout = absl::Seconds(120);
  absl::StatusOr<std::unique_ptr<comm::Communicator>> created =
      comm::Communicator::CreateFromEnvironment(options);
  if (!created.ok()) {
    std::fprintf(stderr, "plan_calibrate: joining the job failed: %s\n",
                 created.status().ToString().c_str());
    return 3;
  }
  comm::Communicator& comm = **created;
  if (absl::StatusOr<fsdp::MatmulBackend> backend = UseChosenBackend(); !backend.ok()) {
    std::fprintf(stderr, "plan_calibrate: %s\n", backend.status().ToString().c_str());
    return 2;
  }
  std::vector<collective_bench::Row> rows;
  for (size_t bytes : {kSmallBytes, kLargeBytes}) {
    collective_bench::CellOptions cell;
    cell.warmup = bytes == kSmallBytes ? 50 : 3;
    cell.iters = bytes == kSmallBytes ? 400 : 10;
    absl::StatusOr<collective_bench::Row> row =
        collective_bench::MeasureCell(comm, cell, collective_bench::Collective::kAllGather, bytes);
    if (!row.ok() || row->wrong != 0) {
      std::fprintf(stderr, "plan_calibrate: rank %d: all_gather of %zu bytes: %s\n", comm.rank(),
                   bytes, row.ok() ? "wrong elements" : row.status().ToString().c_str());
      return 3;
    }
    rows.push_back(*row);
  }
  if (comm.rank() == 0) {
    const char* result_file = std::getenv(kResultFileVariable);
    if (result_file == nullptr) {
      std::fprintf(stderr, "plan_calibrate: a rank needs %s (run without a launcher)\n",
                   kResultFileVariable);
      return 2;
    }
    absl::Status written = collective_bench::WriteCsv(result_file, rows);
    if (!written.ok()) {
      std::fprintf(stderr, "plan_calibrate: %s\n", written.ToString().c_str());
      return 1;
    }
  }
  absl::StatusOr<double> share = CollectiveComputeShare(comm);
  if (!share.ok()) {
    std::fprintf(stderr, "plan_calibrate: rank %d: the collectives' share of compute: %s\n",
                 comm.rank(), share.status().ToString().c_str());
    return 3;
  }
  if (comm.rank() == 0) {
    absl::Status written = base::WriteFileAtomically(
        absl::StrCat(std::getenv(kResultFileVariable), ".share"), absl::StrCat(*share, "\n"));
    if (!written.ok()) {
      std::fprintf(stderr, "plan_calibrate: %s\n", written.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

struct Link {
  double latency_s = 0;
  double bandwidth = 0;
  double collective_compute_share = 0;  // CollectiveComputeShare
};

absl::StatusOr<Link> MeasureLink(int ranks, int argc, char** argv) {
  const std::string result_file =
      absl::StrCat(P_tmpdir, "/plan_calibrate.", getpid(), ".csv");
  comm::LaunchOptions options = comm::SelfLaunchOptions(ranks, argc, argv);
  options.extra_env[kResultFileVariable] = result_file;
  absl::StatusOr<int> result = comm::LaunchLocalRanks(options);
  if (!result.ok() || *result != 0) {
    std::remove(result_file.c_str());
    return absl::InternalError(absl::StrCat(
        "the ", ranks, "-rank all-gather job failed: ",
        result.ok() ? absl::StrCat("exit ", *result) : result.status().ToString()));
  }
  absl::StatusOr<std::vector<collective_bench::Row>> rows = collective_bench::ReadCsv(result_file);
  absl::StatusOr<std::string> share_text = base::ReadWholeFile(result_file + ".share");
  std::remove(result_file.c_str());
  std::remove((result_file + ".share").c_str());
  if (!rows.ok()) return rows.status();
  if (!share_text.ok()) return share_text.status();
  if (rows->size() != 2) return absl::InternalError("the all-gather job wrote no two rows");
  // t = a + S f / B with f = (n-1)/n, for both sizes.
  const double f = (ranks - 1.0) / ranks;
  const double t_small = (*rows)[0].time_us * 1e-6, t_large = (*rows)[1].time_us * 1e-6;
  Link link;
  link.bandwidth = f * (static_cast<double>(kLargeBytes) - kSmallBytes) / (t_large - t_small);
  link.latency_s = std::max(0.0, t_small - f * kSmallBytes / link.bandwidth);
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(*share_text), &link.collective_compute_share)) {
    return absl::InternalError(
        absl::StrCat("the all-gather job wrote no share of compute: \"", *share_text, "\""));
  }
  std::printf("# all_gather at %d ranks: %zu bytes %.1f us, %zu bytes %.0f us\n", ranks,
              kSmallBytes, t_small * 1e6, kLargeBytes, t_large * 1e6);
  std::printf("# compute while 64 MiB all-gathers run, every rank at once: %.1f%% slower\n",
              100 * link.collective_compute_share);
  return link;
}

std::string Resolve(const std::string& path) {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (path.empty() || path[0] == '/' || workspace == nullptr) return path;
  return absl::StrCat(workspace, "/", path);
}

absl::Status Calibrate(int argc, char** argv) {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const int ranks_per_node = absl::GetFlag(FLAGS_ranks_per_node);
  if (ranks < 2) return absl::InvalidArgumentError("--ranks must be at least 2");
  if (ranks_per_node < 1) return absl::InvalidArgumentError("--ranks_per_node must be at least 1");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  fsdp::SetMatmulThreads(1);
  FSDP_ASSIGN_OR_RETURN(const fsdp::MatmulBackend backend, UseChosenBackend());
  const std::string kernels = fsdp::MatmulKernelDescription(backend);
  std::printf("# CPU: %s, %d cores; matmul %s\n", CpuModel().c_str(), cores, kernels.c_str());

  fsdp::proto::HardwareDescription hw;
  hw.set_name("this-machine");
  // One thread (a rank per core or more), then every core as one rank's
  // threads (a lone rank: train_gpt gives it cores / ranks threads).
  std::vector<int> thread_counts = {1};
  if (cores > 1) thread_counts.push_back(cores);
  for (int threads : thread_counts) {
    for (fsdp::NumType type : {fsdp::NumType::kF32, fsdp::NumType::kBF16}) {
      for (const Shape& s : kShapes) {
        const double rate = ProductRate(s, type, threads);
        fsdp::proto::ProductRate* entry = hw.add_product_rates();
        entry->set_dtype(type == fsdp::NumType::kBF16 ? "bf16" : "fp32");
        entry->set_min_dimension(s.min_dimension);
        entry->set_flops_per_s(std::round(rate / 1e6) * 1e6);
        if (threads > 1) entry->set_threads(threads);
        std::printf("# %s %lld x %lld x %lld, %d thread(s): %.1f GFLOP/s\n", entry->dtype().c_str(),
                    static_cast<long long>(s.m), static_cast<long long>(s.n),
                    static_cast<long long>(s.k), threads, rate / 1e9);
      }
    }
  }
  const double memory = MemoryBandwidth(1);
  hw.set_memory_bandwidth_bytes_per_s(std::round(memory / 1e6) * 1e6);
  std::printf("# memory: %.1f GB/s\n", memory / 1e9);
  const double cv = ComputeTimeCv();
  hw.set_compute_time_cv(std::round(cv * 1e4) / 1e4);
  std::printf("# compute time cv: %.4f\n", cv);
  hw.set_ranks_per_node(ranks_per_node);
  hw.set_processors_per_node(cores);
  hw.set_network_rails_per_ring(1);  // one host, no network adapters of its own
  hw.set_memory_bytes_per_processor(static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                                    sysconf(_SC_PAGESIZE) / cores);
  FSDP_ASSIGN_OR_RETURN(const Link link, MeasureLink(ranks, argc, argv));
  for (fsdp::proto::LinkLevel* level : {hw.mutable_intra_node(), hw.mutable_inter_node()}) {
    level->set_latency_s(std::round(link.latency_s * 1e8) / 1e8);
    level->set_bandwidth_bytes_per_s(std::round(link.bandwidth / 1e6) * 1e6);
  }
  // No launch cost of its own: the product rates are measured through the
  // runtime's calls, its fixed costs in them.
  hw.mutable_framework_overhead()->set_kernel_launch_s(0);
  hw.mutable_framework_overhead()->set_collective_compute_share(
      std::round(link.collective_compute_share * 1e3) / 1e3);
  FSDP_RETURN_IF_ERROR(fsdp::plan::ValidateHardwareDescription(hw));

  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::vector<std::string> command(argv, argv + argc);
  command[0] = "plan_calibrate";
  const std::string text = absl::StrCat(
      "# proto-file: proto/hardware.proto\n# proto-message: fsdp.proto.HardwareDescription\n#\n",
      "# This machine, measured by //examples:plan_calibrate on ", date, ":\n#   ",
      absl::StrJoin(command, " "), "\n# CPU: ", CpuModel(), ", ", cores,
      " cores; matmul ", kernels, "\n",
      "# One processor = one core, one thread (a rank gets min(1, cores / ranks) of\n"
      "# one; the entries with threads are one rank on all the cores). Product rates:\n"
      "# best of 10 rounds per shape class, operands cycled through 128 MiB (cold);\n"
      "# memory: a two-read one-write pass over 64 MiB arrays; links: all-gathers of\n",
      "# ", kSmallBytes, " and ", kLargeBytes, " bytes at ", ranks,
      " ranks, and products while they run. There is no second node here: inter_node\n"
      "# repeats intra_node. The machine "
      "is shared, so the figures move between sittings.\n",
      fsdp::plan::HardwareDescriptionToText(hw));
  const std::string out = Resolve(absl::GetFlag(FLAGS_out));
  FSDP_RETURN_IF_ERROR(base::WriteFileAtomically(out, text));
  std::printf("# wrote %s\n", out.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures this machine for the step-time model:\n"
      "  bazel run -c opt //examples:plan_calibrate -- [--out=FILE] [--ranks=2]");
  absl::ParseCommandLine(argc, argv);
  if (comm::IsLaunchedRank()) return RunRank();
  absl::Status status = Calibrate(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "plan_calibrate: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
