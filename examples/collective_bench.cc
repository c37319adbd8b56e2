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
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
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
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
#include "comm/launcher/launcher.h"
#include "comm/status_macros.h"

ABSL_FLAG(std::string, nproc, "2",
          "Ranks to launch: a number, or a comma-separated list run one after "
          "another (e.g. 2,4). Ignored when already started as a rank.");
ABSL_FLAG(std::string, min_bytes, "4K", "Smallest total buffer size (K/M/G suffixes).");
ABSL_FLAG(std::string, max_bytes, "256M", "Largest total buffer size (doubling from min).");
ABSL_FLAG(int, iters, 20, "Timed iterations per size.");
ABSL_FLAG(int, warmup, 5, "Untimed iterations per size before timing.");
ABSL_FLAG(std::string, dtype, "fp32", "fp32 or bf16.");
ABSL_FLAG(std::string, algorithm, "auto", "auto, ring or latency (not for broadcast).");
ABSL_FLAG(std::string, collectives, "all_gather,reduce_scatter,all_reduce,broadcast",
          "Comma-separated subset to run.");
ABSL_FLAG(std::string, csv, "",
          "Write rows to this file (atomically): "
          "collective,ranks,bytes,time_us,algbw_gbps,busbw_gbps.");
ABSL_FLAG(bool, perftest, false,
          "Also measure `ucx_perftest -t tag_bw` at each size and compare.");
ABSL_FLAG(int, timeout_s, 600, "Timeout of every collective's Wait().");
ABSL_FLAG(std::string, max_segment_bytes, "1M",
          "Pipeline segment size of the ring algorithms (CommunicatorOptions).");

namespace {

// Set by the driver for its ranks: rank 0 writes its rows there.
constexpr char kResultFileVariable[] = "FSDP_COLLECTIVE_BENCH_RESULT_FILE";
constexpr char kCsvHeader[] = "collective,ranks,bytes,time_us,algbw_gbps,busbw_gbps";
constexpr char kPerftestName[] = "ucx_perftest_tag_bw";
constexpr size_t kGoalBytes = size_t{64} << 20;

enum class Collective { kAllGather, kReduceScatter, kAllReduce, kBroadcast };

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kBroadcast: return "broadcast";
  }
  return "?";
}

// busbw / algbw, nccl-tests' PERFORMANCE.md.
double BusFactor(Collective c, int n) {
  switch (c) {
    case Collective::kAllGather:
    case Collective::kReduceScatter: return (n - 1.0) / n;
    case Collective::kAllReduce: return 2.0 * (n - 1.0) / n;
    case Collective::kBroadcast: return 1.0;
  }
  return 1.0;
}

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
  absl::Duration timeout;
  size_t max_segment_bytes = 0;
};

struct Row {
  std::string collective;
  int ranks = 0;
  size_t bytes = 0;
  size_t count = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong = 0;
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
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--algorithm=", config.algorithm_name, ": expected auto, ring or latency"));
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

// ---------------------------------------------------------------------------
// CSV

std::string CsvLine(const Row& row) {
  return absl::StrFormat("%s,%d,%d,%.3f,%.4f,%.4f", row.collective, row.ranks, row.bytes,
                         row.time_us, row.algbw_gbps, row.busbw_gbps);
}

// Writes to a temporary file beside `path`, then renames it over `path`, so
// a reader never sees half a file.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot create ", temporary, " (for --csv=", path, "): ", strerror(errno),
          "; does the directory exist and is it writable?"));
    }
    out << contents;
    out.flush();
    if (!out) {
      return absl::InternalError(absl::StrCat("writing ", temporary, " failed"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    std::remove(temporary.c_str());
    return absl::InternalError(
        absl::StrCat("renaming ", temporary, " to ", path, ": ", strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status WriteCsv(const std::string& path, const std::vector<Row>& rows) {
  std::string text = absl::StrCat(kCsvHeader, "\n");
  for (const Row& row : rows) absl::StrAppend(&text, CsvLine(row), "\n");
  return WriteFileAtomically(path, text);
}

absl::StatusOr<std::vector<Row>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no results in ", path));
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);
  if (line != kCsvHeader) {
    return absl::DataLossError(absl::StrCat(path, ": unexpected header '", line, "'"));
  }
  while (std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    Row row;
    if (fields.size() != 6 || !absl::SimpleAtoi(fields[1], &row.ranks) ||
        !absl::SimpleAtoi(fields[2], &row.bytes) ||
        !absl::SimpleAtod(fields[3], &row.time_us) ||
        !absl::SimpleAtod(fields[4], &row.algbw_gbps) ||
        !absl::SimpleAtod(fields[5], &row.busbw_gbps)) {
      return absl::DataLossError(absl::StrCat(path, ": malformed line '", line, "'"));
    }
    row.collective = fields[0];
    rows.push_back(row);
  }
  return rows;
}

// ---------------------------------------------------------------------------
// ucx_perftest

// Runs `argv` and returns its stdout (stderr discarded).
absl::StatusOr<std::string> RunAndCapture(std::vector<std::string> argv) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) dup2(null_fd, STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execvp(c_argv[0], c_argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string output;
  char buffer[4096];
  for (ssize_t got; (got = read(pipe_fds[0], buffer, sizeof(buffer))) != 0;) {
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    output.append(buffer, got);
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(
        argv[0], " failed (", WIFEXITED(status) ? "exit " : "signal ",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
        WIFEXITED(status) && WEXITSTATUS(status) == 127 ? ", not installed? apt install ucx-utils" : "",
        ")"));
  }
  return output;
}

// One tag_bw measurement between a server and a client process on
// 127.0.0.1, in GB/s (10^9 B/s). ucx_perftest -v prints CSV whose 6th field
// is overall_bw in MiB/s.
absl::StatusOr<double> MeasureTagBandwidth(size_t bytes) {
  absl::StatusOr<int> port = comm::PickFreePort();
  if (!port.ok()) return port.status();
  const int iterations =
      static_cast<int>(std::clamp<size_t>((size_t{1} << 30) / bytes, 5, 2000));
  std::vector<std::string> common = {
      "-t", "tag_bw", "-s", absl::StrCat(bytes), "-n", absl::StrCat(iterations),
      "-w", absl::StrCat(std::max(1, iterations / 10)), "-f", "-v", "-p", absl::StrCat(*port)};
  std::vector<std::string> server = {"ucx_perftest"};
  server.insert(server.end(), common.begin(), common.end());
  pid_t server_pid = fork();
  if (server_pid < 0) return absl::InternalError("fork failed");
  if (server_pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    std::vector<char*> c_argv;
    for (std::string& a : server) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    execvp(c_argv[0], c_argv.data());
    _exit(127);
  }
  std::vector<std::string> client = {"ucx_perftest", "127.0.0.1"};
  client.insert(client.end(), common.begin(), common.end());
  absl::StatusOr<std::string> output = absl::InternalError("not run");
  // The server needs a moment to listen; the client does not retry by itself.
  for (int attempt = 0; attempt < 20; ++attempt) {
    absl::SleepFor(absl::Milliseconds(100));
    int status = 0;
    if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
      server_pid = -1;
      break;
    }
    output = RunAndCapture(client);
    if (output.ok()) break;
  }
  if (server_pid > 0) {
    // It exits after the test; after a failed client it may still listen.
    for (int i = 0; i < 50 && waitpid(server_pid, nullptr, WNOHANG) == 0; ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    kill(server_pid, SIGKILL);
    waitpid(server_pid, nullptr, 0);
  }
  if (!output.ok()) {
    return absl::Status(output.status().code(),
                        absl::StrCat("ucx_perftest tag_bw at ", bytes,
                                     " bytes: ", output.status().message()));
  }
  std::vector<std::string> lines = absl::StrSplit(*output, '\n', absl::SkipWhitespace());
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::vector<std::string> fields = absl::StrSplit(*it, ',');
    double mib_per_s = 0;
    if (fields.size() >= 6 && absl::SimpleAtod(absl::StripAsciiWhitespace(fields[5]),
                                               &mib_per_s)) {
      return mib_per_s * 1048576.0 / 1e9;
    }
  }
  return absl::DataLossError(
      absl::StrCat("cannot parse ucx_perftest output: ", output->substr(0, 300)));
}

// The best of a few runs: on a shared machine a run is only ever slowed
// down, and the goals compare against what the link can do.
constexpr int kPerftestRuns = 3;

std::vector<Row> MeasurePerftestSweep(const std::vector<size_t>& sizes) {
  std::vector<Row> rows;
  std::printf("# ucx_perftest -t tag_bw over loopback (2 processes, nothing else of ours "
              "running; best of %d runs)\n", kPerftestRuns);
  for (size_t bytes : sizes) {
    absl::StatusOr<double> gbps = absl::InternalError("not run");
    for (int run = 0; run < kPerftestRuns; ++run) {
      absl::StatusOr<double> once = MeasureTagBandwidth(bytes);
      if (!once.ok()) {
        gbps = once;
        break;
      }
      if (!gbps.ok() || *once > *gbps) gbps = once;
    }
    if (!gbps.ok()) {
      std::printf("#   %zu bytes: %s\n", bytes, std::string(gbps.status().message()).c_str());
      continue;
    }
    Row row;
    row.collective = kPerftestName;
    row.ranks = 2;
    row.bytes = bytes;
    row.algbw_gbps = row.busbw_gbps = *gbps;
    row.time_us = bytes / (*gbps * 1e3);
    rows.push_back(row);
    std::printf("#   %12zu bytes  %8.2f GB/s\n", bytes, *gbps);
  }
  std::fflush(stdout);
  return rows;
}

// ---------------------------------------------------------------------------
// One rank's work

// Small integers: every sum over up to 85 ranks is exact in fp32 and bf16.
float InputValue(int rank, size_t index) {
  return static_cast<float>(static_cast<int>((rank * 3 + index) % 7) - 3);
}

void Fill(comm::Dtype dtype, int rank, size_t offset, std::byte* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    float value = InputValue(rank, offset + i);
    if (dtype == comm::Dtype::kFloat32) {
      std::memcpy(out + 4 * i, &value, 4);
    } else {
      comm::BFloat16 bits = comm::FloatToBFloat16(value);
      std::memcpy(out + 2 * i, &bits, 2);
    }
  }
}

float Read(comm::Dtype dtype, const std::byte* in, size_t i) {
  if (dtype == comm::Dtype::kFloat32) {
    float value;
    std::memcpy(&value, in + 4 * i, 4);
    return value;
  }
  comm::BFloat16 bits;
  std::memcpy(&bits, in + 2 * i, 2);
  return comm::BFloat16ToFloat(bits);
}

// Buffers and posting for one (collective, size) cell.
class Cell {
 public:
  Cell(comm::Communicator& comm, const Config& config, Collective collective,
       size_t nominal_bytes)
      : comm_(comm), config_(config), collective_(collective) {
    const int n = comm.size();
    const size_t element = comm::DtypeSize(config.dtype);
    if (collective == Collective::kAllGather || collective == Collective::kReduceScatter) {
      count_ = nominal_bytes / (element * n);  // per rank
      big_.assign(count_ * n * element, std::byte{0});
      small_.assign(count_ * element, std::byte{0});
    } else {
      count_ = nominal_bytes / element;
      big_.assign(count_ * element, std::byte{0});
    }
  }

  size_t count() const { return count_; }
  size_t total_bytes() const { return big_.size(); }

  absl::StatusOr<comm::WorkHandle> Post() {
    switch (collective_) {
      case Collective::kAllGather: {
        comm::AllGatherOptions options;
        options.input = small_;
        options.output = absl::MakeSpan(big_);
        options.algorithm = config_.algorithm;
        return comm_.AllGather(options);
      }
      case Collective::kReduceScatter: {
        comm::ReduceScatterOptions options;
        options.input = big_;
        options.output = absl::MakeSpan(small_);
        options.dtype = config_.dtype;
        options.algorithm = config_.algorithm;
        return comm_.ReduceScatter(options);
      }
      case Collective::kAllReduce: {
        comm::AllReduceOptions options;
        options.buffer = absl::MakeSpan(big_);
        options.dtype = config_.dtype;
        options.algorithm = config_.algorithm;
        return comm_.AllReduce(options);
      }
      case Collective::kBroadcast: {
        comm::BroadcastOptions options;
        options.buffer = absl::MakeSpan(big_);
        options.root = 0;
        return comm_.Broadcast(options);
      }
    }
    return absl::InternalError("unknown collective");
  }

  // Fresh inputs for the checked iteration. (The timed ones run on zeros: an
  // in-place all-reduce of anything else grows without bound.)
  void FillInputs() {
    const int r = comm_.rank();
    const comm::Dtype dtype = config_.dtype;
    switch (collective_) {
      case Collective::kAllGather:
        Fill(dtype, r, 0, small_.data(), count_);
        break;
      case Collective::kReduceScatter:
      case Collective::kAllReduce:
        Fill(dtype, r, 0, big_.data(), big_.size() / comm::DtypeSize(dtype));
        break;
      case Collective::kBroadcast:
        if (r == 0) Fill(dtype, 0, 0, big_.data(), count_);
        else std::fill(big_.begin(), big_.end(), std::byte{0xFF});  // NaN
        break;
    }
  }

  // Elements of this rank's result that differ from the reference.
  int64_t CountWrong() const {
    const int n = comm_.size();
    const comm::Dtype dtype = config_.dtype;
    auto sum_over_ranks = [n](size_t index) {
      float sum = 0;
      for (int p = 0; p < n; ++p) sum += InputValue(p, index);
      return sum;
    };
    int64_t wrong = 0;
    switch (collective_) {
      case Collective::kAllGather:
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < count_; ++i) {
            wrong += Read(dtype, big_.data(), p * count_ + i) != InputValue(p, i);
          }
        }
        break;
      case Collective::kReduceScatter:
        for (size_t i = 0; i < count_; ++i) {
          wrong += Read(dtype, small_.data(), i) != sum_over_ranks(comm_.rank() * count_ + i);
        }
        break;
      case Collective::kAllReduce:
        for (size_t i = 0; i < count_; ++i) {
          wrong += Read(dtype, big_.data(), i) != sum_over_ranks(i);
        }
        break;
      case Collective::kBroadcast:
        for (size_t i = 0; i < count_; ++i) {
          wrong += Read(dtype, big_.data(), i) != InputValue(0, i);
        }
        break;
    }
    return wrong;
  }

 private:
  comm::Communicator& comm_;
  const Config& config_;
  Collective collective_;
  size_t count_ = 0;
  std::vector<std::byte> big_;    // the total buffer ("size" column)
  std::vector<std::byte> small_;  // per-rank side of all-gather / reduce-scatter
};

absl::Status PostAndWait(Cell& cell, absl::Duration timeout) {
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, cell.Post());
  return work->Wait(timeout);
}

// Max of `time_us` and sum of `wrong` over ranks, via an all-gather (the
// API has no max reduction).
absl::StatusOr<std::pair<double, int64_t>> CombineOverRanks(comm::Communicator& comm,
                                                             double time_us, int64_t wrong,
                                                             absl::Duration timeout) {
  struct Sample {
    double time_us;
    int64_t wrong;
  };
  Sample mine{time_us, wrong};
  std::vector<Sample> all(comm.size());
  comm::AllGatherOptions options;
  options.input = absl::Span<const std::byte>(reinterpret_cast<const std::byte*>(&mine),
                                              sizeof(mine));
  options.output = comm::AsBytes(absl::MakeSpan(all));
  FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, comm.AllGather(options));
  FSDP_RETURN_IF_ERROR(work->Wait(timeout));
  std::pair<double, int64_t> combined{0, 0};
  for (const Sample& s : all) {
    combined.first = std::max(combined.first, s.time_us);
    combined.second += s.wrong;
  }
  return combined;
}

absl::StatusOr<Row> MeasureCell(comm::Communicator& comm, const Config& config,
                                Collective collective, size_t nominal_bytes) {
  Cell cell(comm, config, collective, nominal_bytes);
  for (int i = 0; i < config.warmup; ++i) {
    FSDP_RETURN_IF_ERROR(PostAndWait(cell, config.timeout));
  }
  {
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle barrier, comm.Barrier());
    FSDP_RETURN_IF_ERROR(barrier->Wait(config.timeout));
  }
  const absl::Time start = absl::Now();
  for (int i = 0; i < config.iters; ++i) {
    FSDP_RETURN_IF_ERROR(PostAndWait(cell, config.timeout));
  }
  const double time_us = absl::ToDoubleMicroseconds(absl::Now() - start) / config.iters;
  cell.FillInputs();
  FSDP_RETURN_IF_ERROR(PostAndWait(cell, config.timeout));
  FSDP_ASSIGN_OR_RETURN(auto combined,
                        CombineOverRanks(comm, time_us, cell.CountWrong(), config.timeout));
  Row row;
  row.collective = CollectiveName(collective);
  row.ranks = comm.size();
  row.bytes = cell.total_bytes();
  row.count = cell.count();
  row.time_us = combined.first;
  row.wrong = combined.second;
  row.algbw_gbps = row.time_us > 0 ? row.bytes / (row.time_us * 1e3) : 0;
  row.busbw_gbps = row.algbw_gbps * BusFactor(collective, comm.size());
  return row;
}

void PrintTableHeader(const Config& config, Collective collective, int ranks) {
  std::printf("#\n# %s  ranks: %d  dtype: %s  algorithm: %s  iters: %d  warmup: %d\n",
              CollectiveName(collective), ranks, comm::DtypeName(config.dtype),
              collective == Collective::kBroadcast ? "n/a (root 0)"
                                                   : config.algorithm_name.c_str(),
              config.iters, config.warmup);
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
// Comparison with ucx_perftest and the speed goals

const Row* FindRow(const std::vector<Row>& rows, const std::string& collective, int ranks,
                   size_t bytes) {
  for (const Row& row : rows) {
    if (row.collective == collective && row.ranks == ranks && row.bytes == bytes) return &row;
  }
  return nullptr;
}

// Collective rows have their actual total bytes (rounded down to a multiple
// of ranks * element size); perftest rows have the nominal size. A row
// belongs to the smallest nominal size at or above it (sizes double).
const Row* PerftestRowFor(const std::vector<Row>& perftest, size_t bytes) {
  const Row* best = nullptr;
  for (const Row& row : perftest) {
    if (row.bytes >= bytes && row.bytes < 2 * bytes &&
        (best == nullptr || row.bytes < best->bytes)) {
      best = &row;
    }
  }
  return best;
}

// The nominal size a row was measured at (a power-of-two multiple of min).
const Row* RowNear(const std::vector<Row>& rows, const std::string& collective, int ranks,
                   size_t nominal) {
  for (const Row& row : rows) {
    if (row.collective == collective && row.ranks == ranks && row.bytes <= nominal &&
        row.bytes * 2 > nominal) {
      return &row;
    }
  }
  return nullptr;
}

void PrintComparison(const std::vector<Row>& rows, const std::vector<Row>& perftest) {
  if (perftest.empty()) return;
  std::printf("#\n# busbw beside ucx_perftest tag_bw at the same size\n");
  std::printf("# %-15s %5s %12s %11s %11s %7s\n", "collective", "ranks", "size",
              "busbw(GB/s)", "tag_bw", "ratio");
  for (const Row& row : rows) {
    const Row* p = PerftestRowFor(perftest, row.bytes);
    if (p == nullptr) continue;
    std::printf("  %-15s %5d %12zu %11.3f %11.3f %6.0f%%\n", row.collective.c_str(),
                row.ranks, row.bytes, row.busbw_gbps, p->busbw_gbps,
                100.0 * row.busbw_gbps / p->busbw_gbps);
  }
}

void PrintGoal(const std::string& goal, std::optional<bool> met, const std::string& detail) {
  std::printf("  %-62s %-8s %s\n", goal.c_str(),
              !met.has_value() ? "n/a" : *met ? "met" : "NOT met", detail.c_str());
}

void PrintGoals(const std::vector<Row>& rows, const std::vector<Row>& perftest) {
  std::printf("#\n# speed goals (noisy when the machine is busy)\n");
  const Row* tag = nullptr;
  for (const Row& p : perftest) {
    if (p.bytes == kGoalBytes) tag = &p;
  }
  struct BandwidthGoal {
    const char* collective;
    double fraction;
  };
  for (BandwidthGoal g : {BandwidthGoal{"all_gather", 0.8},
                          BandwidthGoal{"reduce_scatter", 0.4},
                          BandwidthGoal{"all_reduce", 0.4}}) {
    const Row* row = RowNear(rows, g.collective, 2, kGoalBytes);
    std::string goal = absl::StrFormat("%s busbw >= %.0f%% of tag_bw at 64 MiB, 2 ranks",
                                       g.collective, 100 * g.fraction);
    if (row == nullptr || tag == nullptr) {
      PrintGoal(goal, std::nullopt, "(needs --nproc including 2, --perftest, 64M in range)");
      continue;
    }
    double ratio = row->busbw_gbps / tag->busbw_gbps;
    PrintGoal(goal, ratio >= g.fraction,
              absl::StrFormat("%.2f / %.2f GB/s = %.0f%%", row->busbw_gbps, tag->busbw_gbps,
                              100 * ratio));
  }
  {
    const Row* row = FindRow(rows, "all_reduce", 2, 4096);
    std::string goal = "all_reduce of 4 KiB at 2 ranks < 20 us";
    if (row == nullptr) {
      PrintGoal(goal, std::nullopt, "(needs --nproc including 2 and 4K in range)");
    } else {
      PrintGoal(goal, row->time_us < 20, absl::StrFormat("%.1f us", row->time_us));
    }
  }
  for (const char* collective : {"all_gather", "reduce_scatter", "all_reduce", "broadcast"}) {
    const Row* two = RowNear(rows, collective, 2, kGoalBytes);
    const Row* four = RowNear(rows, collective, 4, kGoalBytes);
    std::string goal =
        absl::StrCat(collective, " busbw at 4 ranks >= half of 2 ranks, 64 MiB");
    if (two == nullptr || four == nullptr) {
      PrintGoal(goal, std::nullopt, "(needs --nproc 2,4 and 64M in range)");
      continue;
    }
    PrintGoal(goal, four->busbw_gbps >= 0.5 * two->busbw_gbps,
              absl::StrFormat("%.2f vs %.2f GB/s", four->busbw_gbps, two->busbw_gbps));
  }
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
    perftest = MeasurePerftestSweep(sizes);
  }
  comm::CommunicatorOptions options;
  options.max_segment_bytes = config.max_segment_bytes;
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
  // Job warm-up: the first collectives of a fresh job pay for connection
  // set-up, first-touch page faults and UCX's lazy initialisation (the first
  // table's small sizes came out 5x slower without this).
  for (Collective collective : config.collectives) {
    for (size_t bytes : {sizes.front(), sizes.back()}) {
      Cell cell(comm, config, collective, bytes);
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
      absl::StatusOr<Row> row = MeasureCell(comm, config, collective, bytes);
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
      std::vector<Row> all = rows;
      PrintGoals(all, perftest);
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
  if (config.perftest) perftest = MeasurePerftestSweep(sizes);
  std::vector<Row> rows;
  for (int nproc : config.nprocs) {
    const std::string result_file =
        absl::StrCat(P_tmpdir, "/collective_bench.", getpid(), ".", nproc, ".csv");
    comm::LaunchOptions options = comm::SelfLaunchOptions(nproc, argc, argv);
    options.extra_env[kResultFileVariable] = result_file;
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
    PrintComparison(rows, perftest);
    PrintGoals(rows, perftest);
    rows.insert(rows.end(), perftest.begin(), perftest.end());
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

int main(int argc, char** argv) {
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
  absl::StatusOr<Config> config = ConfigFromFlags();
  if (!config.ok()) {
    std::fprintf(stderr, "collective_bench: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (comm::IsLaunchedRank()) return RunRank(*config);
  return RunDriver(*config, argc, argv);
}
