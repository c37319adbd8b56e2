// File: tests/integration/comm/rank_processes.cc
#include "tests/integration/comm/rank_processes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "comm/launcher/launcher.h"

extern char** environ;

namespace comm_test {
namespace {

// Launcher variables of other conventions would take precedence or confuse
// comm/rendezvous/job_env.h; the child gets only ours.
bool IsJobVariable(const std::string& name) {
  static const char* const kPrefixes[] = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=",
                                          "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
                                          "MASTER_PORT=", "OMPI_", "SLURM_", "PMIX_",
                                          "FSDP_JOB_TOKEN="};
  for (const char* prefix : kPrefixes) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<int> PickFreePort() {
  // Below the ephemeral range: see comm/launcher/launcher.h.
  return comm::PickFreePort();
}

RankProcesses::RankProcesses(std::string program, std::vector<std::string> args)
    : program_(std::move(program)), args_(std::move(args)) {}

RankProcesses::~RankProcesses() {
  for (const Child& child : children_) {
    if (child.pid > 0) {
      kill(child.pid, SIGKILL);  // also ends a stopped child
      kill(child.pid, SIGCONT);
      waitpid(child.pid, nullptr, 0);
    }
  }
}

absl::Status RankProcesses::Start(int world_size, const std::vector<int>& ranks,
                                  const std::map<int, int>& world_size_override) {
  absl::StatusOr<int> port = PickFreePort();
  if (!port.ok()) return port.status();
  master_port_ = *port;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string directory = tmp != nullptr ? tmp : "/tmp";
  start_ = absl::Now();
  for (int rank : ranks) {
    auto override_it = world_size_override.find(rank);
    const int claimed_size =
        override_it != world_size_override.end() ? override_it->second : world_size;
    std::vector<std::string> env;
    for (char** variable = environ; *variable != nullptr; ++variable) {
      if (!IsJobVariable(*variable)) env.push_back(*variable);
    }
    env.push_back(absl::StrCat("RANK=", rank));
    env.push_back(absl::StrCat("WORLD_SIZE=", claimed_size));
    env.push_back(absl::StrCat("LOCAL_RANK=", rank));
    env.push_back(absl::StrCat("LOCAL_WORLD_SIZE=", claimed_size));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back(absl::StrCat("MASTER_PORT=", master_port_));
    std::vector<std::string> argv = {program_};
    argv.insert(argv.end(), args_.begin(), args_.end());
    std::string output_path =
        absl::StrCat(directory, "/rank_", master_port_, "_", rank, ".log");

    // Everything the child needs is prepared before fork().
    std::vector<char*> c_argv, c_env;
    for (std::string& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    for (std::string& e : env) c_env.push_back(e.data());
    c_env.push_back(nullptr);
    int output_fd = open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (output_fd < 0) {
      return absl::InternalError(
          absl::StrCat("cannot create ", output_path, ": ", strerror(errno)));
    }
    pid_t pid = fork();
    if (pid < 0) {
      close(output_fd);
      return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
    }
    if (pid == 0) {
      dup2(output_fd, STDOUT_FILENO);
      dup2(output_fd, STDERR_FILENO);
      close(output_fd);
      execve(c_argv[0], c_argv.data(), c_env.data());
      _exit(127);
    }
    close(output_fd);
    children_.push_back(Child{rank, pid, output_path});
  }
  return absl::OkStatus();
}

std::vector<RankOutcome> RankProcesses::WaitAll(absl::Duration deadline_from_now,
                                                const std::vector<int>& linger) {
  const absl::Time deadline = absl::Now() + deadline_from_now;
  std::vector<RankOutcome> outcomes(children_.size());
  size_t running = children_.size();
  for (size_t i = 0; i < children_.size(); ++i) outcomes[i].rank = children_[i].rank;
  while (running > 0) {
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& child = children_[i];
      if (child.pid <= 0) continue;
      int status = 0;
      pid_t done = waitpid(child.pid, &status, WNOHANG);
      if (done != child.pid) continue;
      outcomes[i].lifetime = absl::Now() - start_;
      if (WIFEXITED(status)) {
        outcomes[i].exited = true;
        outcomes[i].exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        outcomes[i].term_signal = WTERMSIG(status);
      }
      child.pid = -1;
      --running;
    }
    if (running == 0) break;
    size_t lingering = 0;
    for (const Child& child : children_) {
      if (child.pid > 0 &&
          std::find(linger.begin(), linger.end(), child.rank) != linger.end()) {
        ++lingering;
      }
    }
    if (lingering == running) {
      for (size_t i = 0; i < children_.size(); ++i) {
        Child& child = children_[i];
        if (child.pid <= 0) continue;
        // SIGKILL ends a stopped process too; SIGCONT is for good measure.
        kill(child.pid, SIGKILL);
        kill(child.pid, SIGCONT);
        int status = 0;
        waitpid(child.pid, &status, 0);
        if (WIFSIGNALED(status)) outcomes[i].term_signal = WTERMSIG(status);
        if (WIFEXITED(status)) {
          outcomes[i].exited = true;
          outcomes[i].exit_code = WEXITSTATUS(status);
        }
        child.pid = -1;
        outcomes[i].killed_after_others = true;
        outcomes[i].lifetime = absl::Now() - start_;
      }
      break;
    }
    if (absl::Now() >= deadline) {
      for (size_t i = 0; i < children_.size(); ++i) {
        Child& child = children_[i];
        if (child.pid <= 0) continue;
        kill(child.pid, SIGKILL);
        waitpid(child.pid, nullptr, 0);
        child.pid = -1;
        outcomes[i].killed_at_deadline = true;
        outcomes[i].term_signal = SIGKILL;
        outcomes[i].lifetime = absl::Now() - start_;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  for (size_t i = 0; i < children_.size(); ++i) {
    outcomes[i].output = ReadFile(children_[i].output_path);
  }
  return outcomes;
}

std::string FindLine(const std::string& output, const std::string& needle) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (line.find(needle) != absl::string_view::npos) return std::string(line);
  }
  return "";
}

}  // namespace comm_test
