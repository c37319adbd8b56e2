// File: comm/launcher/launcher.cc
#include "comm/launcher/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"
#include "comm/launcher/failure_report.h"
#include "comm/launcher/job_failure.h"
#include "comm/rendezvous/job_secret.h"

extern char** environ;

namespace comm {
namespace {

constexpr char kExitCodePayload[] = "fsdp.launcher/exit_code";
constexpr char kBlamedRankPayload[] = "fsdp.launcher/blamed_rank";

// How often the launcher repeats SIGUSR1 to ranks that have not stopped to
// grow yet: one still starting up ignored it (SpawnPlan::ignore_grow_signal).
constexpr absl::Duration kGrowSignalRepeat = absl::Milliseconds(200);

// Signals caught while LaunchLocalRanks runs are written here.
int g_signal_pipe_write = -1;

void OnStopSignal(int signal_number) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(signal_number);
  if (g_signal_pipe_write >= 0) (void)!write(g_signal_pipe_write, &byte, 1);
  errno = saved_errno;
}

// The job's secret (comm/rendezvous/job_secret.h): 32 random bytes, checked.
absl::StatusOr<std::string> RandomToken() { return RandomSecretHex(32); }

void WriteAll(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

// One read of a non-blocking pipe, appended to `into`. False when nothing
// is available now, or at EOF or an error (then `fd` is closed).
bool ReadAvailable(base::UniqueFd& fd, std::string& into) {
  char chunk[65536];
  while (true) {
    const ssize_t n = read(fd.get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n <= 0) {
      fd.Reset();
      return false;
    }
    into.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

// Both ends of a new pipe, owned.
struct Pipe {
  base::UniqueFd read;
  base::UniqueFd write;
};

absl::StatusOr<Pipe> MakePipe(int flags) {
  int fds[2];
  if (pipe2(fds, flags) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  return Pipe{base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

// One output stream of one rank: bytes in, "[rank k] line\n" out.
struct Stream {
  base::UniqueFd fd;   // read end of the pipe; closed at EOF
  int out_fd = 1;      // where prefixed lines go
  std::string prefix;  // "[rank k] "
  std::string partial; // the unfinished last line

  void Drain() {
    while (fd.valid()) {
      if (!ReadAvailable(fd, partial)) {
        if (!fd.valid() && !partial.empty()) {  // EOF: the unterminated last line
          WriteAll(out_fd, prefix + partial + "\n");
          partial.clear();
        }
        return;
      }
      std::string lines;
      size_t start = 0;
      size_t newline;
      while ((newline = partial.find('\n', start)) != std::string::npos) {
        lines += prefix;
        lines.append(partial, start, newline + 1 - start);
        start = newline + 1;
      }
      partial.erase(0, start);
      // Whole lines in one write: a pipe keeps writes up to PIPE_BUF intact.
      if (!lines.empty()) WriteAll(out_fd, lines);
    }
  }
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  bool stopped = false;  // stopped by a signal (SIGSTOP, SIGTSTP) and not continued
  int stop_signal = 0;
  Stream out;
  Stream err;
};

// The ranks' failure reports (comm/launcher/failure_report.h), in arrival
// order, read from the report pipe.
struct Reports {
  base::UniqueFd fd;  // read end; closed at EOF
  std::string partial;
  std::vector<FailureReport> received;

  void Drain() {
    while (fd.valid()) {
      if (!ReadAvailable(fd, partial)) return;
      size_t newline;
      while ((newline = partial.find('\n')) != std::string::npos) {
        std::optional<FailureReport> report = ParseFailureReport(partial.substr(0, newline));
        if (report.has_value()) received.push_back(std::move(*report));
        partial.erase(0, newline + 1);
      }
    }
  }
};

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return "stopped";
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Restores SIGINT/SIGTERM (and, for an elastic job, SIGUSR1) handling when
// LaunchLocalRanks returns.
class StopSignalScope {
 public:
  StopSignalScope(int pipe_write, bool catch_grow_signal) : catch_grow_(catch_grow_signal) {
    g_signal_pipe_write = pipe_write;
    struct sigaction action = {};
    action.sa_handler = &OnStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    if (catch_grow_) sigaction(SIGUSR1, &action, &old_usr1_);
    // A closed stdout (`launch ... | head`) must not kill the launcher and
    // orphan the ranks: writes then fail with EPIPE instead.
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &old_pipe_);
  }
  ~StopSignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    if (catch_grow_) sigaction(SIGUSR1, &old_usr1_, nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    g_signal_pipe_write = -1;
  }

 private:
  const bool catch_grow_;
  struct sigaction old_usr1_ = {};
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
  struct sigaction old_pipe_ = {};
};

}  // namespace

namespace {

// The first port of the kernel's ephemeral range (32768 if unreadable).
int EphemeralPortsStart() {
  int low = 32768, high = 60999;
  FILE* range = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (range != nullptr) {
    if (std::fscanf(range, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(range);
  }
  return low;
}

// True if nobody holds `port` (no listener, no TIME_WAIT: no SO_REUSEADDR).
bool PortIsFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return free;
}

}  // namespace

absl::StatusOr<int> PickFreePort() {
  // Half the ports below the ephemeral range, at random (two jobs picking at
  // once rarely meet, and a taken port is skipped).
  const int end = EphemeralPortsStart();
  const int begin = std::max(1024, end / 2);
  if (end - begin >= 64) {
    unsigned char bytes[64 * 2] = {};
    int urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (urandom >= 0) {
      (void)!read(urandom, bytes, sizeof(bytes));
      close(urandom);
    }
    for (int i = 0; i < 64; ++i) {
      const int offset = (bytes[2 * i] << 8 | bytes[2 * i + 1]) + i * 7919 + getpid();
      const int port = begin + offset % (end - begin);
      if (PortIsFree(port)) return port;
    }
  }
  // Nothing free down there: an ephemeral port, as a last resort.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    int error = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("cannot pick a free port: ", strerror(error)));
  }
  close(fd);
  return static_cast<int>(ntohs(address.sin_port));
}

bool IsLaunchedRank() {
  return std::getenv("RANK") != nullptr || std::getenv("OMPI_COMM_WORLD_RANK") != nullptr ||
         std::getenv("SLURM_PROCID") != nullptr;
}

absl::StatusOr<std::string> SelfExecutablePath() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) {
    return absl::InternalError(
        absl::StrCat("cannot read /proc/self/exe: ", strerror(errno)));
  }
  return std::string(path, static_cast<size_t>(n));
}

LaunchOptions SelfLaunchOptions(int nproc, int argc, char** argv) {
  LaunchOptions options;
  options.nproc = nproc;
  for (int i = 0; i < argc; ++i) options.argv.push_back(argv[i]);
  absl::StatusOr<std::string> self = SelfExecutablePath();
  if (self.ok() && !options.argv.empty()) options.argv[0] = *self;
  return options;
}

std::optional<int> BlamedRankOf(const absl::Status& status) {
  if (!absl::IsAborted(status)) return std::nullopt;
  absl::optional<absl::Cord> payload = status.GetPayload(kBlamedRankPayload);
  int rank = -1;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &rank) || rank < 0) {
    return std::nullopt;
  }
  return rank;
}

int JobExitCode(const absl::StatusOr<int>& result) {
  if (result.ok()) return *result;
  if (absl::IsCancelled(result.status())) return 130;
  absl::optional<absl::Cord> payload = result.status().GetPayload(kExitCodePayload);
  int code = 1;
  if (payload.has_value() && absl::SimpleAtoi(std::string(*payload), &code) && code != 0) {
    return code;
  }
  return 1;
}

absl::StatusOr<std::vector<int>> AllowedCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return absl::InternalError(absl::StrCat("sched_getaffinity: ", strerror(errno)));
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  return cpus;
}

std::vector<int> CoresForRank(const std::vector<int>& cpus, int rank, int nproc) {
  const int c = static_cast<int>(cpus.size());
  if (c == 0 || nproc <= 0) return {};
  if (nproc > c) return {cpus[rank % c]};
  std::vector<int> share;
  for (int i = rank * c / nproc; i < (rank + 1) * c / nproc; ++i) share.push_back(cpus[i]);
  return share;
}

namespace {

// Everything a child needs, built before fork(): the child only execs.
struct SpawnPlan {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // without RANK and LOCAL_RANK
  std::vector<cpu_set_t> rank_cpus;         // one per rank; empty: not pinned
  int report_write_fd = -1;                 // inherited by every rank
  // Elastic jobs: the ranks start with SIGUSR1 ignored (the launcher's
  // "stop to grow"), so one that comes before the program installs its
  // handler cannot kill it; the launcher repeats it until the ranks stop.
  bool ignore_grow_signal = false;
};

// The plan for `options`: this process's environment with the job's
// variables (MASTER_PORT `port`, FSDP_FAILURE_REPORT_FD `report_write_fd`).
absl::StatusOr<SpawnPlan> PlanRanks(const LaunchOptions& options, int port,
                                    int report_write_fd) {
  SpawnPlan plan;
  plan.argv = options.argv;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals == nullptr) continue;
    plan.env[std::string(*entry, equals - *entry)] = equals + 1;
  }
  for (const auto& [key, value] : options.extra_env) plan.env[key] = value;
  plan.env["WORLD_SIZE"] = std::to_string(options.nproc);
  plan.env["LOCAL_WORLD_SIZE"] = std::to_string(options.nproc);
  plan.env["MASTER_ADDR"] = "127.0.0.1";
  plan.env["MASTER_PORT"] = std::to_string(port);
  FSDP_ASSIGN_OR_RETURN(plan.env["FSDP_JOB_TOKEN"], RandomToken());
  plan.env["FSDP_FAILURE_REPORT_FD"] = std::to_string(report_write_fd);
  plan.report_write_fd = report_write_fd;
  plan.ignore_grow_signal = options.room_to_grow.has_value();
  if (options.bind_to_cores) {
    FSDP_ASSIGN_OR_RETURN(std::vector<int> cpus, AllowedCpus());
    plan.rank_cpus.resize(options.nproc);
    for (int r = 0; r < options.nproc; ++r) {
      CPU_ZERO(&plan.rank_cpus[r]);
      for (int cpu : CoresForRank(cpus, r, options.nproc)) CPU_SET(cpu, &plan.rank_cpus[r]);
    }
  }
  return plan;
}

// Forks and execs rank `r` with its stdout and stderr on new pipes, whose
// read ends it returns in `rank`.
absl::Status SpawnRank(const SpawnPlan& plan, int r, Rank& rank) {
  std::map<std::string, std::string> env = plan.env;
  env["RANK"] = std::to_string(r);
  env["LOCAL_RANK"] = std::to_string(r);
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
  std::vector<char*> child_env;
  for (std::string& entry : env_strings) child_env.push_back(&entry[0]);
  child_env.push_back(nullptr);
  std::vector<char*> child_argv;
  for (const std::string& arg : plan.argv) child_argv.push_back(const_cast<char*>(arg.c_str()));
  child_argv.push_back(nullptr);

  FSDP_ASSIGN_OR_RETURN(Pipe out, MakePipe(O_CLOEXEC));
  FSDP_ASSIGN_OR_RETURN(Pipe err, MakePipe(O_CLOEXEC));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork for rank ", r, " failed: ", strerror(errno)));
  }
  if (pid == 0) {
    // Child: die with the launcher, default signal handling, pipes as
    // stdout/stderr, then exec. Only async-signal-safe calls here (and no
    // return: the owned descriptors are the parent's to close).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    // Ignored signals stay ignored across exec: give the rank the defaults.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGUSR1, plan.ignore_grow_signal ? SIG_IGN : SIG_DFL);
    dup2(out.write.get(), 1);
    dup2(err.write.get(), 2);
    fcntl(plan.report_write_fd, F_SETFD, 0);  // inherited across exec
    if (!plan.rank_cpus.empty()) {
      // Best effort: a refused binding leaves the rank unpinned.
      (void)sched_setaffinity(0, sizeof(cpu_set_t), &plan.rank_cpus[r]);
    }
    environ = child_env.data();
    execvp(child_argv[0], child_argv.data());
    const char* message = "launcher: cannot execute the program: ";
    (void)!write(2, message, std::strlen(message));
    (void)!write(2, child_argv[0], std::strlen(child_argv[0]));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  fcntl(out.read.get(), F_SETFL, O_NONBLOCK);
  fcntl(err.read.get(), F_SETFL, O_NONBLOCK);
  rank.pid = pid;
  rank.running = true;
  rank.out = {std::move(out.read), 1, absl::StrCat("[rank ", r, "] "), ""};
  rank.err = {std::move(err.read), 2, absl::StrCat("[rank ", r, "] "), ""};
  return absl::OkStatus();  // the write ends close here: the rank holds its copies
}

// How supervision ended.
struct JobEnd {
  // OK; kCancelled after a stop signal; the spawning error; or kAborted
  // when a rank failed (then `failure` says which, to be worded).
  absl::Status result;
  std::optional<JobFailure> failure;
  // Slots that came back while the job ran (LaunchOptions::room_to_grow),
  // and whether the ranks then stopped for the job to grow.
  int slots_back = 0;
  bool stopped_to_grow = false;
};

// Runs the job until every rank has exited: forwards the ranks' output,
// collects their failure reports, and at the first failure (a rank failing,
// a stop signal, or an error while spawning) stops the others: SIGTERM,
// SIGKILL after the grace. The state of the job: running until the first
// failure, then stopping (SIGTERM sent, SIGKILL due at kill_deadline_).
class Supervisor {
 public:
  Supervisor(std::vector<Rank>& ranks, const base::UniqueFd& signal_read, Reports& reports,
             absl::Duration grace, std::optional<int> room_to_grow)
      : ranks_(ranks),
        signal_read_(signal_read),
        reports_(reports),
        grace_(grace),
        room_to_grow_(room_to_grow) {}

  JobEnd Run(absl::Status launch_error) {
    end_.result = launch_error;
    if (!launch_error.ok()) BeginStop();
    absl::Time all_exited_at = absl::InfiniteFuture();
    while (true) {
      ForwardWhatArrives(absl::Milliseconds(50));
      const bool any_running = ReapRanks();
      if (end_.slots_back > 0 && !stopping_ && absl::Now() >= next_grow_signal_) {
        SignalToGrow();  // again: a rank still starting up ignored the last one
      }
      if (stopping_ && any_running && absl::Now() >= kill_deadline_) {
        StopAll(SIGKILL);
        kill_deadline_ = absl::InfiniteFuture();
      }
      if (!any_running) {
        if (all_exited_at == absl::InfiniteFuture()) all_exited_at = absl::Now();
        bool streams_open = false;
        for (Rank& rank : ranks_) streams_open |= rank.out.fd.valid() || rank.err.fd.valid();
        // Grandchildren may hold the pipes open; do not wait on them for long.
        if (!streams_open || absl::Now() - all_exited_at > absl::Seconds(1)) break;
      }
    }
    reports_.Drain();
    return std::move(end_);
  }

 private:
  void StopAll(int signal_number) {
    for (Rank& rank : ranks_) {
      if (!rank.running) continue;
      // A stopped rank could act on SIGTERM only once continued, and would
      // then wake in a job whose other ranks are gone: its transport's
      // teardown finds messages and operations their failure left behind
      // (UCX warns, or asserts in ucp_worker_destroy). Nothing it holds is
      // needed (what it kept is also on its buddy), so it is killed.
      if (signal_number == SIGTERM && rank.stopped) {
        kill(rank.pid, SIGKILL);
        continue;
      }
      kill(rank.pid, signal_number);
    }
  }

  void BeginStop() {
    if (stopping_) return;
    stopping_ = true;
    StopAll(SIGTERM);
    kill_deadline_ = absl::Now() + grace_;
  }

  // Waits up to `timeout` for output, reports or a stop signal, and handles
  // what came.
  void ForwardWhatArrives(absl::Duration timeout) {
    std::vector<pollfd> fds;
    fds.push_back({signal_read_.get(), POLLIN, 0});
    fds.push_back({reports_.fd.get(), POLLIN, 0});  // ignored by poll once -1
    std::vector<Stream*> streams;
    for (Rank& rank : ranks_) {
      for (Stream* stream : {&rank.out, &rank.err}) {
        if (stream->fd.valid()) {
          fds.push_back({stream->fd.get(), POLLIN, 0});
          streams.push_back(stream);
        }
      }
    }
    poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    if (fds[0].revents & POLLIN) HandleStopSignals();
    if (fds[1].revents != 0) reports_.Drain();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) streams[i - 2]->Drain();
    }
  }

  // SIGINT/SIGTERM to the launcher: stop the job; a second one: no more
  // grace. SIGUSR1 (elastic jobs): a slot came back.
  void HandleStopSignals() {
    unsigned char signal_number = 0;
    while (read(signal_read_.get(), &signal_number, 1) == 1) {
      if (signal_number == SIGUSR1) {
        HandleSlotBack();
        continue;
      }
      if (stopping_) {
        StopAll(SIGKILL);
        continue;
      }
      std::fprintf(stderr, "[launcher] got signal %d (%s); stopping all ranks\n", signal_number,
                   strsignal(signal_number));
      if (end_.result.ok()) {
        end_.result = absl::CancelledError(absl::StrCat(
            "the launcher got signal ", static_cast<int>(signal_number), " (",
            strsignal(signal_number), ") and stopped all ranks"));
      }
      BeginStop();
    }
  }

  // The first slot back asks every rank to stop at its next step boundary;
  // later ones (up to the room) only add to the count.
  void HandleSlotBack() {
    const int room = room_to_grow_.value_or(0);
    if (stopping_) {
      std::fprintf(stderr,
                   "[launcher] a slot came back (SIGUSR1) while the job is stopping; "
                   "send it again once the job runs\n");
      return;
    }
    if (end_.slots_back >= room) {
      std::fprintf(stderr, "[launcher] a slot came back (SIGUSR1), but the job %s; ignored\n",
                   room == 0 ? "already runs at its largest world size (--max_nproc)"
                             : "is already growing to its largest world size (--max_nproc)");
      return;
    }
    ++end_.slots_back;
    if (end_.slots_back > 1) {
      std::fprintf(stderr, "[launcher] another slot came back (SIGUSR1): %d in all\n",
                   end_.slots_back);
      return;
    }
    std::fprintf(stderr,
                 "[launcher] a slot came back (SIGUSR1): every rank stops at its next "
                 "step boundary and the job goes on with it\n");
    SignalToGrow();
  }

  // SIGUSR1 to every running rank, due again kGrowSignalRepeat from now.
  void SignalToGrow() {
    for (Rank& rank : ranks_) {
      if (rank.running) kill(rank.pid, SIGUSR1);
    }
    next_grow_signal_ = absl::Now() + kGrowSignalRepeat;
  }

  // Collects the ranks that changed state; whether any is still running (a
  // stopped rank is: it may be the hung one the others name).
  bool ReapRanks() {
    bool any_running = false;
    std::vector<std::pair<int, int>> failed;  // (rank, wait status), ended in this pass
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      Rank& rank = ranks_[r];
      if (!rank.running) continue;
      int status = 0;
      const pid_t done = waitpid(rank.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
      if (done != rank.pid) {
        any_running = true;
        continue;
      }
      if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        any_running = true;
        rank.stopped = WIFSTOPPED(status);
        rank.stop_signal = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
        if (rank.stopped) {
          std::fprintf(stderr, "[launcher] rank %d was stopped by signal %d (%s)\n", r,
                       rank.stop_signal, strsignal(rank.stop_signal));
        } else if (!stopping_) {
          std::fprintf(stderr, "[launcher] rank %d continued\n", r);
        }
        continue;
      }
      rank.running = false;
      rank.stopped = false;
      if (end_.slots_back > 0 && WIFEXITED(status) && WEXITSTATUS(status) == kResizeExitCode) {
        end_.stopped_to_grow = true;  // asked to stop: not a failure
        continue;
      }
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) failed.push_back({r, status});
    }
    if (!failed.empty() && !stopping_) {
      // The order of ranks that ended within one pass is unknown: a killed
      // rank's pipes close (waking us) before it can be reaped, and a
      // survivor that noticed its death may exit meanwhile. A rank killed by
      // a signal is taken as the first then: an error exit is most often a
      // survivor's reaction to such a death.
      auto first = std::find_if(failed.begin(), failed.end(),
                                [](const std::pair<int, int>& f) { return WIFSIGNALED(f.second); });
      if (first == failed.end()) first = failed.begin();
      RecordFirstFailure(first->first, first->second);
    }
    return any_running;
  }

  // Rank r is the first to fail: say so (with the root cause the ranks
  // reported so far) and stop the others.
  void RecordFirstFailure(int r, int status) {
    JobFailure failure;
    failure.first_failed = r;
    failure.first_failure = absl::StrCat("rank ", r, " ", DescribeWaitStatus(status));
    failure.exit_code = ExitCodeOf(status);
    // Ranks stopped at this moment (the stop below kills them).
    for (int s = 0; s < static_cast<int>(ranks_.size()); ++s) {
      if (ranks_[s].running && ranks_[s].stopped) {
        failure.stopped_at_failure.push_back({s, ranks_[s].stop_signal});
      }
    }
    // What the ranks diagnosed so far (a rank reports before it exits).
    reports_.Drain();
    int culprit = -1;
    const std::string cause = RootCause(reports_.received, &culprit);
    std::fprintf(stderr, "[launcher] %s%s; stopping the other ranks\n",
                 failure.first_failure.c_str(),
                 cause.empty() || culprit == r ? ""
                                               : absl::StrCat("; root cause: ", cause).c_str());
    end_.result = absl::AbortedError(failure.first_failure);  // worded at the end
    end_.failure = std::move(failure);
    BeginStop();
  }

  std::vector<Rank>& ranks_;
  const base::UniqueFd& signal_read_;
  Reports& reports_;
  const absl::Duration grace_;
  const std::optional<int> room_to_grow_;
  absl::Time next_grow_signal_ = absl::InfiniteFuture();
  bool stopping_ = false;
  absl::Time kill_deadline_ = absl::InfiniteFuture();
  JobEnd end_;
};

}  // namespace

absl::StatusOr<int> LaunchLocalRanks(const LaunchOptions& options) {
  if (options.nproc < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nproc must be at least 1, got ", options.nproc));
  }
  if (options.argv.empty()) {
    return absl::InvalidArgumentError("no program to launch: give it after `--`");
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master_port must be in [0, 65535], got ", options.master_port));
  }
  int port = options.master_port;
  if (port == 0) {
    FSDP_ASSIGN_OR_RETURN(port, PickFreePort());
  }

  // Every descriptor below is owned: any return closes what was opened.
  FSDP_ASSIGN_OR_RETURN(Pipe signal_pipe, MakePipe(O_CLOEXEC | O_NONBLOCK));
  // The ranks report the failure they diagnosed here (failure_report.h). The
  // write end is close-on-exec in the launcher; each child clears that flag
  // on its copy before exec.
  FSDP_ASSIGN_OR_RETURN(Pipe report_pipe, MakePipe(O_CLOEXEC));
  fcntl(report_pipe.read.get(), F_SETFL, O_NONBLOCK);
  FSDP_ASSIGN_OR_RETURN(const SpawnPlan plan,
                        PlanRanks(options, port, report_pipe.write.get()));
  Reports reports;
  reports.fd = std::move(report_pipe.read);
  StopSignalScope signal_scope(signal_pipe.write.get(), options.room_to_grow.has_value());

  std::vector<Rank> ranks(options.nproc);
  absl::Status launch_error;
  for (int r = 0; r < options.nproc && launch_error.ok(); ++r) {
    launch_error = SpawnRank(plan, r, ranks[r]);
  }
  // Only the ranks write to the report pipe: its end comes when they are gone.
  report_pipe.write.Reset();

  JobEnd end = Supervisor(ranks, signal_pipe.read, reports, options.grace, options.room_to_grow)
                   .Run(launch_error);
  if (end.failure.has_value()) {
    absl::Status failed = absl::AbortedError(DescribeJobFailure(*end.failure, reports.received));
    failed.SetPayload(kExitCodePayload, absl::Cord(std::to_string(end.failure->exit_code)));
    failed.SetPayload(kBlamedRankPayload,
                      absl::Cord(std::to_string(BlamedRank(*end.failure, reports.received))));
    return failed;
  }
  if (!end.result.ok()) return end.result;
  // Every rank exited 0 (the run ended before it could stop) or stopped to grow.
  return end.stopped_to_grow ? end.slots_back : 0;
}

}  // namespace comm
