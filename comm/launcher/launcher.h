// File: comm/launcher/launcher.h
//
// Starts the ranks of a job as local processes, like `torchrun --standalone`.
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT and FSDP_JOB_TOKEN (random per launch),
// plus LaunchOptions::extra_env. Every line a rank prints is prefixed with
// "[rank k] " (stdout to stdout, stderr to stderr, one write per whole line,
// so lines of different ranks never mix).
//
// The first failure stops the job: when a rank exits non-zero or dies by a
// signal, the others get SIGTERM, then SIGKILL after `grace`, and the result
// is an error naming that rank and its exit code or signal. SIGINT/SIGTERM to
// the launching process (Ctrl-C) stop all ranks the same way; while
// LaunchLocalRanks runs it handles those two signals itself.
//
// A program can re-launch itself (examples do `train_gpt --nproc 2`):
//
//   int main(int argc, char** argv) {
//     if (!comm::IsLaunchedRank()) {
//       comm::LaunchOptions options = comm::SelfLaunchOptions(2, argc, argv);
//       absl::StatusOr<int> result = comm::LaunchLocalRanks(options);
//       if (!result.ok()) std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
//       return comm::JobExitCode(result);
//     }
//     ... the rank's work ...
//   }
#ifndef COMM_LAUNCHER_LAUNCHER_H_
#define COMM_LAUNCHER_LAUNCHER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace comm {

struct LaunchOptions {
  int nproc = 1;
  // The program and its arguments; argv[0] is looked up in PATH if it has no '/'.
  std::vector<std::string> argv;
  int master_port = 0;  // 0 = pick a free one
  absl::Duration grace = absl::Seconds(3);  // SIGTERM -> SIGKILL
  std::map<std::string, std::string> extra_env;
  // Pin each rank to its share of the CPUs this process may run on
  // (sched_getaffinity), like `mpirun --bind-to core`: with N ranks on C CPUs,
  // rank r gets CPUs [r*C/N, (r+1)*C/N) when N <= C, and CPU r mod C when
  // N > C. Why: unpinned, the scheduler sometimes keeps two communicating
  // ranks on one CPU while the other idles (wake-affine placement), and a
  // 4 KiB all-reduce at 2 ranks then takes 20-37 us instead of 4-8 us (about
  // one job in five on the project's 2-core machines). Off by default: a
  // rank's compute threads are confined to its share too.
  bool bind_to_cores = false;
  // Elastic jobs only (comm/launcher/elastic.h); unset, SIGUSR1 keeps its
  // default action. Set, SIGUSR1 to the launcher means "a lost rank's slot
  // came back": while fewer than room_to_grow slots have come back, the
  // launcher passes SIGUSR1 on to every rank, which stops at its next step
  // boundary (saving its state) and exits with kResizeExitCode; the launch
  // then returns how many slots came back. At room_to_grow 0 the signal is
  // only noted.
  std::optional<int> room_to_grow;
};

// The exit code of a rank that stopped at a step boundary because the
// launcher asked it to (SIGUSR1), for the job to go on at another world size.
constexpr int kResizeExitCode = 75;

// The CPUs this process may run on (sched_getaffinity), ascending.
absl::StatusOr<std::vector<int>> AllowedCpus();

// The CPUs rank `rank` of `nproc` gets under bind_to_cores, out of `cpus`
// (AllowedCpus()). Empty if `cpus` is.
std::vector<int> CoresForRank(const std::vector<int>& cpus, int rank, int nproc);

// Runs the job to its end. Returns 0 when every rank exited 0, and n > 0 when
// n slots came back and the ranks stopped for the job to grow (room_to_grow).
// A failed rank gives kAborted "rank k exited with code c" / "rank k was
// killed by signal s" (with the launcher's exit code for it and the rank it
// blames as payloads, see JobExitCode and BlamedRankOf); bad
// options or a failed fork give kInvalidArgument / kInternal; Ctrl-C gives
// kCancelled.
absl::StatusOr<int> LaunchLocalRanks(const LaunchOptions& options);

// The exit code a launcher process should end with: 0 on success, the failed
// rank's exit code (128+signal if it was killed), 130 after Ctrl-C, 1 else.
int JobExitCode(const absl::StatusOr<int>& result);

// The rank a kAborted result of LaunchLocalRanks blames (the reported culprit,
// a rank seen stopped, else the first to fail; comm/launcher/job_failure.h),
// or nullopt for any other result.
std::optional<int> BlamedRankOf(const absl::Status& status);

// True when this process is a rank of a launched job (RANK, OMPI_COMM_WORLD_RANK
// or SLURM_PROCID is set), i.e. it should do its work instead of launching.
bool IsLaunchedRank();

// The path of this process's binary (/proc/self/exe), or an error.
absl::StatusOr<std::string> SelfExecutablePath();

// Options that re-run this binary `nproc` times with the same arguments
// (argv[0] replaced by SelfExecutablePath(), falling back to argv[0]).
LaunchOptions SelfLaunchOptions(int nproc, int argc, char** argv);

// A TCP port that was free a moment ago, chosen at random BELOW the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, usually from
// 32768) and checked by binding it. Why not bind port 0: the kernel hands out
// the ephemeral range to every connect() and every listen on port 0 on this
// host (UCX's TCP interfaces listen on such ports), so a port bound and
// released there can be taken by another process before rank 0 binds it;
// under a loaded test suite rank 0 then failed with "MASTER_PORT N is in use"
// (seen in kill_rank_test and rendezvous_failure_test). Below the range only
// processes that choose ports themselves can collide. Falls back to port 0 if
// no candidate is free.
absl::StatusOr<int> PickFreePort();

}  // namespace comm

#endif  // COMM_LAUNCHER_LAUNCHER_H_
