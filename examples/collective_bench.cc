// File: examples/collective_bench.cc
//
// Collective benchmark in the nccl-tests convention, over the public API
// (comm/communicator.h) and UCX on one host:
//
//   bazel run -c opt //examples:collective_bench -- --nproc 2
//   bazel run -c opt //examples:collective_bench -- --nproc 2,4 --perftest --csv=/tmp/b.csv
//
// Without RANK (or OMPI_/SLURM_ equivalents) in the environment the process
// is the *driver*: it re-launches this binary as N local ranks through
// comm/launcher/launcher.h, once per value of --nproc, collects rank 0's rows
// and writes --csv. Started by another launcher (mpirun, srun, torchrun,
// //comm/launcher:launch) it is a *rank* and runs one job directly.
//
// For each collective (all_gather, reduce_scatter, all_reduce, broadcast)
// and each size from --min_bytes to --max_bytes (doubling), every rank runs
// --warmup untimed iterations, then --iters timed ones (post, Wait, repeat);
// time_us is the mean per iteration on the slowest rank. Then one more
// iteration on fresh deterministic inputs is checked element by element
// against a reference; #wrong sums mismatches over ranks (any => exit 1).
//
// Columns (nccl-tests): size = total buffer bytes (all-gather output,
// reduce-scatter input, the all-reduce / broadcast buffer), count = elements
// per rank for all-gather / reduce-scatter and per buffer otherwise,
// algbw = size / time, busbw = algbw * factor with factor (n-1)/n for
// all-gather and reduce-scatter, 2(n-1)/n for all-reduce, 1 for broadcast:
// the bandwidth each rank's link must sustain, comparable across n and with
// a point-to-point benchmark. GB/s are 10^9 bytes per second.
//
// --perftest also runs `ucx_perftest -t tag_bw` between two processes over
// loopback at every size (in the driver before launching, or in rank 0
// before the rendezvous, so no rank competes with it) and prints busbw
// beside tag_bw, with the project's speed goals evaluated at 64 MiB.
//
// Memory: by default the buffers are transfer memory (comm/transfer_memory.h,
// transparent huge pages), as the training allocates its parameters and
// gradients, and ucx_perftest runs with UCX_ALLOC_PRIO=thp so that its
// buffers are huge pages too: single-copy CMA runs ~3x faster from them, on
// both sides of the comparison. --huge_pages=false uses 4 KiB pages on both
// sides. --in_place measures nccl-tests' in-place variant.
//
// This file holds the flags, the tables and the driver / rank entry points;
// one measured cell is collective_cell.h, the ucx_perftest runs are
// ucx_perftest_runner.h, the speed-goal report is bench_goals.h and the
// results CSV is bench_results.h.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
#include "comm/launcher/crash_trace.h"
#include "comm/launcher/launcher.h"
#include "examples/bench_goals.h"
#include "examples/bench_results.h"
#include "examples/collective_cell.h"
#include "examples/ucx_perftest_runner.h"
#include "examples/work_floor.h"

ABSL_FLAG(std::string, nproc, "2",
          "Ranks to launch: a number, or a comma-separated list run one after "
          "another (e.g. 2,4). Ignored when already started as a rank.");
ABSL_FLAG(std::string, min_bytes, "4K", "Smallest total buffer size (K/M/G suffixes).");
ABSL_FLAG(std::string, max_bytes, "256M", "Largest total buffer size (doubling from min).");
ABSL_FLAG(int, iters, 20, "Timed iterations per size.");
ABSL_FLAG(int, warmup, 5, "Untimed iterations per size before timing.");
ABSL_FLAG(std::string, dtype, "fp32", "fp32 or bf16.");
ABSL_FLAG(std::string, algorithm, "auto", "auto, ring, latency or direct (not for broadcast).");
ABSL_FLAG(std::string, collectives, "all_gather,reduce_scatter,all_reduce,broadcast",
          "Comma-separated subset to run.");
ABSL_FLAG(std::string, csv, "",
          "Write rows to this file (atomically): "
          "collective,ranks,bytes,time_us,algbw_gbps,busbw_gbps.");
ABSL_FLAG(bool, perftest, false,
          "Also measure `ucx_perftest -t tag_bw` at each size and compare.");
ABSL_FLAG(bool, floors, true,
          "With --perftest, also measure each collective's work floor at 64 MiB (its copies "
          "and sums alone, in pinned processes: examples/work_floor.h) and judge the goals "
          "against it too.");
ABSL_FLAG(int, timeout_s, 600, "Timeout of every collective's Wait().");
ABSL_FLAG(std::string, max_segment_bytes, "1M",
          "Pipeline segment size of the ring algorithms (CommunicatorOptions).");
ABSL_FLAG(bool, bind_cores, true,
          "Pin each launched rank to its share of the CPUs (comm::LaunchOptions::bind_to_cores): "
          "unpinned, two communicating ranks sometimes share one CPU and small-message "
          "latency jumps 4-8x.");
ABSL_FLAG(int, wait_spin_us, -1,
          "CommunicatorOptions::wait_spin in microseconds (-1: the library's default).");
ABSL_FLAG(bool, huge_pages, true,
          "Allocate the buffers with comm::AllocateTransferMemory (transparent huge pages, as "
          "the training does) and run ucx_perftest with UCX_ALLOC_PRIO=thp, so both sides use "
          "the same kind of memory; false: ordinary 4 KiB pages on both sides.");
ABSL_FLAG(bool, in_place, false,
          "nccl-tests' in-place variant: all-gather input = this rank's slot of the output, "
          "reduce-scatter output = this rank's chunk of the input.");

namespace collective_bench {
namespace {

// Set by the driver for its ranks: rank 0 writes its rows there.
constexpr char kResultFileVariable[] = "FSDP_COLLECTIVE_BENCH_RESULT_FILE";

struct Config {
  std::vector<int> nprocs;
  size_t min_bytes = 0;
  size_t max_bytes = 0;
  int iters = 0;
  int warmup = 0;
  comm::Dtype dtype = comm::Dtype::kFloat32;
  comm::Algorithm algorithm = comm::Algorithm::kAuto;
  std::string algorithm_name;
  std::vector<Collective> collectives;
  std::string csv;
  bool perftest = false;
  bool floors = false;
  absl::Duration timeout;
  size_t max_segment_bytes = 0;
  bool huge_pages = true;
  bool in_place = false;
};

// ---------------------------------------------------------------------------
// Flags

// "4096", "4K", "4KiB", "64M", "1G" (binary multiples).
absl::StatusOr<size_t> ParseBytes(const std::string& flag, const std::string& text) {
  std::string t = absl::AsciiStrToUpper(text);
  for (const char* suffix : {"IB", "B"}) {
    if (t.size() > strlen(suffix) && absl::EndsWith(t, suffix)) {
      t.resize(t.size() - strlen(suffix));
      break;
    }
  }
  size_t multiplier = 1;
  if (!t.empty() && (t.back() == 'K' || t.back() == 'M' || t.back() == 'G')) {
    multiplier = t.back() == 'K' ? (1 << 10) : t.back() == 'M' ? (1 << 20) : (1 << 30);
    t.pop_back();
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(t, &value) || value == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", text, ": expected a positive byte count such as 4096, 4K, 64M or 1G"));
  }
  return static_cast<size_t>(value) * multiplier;
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config config;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_nproc), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 256) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nproc=", absl::GetFlag(FLAGS_nproc),
          ": expected rank counts between 1 and 256, e.g. 2 or 2,4"));
    }
    config.nprocs.push_back(n);
  }
  if (config.nprocs.empty()) return absl::InvalidArgumentError("--nproc is empty");
  FSDP_ASSIGN_OR_RETURN(config.min_bytes,
                        ParseBytes("min_bytes", absl::GetFlag(FLAGS_min_bytes)));
  FSDP_ASSIGN_OR_RETURN(config.max_bytes,
                        ParseBytes("max_bytes", absl::GetFlag(FLAGS_max_bytes)));
  if (config.min_bytes > config.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_bytes (", config.min_bytes, ") is larger than --max_bytes (",
        config.max_bytes, ")"));
  }
  if (config.max_bytes > (size_t{8} << 30)) {
    return absl::InvalidArgumentError("--max_bytes above 8G would not fit in memory here");
  }
  FSDP_ASSIGN_OR_RETURN(config.max_segment_bytes,
                        ParseBytes("max_segment_bytes", absl::GetFlag(FLAGS_max_segment_bytes)));
  config.iters = absl::GetFlag(FLAGS_iters);
  config.warmup = absl::GetFlag(FLAGS_warmup);
  if (config.iters < 1) return absl::InvalidArgumentError("--iters must be at least 1");
  if (config.warmup < 0) return absl::InvalidArgumentError("--warmup must be >= 0");
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "fp32") {
    config.dtype = comm::Dtype::kFloat32;
  } else if (dtype == "bf16") {
    config.dtype = comm::Dtype::kBFloat16;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype=", dtype, ": expected fp32 or bf16"));
  }
  config.algorithm_name = absl::GetFlag(FLAGS_algorithm);
  if (config.algorithm_name == "auto") {
    config.algorithm = comm::Algorithm::kAuto;
  } else if (config.algorithm_name == "ring") {
    config.algorithm = comm::Algorithm::kRing;
  } else if (config.algorithm_name == "latency") {
    config.algorithm = comm::Algorithm::kLatency;
  } else if (config.algorithm_name == "direct") {
    config.algorithm = comm::Algorithm::kDirect;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--algorithm=", config.algorithm_name, ": expected auto, ring, latency or direct"));
  }
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_collectives), ',', absl::SkipEmpty())) {
    bool found = false;
    for (Collective c : {Collective::kAllGather, Collective::kReduceScatter,
                         Collective::kAllReduce, Collective::kBroadcast}) {
      if (name == CollectiveName(c)) {
        config.collectives.push_back(c);
        found = true;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--collectives: unknown '", name,
          "'; expected a subset of all_gather,reduce_scatter,all_reduce,broadcast"));
    }
  }
  if (config.collectives.empty()) return absl::InvalidArgumentError("--collectives is empty");
  config.csv = absl::GetFlag(FLAGS_csv);
  // `bazel run` starts us in the runfiles tree; a relative path means the
  // directory the user ran bazel from.
  const char* user_directory = std::getenv("BUILD_WORKING_DIRECTORY");
  if (!config.csv.empty() && config.csv[0] != '/' && user_directory != nullptr) {
    config.csv = absl::StrCat(user_directory, "/", config.csv);
  }
  if (!config.csv.empty()) {
    // Checked now, not after minutes of measuring.
    const size_t slash = config.csv.rfind('/');
    const std::string directory = slash == std::string::npos ? "."
                                  : slash == 0               ? "/"
                                                             : config.csv.substr(0, slash);
    if (access(directory.c_str(), W_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--csv=", config.csv, ": directory ", directory, " is not writable (",
          strerror(errno), ")"));
    }
  }
  config.perftest = absl::GetFlag(FLAGS_perftest);
  config.floors = config.perftest && absl::GetFlag(FLAGS_floors);
  config.huge_pages = absl::GetFlag(FLAGS_huge_pages);
  config.in_place = absl::GetFlag(FLAGS_in_place);
  if (absl::GetFlag(FLAGS_timeout_s) < 1) {
    return absl::InvalidArgumentError("--timeout_s must be at least 1");
  }
  config.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  return config;
}

std::vector<size_t> Sizes(const Config& config) {
  std::vector<size_t> sizes;
  for (size_t bytes = config.min_bytes; bytes <= config.max_bytes; bytes *= 2) {
    sizes.push_back(bytes);
  }
  return sizes;
}

// The part of the flags one measured cell needs.
CellOptions CellOptionsOf(const Config& config) {
  CellOptions options;
  options.dtype = config.dtype;
  options.algorithm = config.algorithm;
  options.warmup = config.warmup;
  options.iters = config.iters;
  options.timeout = config.timeout;
  options.huge_pages = config.huge_pages;
  options.in_place = config.in_place;
  return options;
}

// ---------------------------------------------------------------------------
// Tables

// The memory and variant of this run, for the goals' header.
std::string Conditions(const Config& config) {
  return absl::StrCat(config.huge_pages ? "huge pages" : "4 KiB pages", " on both sides, ",
                      config.in_place ? "in place" : "out of place");
}

void PrintTableHeader(const Config& config, Collective collective, int ranks) {
  const bool has_variant =
      collective == Collective::kAllGather || collective == Collective::kReduceScatter;
  std::printf("#\n# %s  ranks: %d  dtype: %s  algorithm: %s  iters: %d  warmup: %d  %s  %s\n",
              CollectiveName(collective), ranks, comm::DtypeName(config.dtype),
              collective == Collective::kBroadcast ? "n/a (root 0)"
                                                   : config.algorithm_name.c_str(),
              config.iters, config.warmup,
              !has_variant ? "in place" : config.in_place ? "in place" : "out of place",
              config.huge_pages ? "huge pages" : "4 KiB pages");
  std::printf("# %12s %12s %6s %11s %11s %11s %7s\n", "size", "count", "type", "time_us",
              "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

void PrintRow(const Config& config, const Row& row) {
  std::printf("  %12zu %12zu %6s %11.2f %11.3f %11.3f %7lld\n", row.bytes, row.count,
              comm::DtypeName(config.dtype), row.time_us, row.algbw_gbps, row.busbw_gbps,
              static_cast<long long>(row.wrong));
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Entry points

int RunRank(const Config& config) {
  const char* rank_text = std::getenv("RANK");
  const bool is_rank0_by_env = rank_text == nullptr || std::string(rank_text) == "0";
  const char* result_file = std::getenv(kResultFileVariable);
  const std::vector<size_t> sizes = Sizes(config);
  // Under an external launcher there is no driver to run ucx_perftest: rank
  // 0 does it before the rendezvous, while the others wait there idle.
  std::vector<Row> perftest;
  if (config.perftest && result_file == nullptr && is_rank0_by_env) {
    perftest = MeasurePerftestSweep(sizes, config.huge_pages);
  }
  comm::CommunicatorOptions options;
  options.max_segment_bytes = config.max_segment_bytes;
  if (absl::GetFlag(FLAGS_wait_spin_us) >= 0) {
    options.wait_spin = absl::Microseconds(absl::GetFlag(FLAGS_wait_spin_us));
  }
  options.rendezvous_timeout = config.perftest ? absl::Minutes(10) : absl::Seconds(120);
  absl::StatusOr<std::unique_ptr<comm::Communicator>> created =
      comm::Communicator::CreateFromEnvironment(options);
  if (!created.ok()) {
    std::fprintf(stderr, "collective_bench: joining the job failed: %s\n",
                 created.status().ToString().c_str());
    return 3;
  }
  comm::Communicator& comm = **created;
  const bool printer = comm.rank() == 0;
  const CellOptions cell_options = CellOptionsOf(config);
  // Job warm-up: the first collectives of a fresh job pay for connection
  // set-up, first-touch page faults and UCX's lazy initialisation (the first
  // table's small sizes came out 5x slower without this).
  for (Collective collective : config.collectives) {
    for (size_t bytes : {sizes.front(), sizes.back()}) {
      Cell cell(comm, cell_options, collective, bytes);
      for (int i = 0; i < std::max(1, config.warmup); ++i) {
        absl::Status warmed = PostAndWait(cell, config.timeout);
        if (!warmed.ok()) {
          std::fprintf(stderr, "collective_bench: rank %d: warm-up %s: %s\n", comm.rank(),
                       CollectiveName(collective), warmed.ToString().c_str());
          return 3;
        }
      }
    }
  }
  std::vector<Row> rows;
  int64_t total_wrong = 0;
  for (Collective collective : config.collectives) {
    if (printer) PrintTableHeader(config, collective, comm.size());
    for (size_t bytes : sizes) {
      absl::StatusOr<Row> row = MeasureCell(comm, cell_options, collective, bytes);
      if (!row.ok()) {
        std::fprintf(stderr, "collective_bench: rank %d: %s at %zu bytes: %s\n", comm.rank(),
                     CollectiveName(collective), bytes, row.status().ToString().c_str());
        return 3;
      }
      total_wrong += row->wrong;
      if (printer) PrintRow(config, *row);
      rows.push_back(*row);
    }
  }
  if (printer) {
    if (!perftest.empty()) {
      PrintComparison(rows, perftest);
      PrintGoals(rows, perftest, /*floors=*/{}, Conditions(config));
      rows.insert(rows.end(), perftest.begin(), perftest.end());
    }
    const std::string destination = result_file != nullptr ? result_file : config.csv;
    if (!destination.empty()) {
      absl::Status written = WriteCsv(destination, rows);
      if (!written.ok()) {
        std::fprintf(stderr, "collective_bench: %s\n", written.ToString().c_str());
        return 1;
      }
    }
    if (total_wrong > 0) {
      std::printf("# FAILED: %lld wrong element(s) in total, see #wrong\n",
                  static_cast<long long>(total_wrong));
    }
  }
  return total_wrong > 0 ? 1 : 0;
}

int RunDriver(const Config& config, int argc, char** argv) {
  const std::vector<size_t> sizes = Sizes(config);
  std::vector<Row> perftest;
  if (config.perftest) perftest = MeasurePerftestSweep(sizes, config.huge_pages);
  std::vector<Row> rows;
  for (int nproc : config.nprocs) {
    const std::string result_file =
        absl::StrCat(P_tmpdir, "/collective_bench.", getpid(), ".", nproc, ".csv");
    comm::LaunchOptions options = comm::SelfLaunchOptions(nproc, argc, argv);
    options.extra_env[kResultFileVariable] = result_file;
    options.bind_to_cores = absl::GetFlag(FLAGS_bind_cores);
    std::printf("# launching %d rank(s)\n", nproc);
    std::fflush(stdout);
    absl::StatusOr<int> result = comm::LaunchLocalRanks(options);
    if (!result.ok() || *result != 0) {
      std::fprintf(stderr, "collective_bench: the %d-rank job failed: %s\n", nproc,
                   result.ok() ? absl::StrCat("exit ", *result).c_str()
                               : result.status().ToString().c_str());
      std::remove(result_file.c_str());
      return comm::JobExitCode(result);
    }
    absl::StatusOr<std::vector<Row>> job_rows = ReadCsv(result_file);
    std::remove(result_file.c_str());
    if (!job_rows.ok()) {
      std::fprintf(stderr, "collective_bench: %s\n", job_rows.status().ToString().c_str());
      return 1;
    }
    rows.insert(rows.end(), job_rows->begin(), job_rows->end());
  }
  if (config.perftest) {
    // After the jobs, so that the floors are measured close in time to
    // them (this host's memory bandwidth drifts from minute to minute).
    std::vector<Row> floors;
    if (config.floors && std::find(sizes.begin(), sizes.end(), kGoalBytes) != sizes.end()) {
      floors = MeasureFloorSweep(config.collectives, config.nprocs, kGoalBytes,
                                 config.huge_pages, config.in_place, config.iters);
    }
    PrintComparison(rows, perftest);
    PrintGoals(rows, perftest, floors, Conditions(config));
    rows.insert(rows.end(), perftest.begin(), perftest.end());
    rows.insert(rows.end(), floors.begin(), floors.end());
  }
  if (!config.csv.empty()) {
    absl::Status written = WriteCsv(config.csv, rows);
    if (!written.ok()) {
      std::fprintf(stderr, "collective_bench: %s\n", written.ToString().c_str());
      return 1;
    }
    std::printf("# wrote %zu rows to %s\n", rows.size(), config.csv.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace collective_bench

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::SetProgramUsageMessage(
      "Collective benchmark (nccl-tests columns). Example:\n"
      "  bazel run -c opt //examples:collective_bench -- --nproc 2,4 --perftest "
      "--csv=/tmp/bench.csv");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr, "collective_bench: unexpected argument '%s' (flags only; see --help)\n",
                 positional[1]);
    return 2;
  }
  absl::StatusOr<collective_bench::Config> config = collective_bench::ConfigFromFlags();
  if (!config.ok()) {
    std::fprintf(stderr, "collective_bench: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (comm::IsLaunchedRank()) return collective_bench::RunRank(*config);
  return collective_bench::RunDriver(*config, argc, argv);
}
