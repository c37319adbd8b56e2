// File: tests/integration/comm/collective_worker.cc
//
// One rank of the multi-process collective tests. It joins the job through
// comm::Communicator::CreateFromEnvironment() (so it runs under
// //comm/launcher:launch, torchrun-style env vars set by a test, mpirun or
// srun alike), runs one scenario, and reports on stdout in lines the tests
// parse:
//
//   [rank R/N] PASS <scenario>: <checks> checks in <ms> ms
//   [rank R/N] FAIL <case>: <what was wrong>                 (data mismatch)
//   [rank R/N] STATUS <CODE> after <ms> ms in <case>: <message>  (an error)
//
// Exit code: 0 all passed, 1 some data mismatched, 3 a collective or the
// rendezvous returned an error, 2 bad flags.
//
// Scenarios (--scenario; grid, inflight and split live in
// collective_scenarios.h):
//   grid      every collective x counts {0, 1, 7, 4096, 1 MiB + 3} x {fp32,
//             bf16} x algorithms {auto, ring, latency, direct}, plus bf16 rounding,
//             in-place all-gather and reduce-scatter, and broadcasts from
//             several roots.
//   inflight  seven different collectives posted back to back, then waited in
//             reverse order.
//   split     sub-communicators by parity and by blocks of three (reversed
//             keys), with collectives on child and parent in flight together.
//   all       grid, inflight and split, in that order.
//   kill      every rank posts a large all-reduce; --victim raises SIGKILL
//             right after posting (or, with --novictim_posts, just before),
//             with --posted_dir only once every survivor has posted;
//             survivors report what Wait() returned.
//   hang      like kill, but the victim does not die: with --hang_mode=stop it
//             raises SIGSTOP (the test kills it at the end), with
//             --hang_mode=spin it computes without calling the communicator
//             for --spin_ms, then posts its all-reduce and reports what
//             Wait() returned (it should hear that it was declared hung).
//             Survivors report what their Wait() returned.
//   join      rendezvous plus one barrier (the rendezvous-failure tests).
//   crash     after a barrier, --victim dereferences a bad pointer (a real
//             SIGSEGV, in CrashOnPurposeInTheVictim); the others wait on an
//             all-reduce the victim never posts.
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/dtype.h"
#include "comm/launcher/crash_trace.h"
#include "tests/integration/comm/collective_reference.h"
#include "tests/integration/comm/collective_scenarios.h"

ABSL_FLAG(std::string, scenario, "all",
          "grid | inflight | split | all | kill | hang | join | crash");
ABSL_FLAG(int64_t, timeout_ms, 60000, "Timeout of every Work::Wait() and Split().");
ABSL_FLAG(int64_t, rendezvous_timeout_ms, 60000,
          "CommunicatorOptions::rendezvous_timeout.");
ABSL_FLAG(std::string, algorithms, "auto,ring,latency,direct",
          "Comma-separated algorithms the grid runs.");
ABSL_FLAG(std::string, bf16_rounding, "per_hop",
          "How bf16 reductions may round: 'per_hop' (comm/communicator.h: partial "
          "sums travel as bf16; n ulps accepted) or 'once' (fp32 accumulation, one "
          "rounding; stricter). See collective_reference.h.");
ABSL_FLAG(int, victim, 1,
          "kill: the rank that raises SIGKILL mid-collective; crash: the rank that "
          "dies of SIGSEGV.");
ABSL_FLAG(bool, victim_posts, true,
          "kill: the victim posts its all-reduce before dying (data may be in "
          "flight) or dies before posting (the others wait for it).");
ABSL_FLAG(int64_t, kill_count, 16 << 20, "kill: fp32 elements of the all-reduce.");
ABSL_FLAG(int64_t, hang_timeout_ms, -1,
          "CommunicatorOptions::hang_timeout; -1: unset (FSDP_HANG_TIMEOUT_S or the "
          "default), 0: off.");
ABSL_FLAG(std::string, hang_mode, "stop", "hang: 'stop' (SIGSTOP) or 'spin' (compute).");
ABSL_FLAG(int64_t, spin_ms, 10000, "hang: how long a spinning victim computes.");
ABSL_FLAG(std::string, posted_dir, "",
          "kill: a directory shared by the ranks. Each survivor creates posted_<rank> "
          "in it once its all-reduce is posted, and the victim dies only when all "
          "have: the barrier alone lets the victim run ahead and die while the "
          "others still finish the barrier (they then fail in the barrier, not in "
          "the all-reduce). Empty: the barrier only.");

namespace comm_test {
namespace {

using comm::Algorithm;

std::string Prefix(int rank, int size) {
  return absl::StrCat("[rank ", rank, "/", size, "]");
}

// The env rank, for messages before a communicator exists.
int RankFromEnvironment() {
  const char* rank = std::getenv("RANK");
  return rank == nullptr ? -1 : std::atoi(rank);
}
int WorldSizeFromEnvironment() {
  const char* size = std::getenv("WORLD_SIZE");
  return size == nullptr ? -1 : std::atoi(size);
}

int ReportStatus(const std::string& prefix, absl::Time start, const std::string& where,
                 const absl::Status& status) {
  std::printf("%s STATUS %s after %lld ms in %s: %s\n", prefix.c_str(),
              absl::StatusCodeToString(status.code()).c_str(),
              static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - start)),
              where.c_str(), std::string(status.message()).c_str());
  std::fflush(stdout);
  return 3;
}

std::string PostedMarker(const std::string& directory, int rank) {
  return absl::StrCat(directory, "/posted_", rank);
}

// The victim's wait for every survivor's marker (see --posted_dir); false if
// one is missing after `timeout`.
bool AwaitSurvivorsPosted(const comm::Communicator& world, const std::string& directory,
                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (int rank = 0; rank < world.size(); ++rank) {
    if (rank == world.rank()) continue;
    while (access(PostedMarker(directory, rank).c_str(), F_OK) != 0) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(2));
    }
  }
  return true;
}

// Every rank posts a large all-reduce; the victim dies right after posting.
int RunKill(comm::Communicator& world, absl::Duration timeout) {
  const std::string prefix = Prefix(world.rank(), world.size());
  std::vector<float> values(absl::GetFlag(FLAGS_kill_count), 1.0f);
  // Align first, so that the survivors are already waiting when it dies.
  absl::Status aligned = [&]() -> absl::Status {
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.Barrier());
    return work->Wait(timeout);
  }();
  absl::Time start = absl::Now();
  if (!aligned.ok()) return ReportStatus(prefix, start, "barrier before kill", aligned);
  const bool victim = world.rank() == absl::GetFlag(FLAGS_victim);
  const bool victim_posts = absl::GetFlag(FLAGS_victim_posts);
  const std::string posted_dir = absl::GetFlag(FLAGS_posted_dir);
  if (victim && !posted_dir.empty() && !AwaitSurvivorsPosted(world, posted_dir, timeout)) {
    std::printf("%s FAIL kill: the survivors did not all post within %s\n", prefix.c_str(),
                absl::FormatDuration(timeout).c_str());
    return 1;
  }
  if (victim && !victim_posts) {
    std::printf("%s raising SIGKILL before posting the all-reduce\n", prefix.c_str());
    std::fflush(stdout);
    raise(SIGKILL);
  }
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(absl::MakeSpan(values));
  options.algorithm = Algorithm::kRing;
  absl::StatusOr<comm::WorkHandle> work = world.AllReduce(options);
  if (victim) {
    std::printf("%s raising SIGKILL mid-all-reduce\n", prefix.c_str());
    std::fflush(stdout);
    raise(SIGKILL);
  }
  if (!work.ok()) return ReportStatus(prefix, start, "posting all_reduce", work.status());
  if (!posted_dir.empty()) {
    FILE* marker = std::fopen(PostedMarker(posted_dir, world.rank()).c_str(), "w");
    if (marker != nullptr) std::fclose(marker);
  }
  absl::Status status = (*work)->Wait(timeout);
  if (status.ok()) {
    std::printf("%s PASS kill: all-reduce finished although rank %d died\n",
                prefix.c_str(), absl::GetFlag(FLAGS_victim));
    return 0;
  }
  int code = ReportStatus(prefix, start, "all_reduce", status);
  // Teardown with a dead peer must not hang either; the test checks exit time.
  return code;
}

// Every rank posts an all-reduce and waits; the victim stops or spins once
// every survivor has posted (so its silence and their waits start together).
int RunHang(comm::Communicator& world, absl::Duration timeout) {
  const std::string prefix = Prefix(world.rank(), world.size());
  std::vector<float> values(1 << 18, 1.0f);
  absl::Status aligned = [&]() -> absl::Status {
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.Barrier());
    return work->Wait(timeout);
  }();
  absl::Time start = absl::Now();
  if (!aligned.ok()) return ReportStatus(prefix, start, "barrier before hang", aligned);
  const bool victim = world.rank() == absl::GetFlag(FLAGS_victim);
  const std::string posted_dir = absl::GetFlag(FLAGS_posted_dir);
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(absl::MakeSpan(values));
  options.algorithm = Algorithm::kRing;
  if (victim) {
    if (!posted_dir.empty() && !AwaitSurvivorsPosted(world, posted_dir, timeout)) {
      std::printf("%s FAIL hang: the survivors did not all post within %s\n", prefix.c_str(),
                  absl::FormatDuration(timeout).c_str());
      return 1;
    }
    if (absl::GetFlag(FLAGS_hang_mode) == "stop") {
      std::printf("%s raising SIGSTOP\n", prefix.c_str());
      std::fflush(stdout);
      raise(SIGSTOP);
      std::printf("%s continued\n", prefix.c_str());
    } else {
      const absl::Duration spin = absl::Milliseconds(absl::GetFlag(FLAGS_spin_ms));
      std::printf("%s spinning for %s without calling the communicator\n", prefix.c_str(),
                  absl::FormatDuration(spin).c_str());
      std::fflush(stdout);
      volatile uint64_t sink = 0;
      const absl::Time until = absl::Now() + spin;
      while (absl::Now() < until) {
        for (int i = 0; i < 100000; ++i) sink = sink + i;
      }
    }
    start = absl::Now();
  }
  absl::StatusOr<comm::WorkHandle> work = world.AllReduce(options);
  if (!work.ok()) return ReportStatus(prefix, start, "posting all_reduce", work.status());
  if (!victim && !posted_dir.empty()) {
    FILE* marker = std::fopen(PostedMarker(posted_dir, world.rank()).c_str(), "w");
    if (marker != nullptr) std::fclose(marker);
  }
  absl::Status status = (*work)->Wait(timeout);
  if (status.ok()) {
    std::printf("%s PASS hang: all-reduce finished although rank %d hung\n", prefix.c_str(),
                absl::GetFlag(FLAGS_victim));
    return 0;
  }
  return ReportStatus(prefix, start, "all_reduce", status);
}

// A real segmentation fault (not raise(SIGSEGV)): a store through a pointer
// the optimizer cannot see is bad. Not inlined, so that the crash trace
// names this function.
__attribute__((noinline)) void CrashOnPurposeInTheVictim(volatile uintptr_t address) {
  *reinterpret_cast<volatile int*>(address) = 1;
}

int RunCrash(comm::Communicator& world, absl::Duration timeout) {
  const std::string prefix = Prefix(world.rank(), world.size());
  absl::Status aligned = [&]() -> absl::Status {
    FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.Barrier());
    return work->Wait(timeout);
  }();
  const absl::Time start = absl::Now();
  if (!aligned.ok()) return ReportStatus(prefix, start, "barrier before crash", aligned);
  if (world.rank() == absl::GetFlag(FLAGS_victim)) {
    std::printf("%s crashing (SIGSEGV)\n", prefix.c_str());
    std::fflush(stdout);
    CrashOnPurposeInTheVictim(16);
    return 1;  // not reached
  }
  std::vector<float> values(1024, 1.0f);
  comm::AllReduceOptions options;
  options.buffer = comm::AsBytes(absl::MakeSpan(values));
  absl::StatusOr<comm::WorkHandle> work = world.AllReduce(options);
  if (!work.ok()) return ReportStatus(prefix, start, "posting all_reduce", work.status());
  return ReportStatus(prefix, start, "all_reduce", (*work)->Wait(timeout));
}

std::vector<Algorithm> ParseAlgorithms(const std::string& text, std::string* error) {
  std::vector<Algorithm> algorithms;
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    if (name == "auto") algorithms.push_back(Algorithm::kAuto);
    else if (name == "ring") algorithms.push_back(Algorithm::kRing);
    else if (name == "latency") algorithms.push_back(Algorithm::kLatency);
    else if (name == "direct") algorithms.push_back(Algorithm::kDirect);
    else *error = absl::StrCat("--algorithms: unknown '", name, "' (auto, ring, latency, direct)");
  }
  if (algorithms.empty() && error->empty()) *error = "--algorithms is empty";
  return algorithms;
}

int Main() {
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  const absl::Duration timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  std::string flag_error;
  std::vector<Algorithm> algorithms =
      ParseAlgorithms(absl::GetFlag(FLAGS_algorithms), &flag_error);
  const bool known = scenario == "grid" || scenario == "inflight" || scenario == "split" ||
                     scenario == "all" || scenario == "kill" || scenario == "hang" ||
                     scenario == "join" || scenario == "crash";
  if (!known) flag_error = absl::StrCat("--scenario: unknown '", scenario, "'");
  const std::string hang_mode = absl::GetFlag(FLAGS_hang_mode);
  if (hang_mode != "stop" && hang_mode != "spin") {
    flag_error = absl::StrCat("--hang_mode: unknown '", hang_mode, "' (stop, spin)");
  }
  const std::string rounding_name = absl::GetFlag(FLAGS_bf16_rounding);
  if (rounding_name != "once" && rounding_name != "per_hop") {
    flag_error = absl::StrCat("--bf16_rounding: unknown '", rounding_name, "' (once, per_hop)");
  }
  const Bf16Rounding rounding =
      rounding_name == "once" ? Bf16Rounding::kOnce : Bf16Rounding::kPerHop;
  if (!flag_error.empty()) {
    std::fprintf(stderr, "collective_worker: %s\n", flag_error.c_str());
    return 2;
  }

  const absl::Time start = absl::Now();
  std::string env_prefix = Prefix(RankFromEnvironment(), WorldSizeFromEnvironment());
  comm::CommunicatorOptions options;
  options.rendezvous_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_rendezvous_timeout_ms));
  if (const int64_t hang_ms = absl::GetFlag(FLAGS_hang_timeout_ms); hang_ms >= 0) {
    options.hang_timeout =
        hang_ms == 0 ? absl::InfiniteDuration() : absl::Milliseconds(hang_ms);
  }
  absl::StatusOr<std::unique_ptr<comm::Communicator>> created =
      comm::Communicator::CreateFromEnvironment(options);
  if (!created.ok()) return ReportStatus(env_prefix, start, "rendezvous", created.status());
  comm::Communicator& world = **created;
  const std::string prefix = Prefix(world.rank(), world.size());
  std::printf("%s joined in %lld ms, on one host: %s\n", prefix.c_str(),
              static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - start)),
              world.on_one_host() ? "yes" : "no");
  std::fflush(stdout);

  if (scenario == "kill") return RunKill(world, timeout);
  if (scenario == "hang") return RunHang(world, timeout);
  if (scenario == "crash") return RunCrash(world, timeout);

  ScenarioRunner worker(world, timeout, rounding);
  std::vector<std::pair<std::string, std::function<absl::Status()>>> parts;
  if (scenario == "grid" || scenario == "all") {
    parts.push_back({"grid", [&] { return worker.RunGrid(algorithms); }});
  }
  if (scenario == "inflight" || scenario == "all") {
    parts.push_back({"inflight", [&] { return worker.RunInflight(); }});
  }
  if (scenario == "split" || scenario == "all") {
    parts.push_back({"split", [&] { return worker.RunSplit(); }});
  }
  if (scenario == "join") {
    parts.push_back({"join", [&]() -> absl::Status {
                       FSDP_ASSIGN_OR_RETURN(comm::WorkHandle work, world.Barrier());
                       return work->Wait(timeout);
                     }});
  }
  for (auto& [name, run] : parts) {
    const absl::Time part_start = absl::Now();
    const int checks_before = worker.checks();
    const int failures_before = worker.failures();
    absl::Status part_status = run();
    if (!part_status.ok()) return ReportStatus(prefix, part_start, name, part_status);
    const int failed = worker.failures() - failures_before;
    std::printf("%s %s %s: %d checks, %d failed, %lld ms\n", prefix.c_str(),
                failed == 0 ? "PASS" : "FAIL", name.c_str(),
                worker.checks() - checks_before, failed,
                static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - part_start)));
    std::fflush(stdout);
  }
  return worker.failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace comm_test

int main(int argc, char** argv) {
  comm::InstallCrashTrace(argv[0]);
  absl::ParseCommandLine(argc, argv);
  return comm_test::Main();
}
