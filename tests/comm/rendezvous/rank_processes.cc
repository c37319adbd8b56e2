// File: tests/comm/rendezvous/rank_processes.cc
#include "tests/comm/rendezvous/rank_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "comm/launcher/launcher.h"

extern char** environ;

namespace comm::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

}  // namespace

RankProcesses::~RankProcesses() {
  for (Process& process : processes_) {
    if (!process.reaped) {
      kill(process.pid, SIGKILL);
      waitpid(process.pid, nullptr, 0);
    }
  }
}

int RankProcesses::Start(const std::string& binary, const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env) {
  static int counter = 0;
  Process process;
  const std::string base = absl::StrCat(TempDir(), "/proc_", getpid(), "_", counter++);
  process.out_path = base + ".out";
  process.err_path = base + ".err";

  std::map<std::string, std::string> merged;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals != nullptr) merged[std::string(*entry, equals - *entry)] = equals + 1;
  }
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                           "MASTER_ADDR", "MASTER_PORT", "FSDP_JOB_TOKEN"}) {
    merged.erase(name);
  }
  for (const auto& [key, value] : env) merged[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : merged) env_strings.push_back(key + "=" + value);
  std::vector<char*> child_env;
  for (std::string& entry : env_strings) child_env.push_back(&entry[0]);
  child_env.push_back(nullptr);
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> child_argv;
  for (std::string& arg : argv_strings) child_argv.push_back(&arg[0]);
  child_argv.push_back(nullptr);

  int out_fd = open(process.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = open(process.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  process.started = absl::Now();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execve(child_argv[0], child_argv.data(), child_env.data());
    _exit(127);
  }
  close(out_fd);
  close(err_fd);
  process.pid = pid;
  processes_.push_back(process);
  return static_cast<int>(processes_.size()) - 1;
}

ProcessResult RankProcesses::Wait(int index, absl::Duration timeout) {
  Process& process = processes_[index];
  ProcessResult result;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (!process.reaped) {
    pid_t done = waitpid(process.pid, &status, WNOHANG);
    if (done == process.pid) {
      process.reaped = true;
      break;
    }
    if (absl::Now() > deadline) {
      result.timed_out = true;
      kill(process.pid, SIGKILL);
      waitpid(process.pid, &status, 0);
      process.reaped = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  result.elapsed = absl::Now() - process.started;
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.out = ReadFile(process.out_path);
  result.err = ReadFile(process.err_path);
  return result;
}

void RankProcesses::Kill(int index, int signal_number) {
  if (!processes_[index].reaped) kill(processes_[index].pid, signal_number);
}

std::string RankProcesses::StdoutSoFar(int index) const {
  return ReadFile(processes_[index].out_path);
}

bool RankProcesses::WaitForStdout(int index, const std::string& text,
                                  absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (StdoutSoFar(index).find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

std::map<std::string, std::string> TorchrunEnv(int rank, int world_size, int port,
                                               const std::string& token) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world_size)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(world_size)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"FSDP_JOB_TOKEN", token}};
}

std::string RunfilePath(const std::string& workspace_relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return workspace_relative;
  return absl::StrCat(srcdir, "/", workspace, "/", workspace_relative);
}

int FreePort() {
  absl::StatusOr<int> port = comm::PickFreePort();
  return port.ok() ? *port : 0;
}

::testing::AssertionResult Contains(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << needle << "' not found in:\n" << text;
}

}  // namespace comm::testing
