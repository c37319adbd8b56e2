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
#include <optional>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/launcher/failure_report.h"
#include "comm/rendezvous/job_secret.h"

extern char** environ;

namespace comm {
namespace {

constexpr char kExitCodePayload[] = "fsdp.launcher/exit_code";

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
// is available now, or at EOF or an error (then `fd` is closed and set to -1).
bool ReadAvailable(int& fd, std::string& into) {
  char chunk[65536];
  while (true) {
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n <= 0) {
      close(fd);
      fd = -1;
      return false;
    }
    into.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

// One output stream of one rank: bytes in, "[rank k] line\n" out.
struct Stream {
  int fd = -1;         // read end of the pipe; -1 at EOF
  int out_fd = 1;      // where prefixed lines go
  std::string prefix;  // "[rank k] "
  std::string partial; // the unfinished last line

  void Drain() {
    while (fd >= 0) {
      if (!ReadAvailable(fd, partial)) {
        if (fd < 0 && !partial.empty()) {  // EOF: the unterminated last line
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
  int fd = -1;  // read end; -1 once closed
  std::string partial;
  std::vector<FailureReport> received;

  void Drain() {
    while (fd >= 0) {
      if (!ReadAvailable(fd, partial)) return;
      size_t newline;
      while ((newline = partial.find('\n')) != std::string::npos) {
        std::optional<FailureReport> report = ParseFailureReport(partial.substr(0, newline));
        if (report.has_value()) received.push_back(std::move(*report));
        partial.erase(0, newline + 1);
      }
    }
  }

  // The root cause the ranks agree on first: the culprit of the first report,
  // with every rank that reported it ("rank 3 is hung: ... (reported by ranks
  // 0, 2)"). Empty if there is none.
  std::string RootCause(int* culprit) const {
    if (received.empty()) return "";
    const FailureReport& first = received.front();
    std::vector<int> reporters;
    for (const FailureReport& report : received) {
      if (report.culprit == first.culprit &&
          std::find(reporters.begin(), reporters.end(), report.reporter) == reporters.end()) {
        reporters.push_back(report.reporter);
      }
    }
    *culprit = first.culprit;
    return absl::StrCat(first.message, " (reported by rank", reporters.size() > 1 ? "s " : " ",
                        absl::StrJoin(reporters, ", "), ")");
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

// Restores SIGINT/SIGTERM handling when LaunchLocalRanks returns.
class StopSignalScope {
 public:
  explicit StopSignalScope(int pipe_write) {
    g_signal_pipe_write = pipe_write;
    struct sigaction action = {};
    action.sa_handler = &OnStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
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
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    g_signal_pipe_write = -1;
  }

 private:
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
    absl::StatusOr<int> picked = PickFreePort();
    if (!picked.ok()) return picked.status();
    port = *picked;
  }
  absl::StatusOr<std::string> token = RandomToken();
  if (!token.ok()) return token.status();

  // Everything a child needs is built before fork(): the child only execs.
  std::map<std::string, std::string> base_env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals == nullptr) continue;
    base_env[std::string(*entry, equals - *entry)] = equals + 1;
  }
  for (const auto& [key, value] : options.extra_env) base_env[key] = value;
  base_env["WORLD_SIZE"] = std::to_string(options.nproc);
  base_env["LOCAL_WORLD_SIZE"] = std::to_string(options.nproc);
  base_env["MASTER_ADDR"] = "127.0.0.1";
  base_env["MASTER_PORT"] = std::to_string(port);
  base_env["FSDP_JOB_TOKEN"] = *token;
  std::vector<char*> child_argv;
  for (const std::string& arg : options.argv) child_argv.push_back(const_cast<char*>(arg.c_str()));
  child_argv.push_back(nullptr);

  int signal_pipe[2];
  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  // The ranks report the failure they diagnosed here (failure_report.h). The
  // write end is close-on-exec in the launcher; each child clears that flag
  // on its copy before exec.
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) {
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  fcntl(report_pipe[0], F_SETFL, O_NONBLOCK);
  base_env["FSDP_FAILURE_REPORT_FD"] = std::to_string(report_pipe[1]);
  Reports reports;
  reports.fd = report_pipe[0];
  StopSignalScope signal_scope(signal_pipe[1]);

  // CPU sets for bind_to_cores, built here: the child only applies one.
  std::vector<cpu_set_t> rank_cpus(options.nproc);
  if (options.bind_to_cores) {
    absl::StatusOr<std::vector<int>> cpus = AllowedCpus();
    if (!cpus.ok()) return cpus.status();
    for (int r = 0; r < options.nproc; ++r) {
      CPU_ZERO(&rank_cpus[r]);
      for (int cpu : CoresForRank(*cpus, r, options.nproc)) CPU_SET(cpu, &rank_cpus[r]);
    }
  }

  std::vector<Rank> ranks(options.nproc);
  absl::Status launch_error;
  for (int r = 0; r < options.nproc; ++r) {
    std::map<std::string, std::string> env = base_env;
    env["RANK"] = std::to_string(r);
    env["LOCAL_RANK"] = std::to_string(r);
    std::vector<std::string> env_strings;
    for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
    std::vector<char*> child_env;
    for (std::string& entry : env_strings) child_env.push_back(&entry[0]);
    child_env.push_back(nullptr);

    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
      launch_error = absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
      break;
    }
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
      launch_error = absl::InternalError(
          absl::StrCat("fork for rank ", r, " failed: ", strerror(errno)));
      close(out_pipe[0]); close(out_pipe[1]); close(err_pipe[0]); close(err_pipe[1]);
      break;
    }
    if (pid == 0) {
      // Child: die with the launcher, default signal handling, pipes as
      // stdout/stderr, then exec. Only async-signal-safe calls here.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      // Ignored signals stay ignored across exec: give the rank the defaults.
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGPIPE, SIG_DFL);
      dup2(out_pipe[1], 1);
      dup2(err_pipe[1], 2);
      fcntl(report_pipe[1], F_SETFD, 0);  // inherited across exec
      if (options.bind_to_cores) {
        // Best effort: a refused binding leaves the rank unpinned.
        (void)sched_setaffinity(0, sizeof(cpu_set_t), &rank_cpus[r]);
      }
      environ = child_env.data();
      execvp(child_argv[0], child_argv.data());
      const char* message = "launcher: cannot execute the program: ";
      (void)!write(2, message, std::strlen(message));
      (void)!write(2, child_argv[0], std::strlen(child_argv[0]));
      (void)!write(2, "\n", 1);
      _exit(127);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    Rank& rank = ranks[r];
    rank.pid = pid;
    rank.running = true;
    rank.out = {out_pipe[0], 1, absl::StrCat("[rank ", r, "] "), ""};
    rank.err = {err_pipe[0], 2, absl::StrCat("[rank ", r, "] "), ""};
  }

  // Only the ranks write to the report pipe: its end comes when they are gone.
  close(report_pipe[1]);

  // The state of the job: running until the first failure (or a stop
  // signal), then stopping: SIGTERM sent, SIGKILL due at kill_deadline.
  bool stopping = false;
  absl::Time kill_deadline = absl::InfiniteFuture();
  absl::Status result = launch_error;
  absl::Time all_exited_at = absl::InfiniteFuture();
  // The first rank to fail, and how (for the final message).
  int first_failed = -1;
  std::string first_failure;
  int first_failure_code = 0;
  // Ranks that were stopped when the first one failed, with the signal that
  // stopped them (the stop sends SIGCONT, which clears Rank::stopped).
  std::vector<std::pair<int, int>> stopped_at_failure;
  auto stop_all = [&](int signal_number) {
    for (Rank& rank : ranks) {
      if (!rank.running) continue;
      kill(rank.pid, signal_number);
      // A stopped rank acts on SIGTERM only once continued.
      if (signal_number == SIGTERM) kill(rank.pid, SIGCONT);
    }
  };
  auto begin_stop = [&]() {
    if (stopping) return;
    stopping = true;
    stop_all(SIGTERM);
    kill_deadline = absl::Now() + options.grace;
  };
  if (!launch_error.ok()) begin_stop();

  while (true) {
    std::vector<pollfd> fds;
    fds.push_back({signal_pipe[0], POLLIN, 0});
    fds.push_back({reports.fd, POLLIN, 0});  // ignored by poll once -1
    std::vector<Stream*> streams;
    for (Rank& rank : ranks) {
      for (Stream* stream : {&rank.out, &rank.err}) {
        if (stream->fd >= 0) {
          fds.push_back({stream->fd, POLLIN, 0});
          streams.push_back(stream);
        }
      }
    }
    poll(fds.data(), fds.size(), 50);
    if (fds[0].revents & POLLIN) {
      unsigned char signal_number = 0;
      while (read(signal_pipe[0], &signal_number, 1) == 1) {
        if (stopping) {
          stop_all(SIGKILL);  // a second Ctrl-C: no more grace
        } else {
          std::fprintf(stderr, "[launcher] got signal %d (%s); stopping all ranks\n",
                       signal_number, strsignal(signal_number));
          if (result.ok()) {
            result = absl::CancelledError(absl::StrCat(
                "the launcher got signal ", static_cast<int>(signal_number), " (",
                strsignal(signal_number), ") and stopped all ranks"));
          }
          begin_stop();
        }
      }
    }
    if (fds[1].revents != 0) reports.Drain();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) streams[i - 2]->Drain();
    }

    bool any_running = false;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
      Rank& rank = ranks[r];
      if (!rank.running) continue;
      int status = 0;
      pid_t done = waitpid(rank.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
      if (done != rank.pid) {
        any_running = true;
        continue;
      }
      if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        // Not an end: a stopped rank may be the hung one the others name.
        any_running = true;
        rank.stopped = WIFSTOPPED(status);
        rank.stop_signal = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
        if (rank.stopped) {
          std::fprintf(stderr, "[launcher] rank %d was stopped by signal %d (%s)\n", r,
                       rank.stop_signal, strsignal(rank.stop_signal));
        } else if (!stopping) {
          std::fprintf(stderr, "[launcher] rank %d continued\n", r);
        }
        continue;
      }
      rank.running = false;
      rank.stopped = false;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !stopping) {
        first_failed = r;
        first_failure = absl::StrCat("rank ", r, " ", DescribeWaitStatus(status));
        first_failure_code = ExitCodeOf(status);
        for (int s = 0; s < static_cast<int>(ranks.size()); ++s) {
          if (ranks[s].running && ranks[s].stopped) {
            stopped_at_failure.push_back({s, ranks[s].stop_signal});
          }
        }
        // What the ranks diagnosed so far (a rank reports before it exits).
        reports.Drain();
        int culprit = -1;
        std::string cause = reports.RootCause(&culprit);
        std::fprintf(stderr, "[launcher] %s%s; stopping the other ranks\n",
                     first_failure.c_str(),
                     cause.empty() || culprit == r
                         ? ""
                         : absl::StrCat("; root cause: ", cause).c_str());
        result = absl::AbortedError(first_failure);  // worded at the end
        begin_stop();
      }
    }
    if (stopping && any_running && absl::Now() >= kill_deadline) {
      stop_all(SIGKILL);
      kill_deadline = absl::InfiniteFuture();
    }
    if (!any_running) {
      if (all_exited_at == absl::InfiniteFuture()) all_exited_at = absl::Now();
      bool streams_open = false;
      for (Rank& rank : ranks) streams_open |= rank.out.fd >= 0 || rank.err.fd >= 0;
      // Grandchildren may hold the pipes open; do not wait on them for long.
      if (!streams_open || absl::Now() - all_exited_at > absl::Seconds(1)) break;
    }
  }
  for (Rank& rank : ranks) {
    for (Stream* stream : {&rank.out, &rank.err}) {
      if (stream->fd >= 0) close(stream->fd);
    }
  }
  reports.Drain();
  if (reports.fd >= 0) close(reports.fd);
  close(signal_pipe[0]);
  close(signal_pipe[1]);
  if (first_failed >= 0) {
    // Name the root cause: what the ranks reported (a hung rank never exits
    // by itself, and the first rank to exit is usually a survivor that gave
    // up on it), else a rank that was stopped, else the first to fail.
    int culprit = -1;
    const std::string cause = reports.RootCause(&culprit);
    std::string message;
    if (!cause.empty() && culprit != first_failed) {
      message = absl::StrCat(cause, ": the root cause; ", first_failure,
                             " (the first rank to exit); the other ranks were stopped");
    } else if (!cause.empty()) {
      message = absl::StrCat(first_failure, " (the first rank to fail; ", cause,
                             "); the other ranks were stopped");
    } else if (!stopped_at_failure.empty()) {
      const auto [s, stop_signal] = stopped_at_failure.front();
      message = absl::StrCat(
          "rank ", s, " was stopped (signal ", stop_signal, ", ", strsignal(stop_signal),
          ") when ", first_failure,
          ": the stopped rank is the likely root cause; the other ranks were stopped");
    } else {
      message = absl::StrCat(first_failure,
                             " (the first rank to fail); the other ranks were stopped");
    }
    result = absl::AbortedError(message);
    result.SetPayload(kExitCodePayload, absl::Cord(std::to_string(first_failure_code)));
  }
  if (!result.ok()) return result;
  return 0;
}

}  // namespace comm
