// File: base/subprocess.cc
#include "base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace base {
namespace {

// Destroys the file actions on every return path.
class SpawnFileActions {
 public:
  SpawnFileActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnFileActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

}  // namespace

absl::StatusOr<int> RunProcess(const std::vector<std::string>& argv,
                               const ProcessOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("RunProcess: an empty command");
  std::vector<char*> c_argv;
  for (const std::string& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);
  SpawnFileActions actions;
  if (!options.output_path.empty()) {
    posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, options.output_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
    posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  }
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0].c_str(), actions.get(), nullptr, c_argv.data(),
                                   environ);
  if (spawned == ENOENT) {
    return absl::NotFoundError(absl::StrCat(argv[0], " is not installed or not on PATH"));
  }
  if (spawned != 0) {
    return absl::InternalError(absl::StrCat("starting ", argv[0], ": ", std::strerror(spawned)));
  }
  const absl::Time deadline = absl::Now() + options.timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waiting for ", argv[0], ": ", std::strerror(errno)));
    }
    if (options.cancel != nullptr && options.cancel->load()) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::CancelledError(absl::StrCat(argv[0], " was stopped: the caller was interrupted"));
    }
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(absl::StrCat(
          argv[0], " did not finish within ", absl::FormatDuration(options.timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace base
