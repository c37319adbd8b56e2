// File: tests/comm/rendezvous/rank_processes.h
//
// Test helper: runs the ranks of a job as real processes (fork/exec of a
// worker binary from the test's runfiles), each with its own environment, and
// collects their exit status and output. Unlike the launcher it does not stop
// the others when one fails, so a test can check every rank's error.
#ifndef TESTS_COMM_RENDEZVOUS_RANK_PROCESSES_H_
#define TESTS_COMM_RENDEZVOUS_RANK_PROCESSES_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace comm::testing {

struct ProcessResult {
  bool exited = false;     // false if it was killed by a signal (or timed out)
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;  // the test had to SIGKILL it
  std::string out;
  std::string err;
  absl::Duration elapsed;  // from start to exit
};

class RankProcesses {
 public:
  RankProcesses() = default;
  ~RankProcesses();  // SIGKILLs what still runs

  // Starts `binary args...` with the current environment plus `env`; returns
  // its index.
  int Start(const std::string& binary, const std::vector<std::string>& args,
            const std::map<std::string, std::string>& env);

  // Waits for process `index` to exit, SIGKILLing it after `timeout`.
  ProcessResult Wait(int index, absl::Duration timeout);

  void Kill(int index, int signal_number);

  // What process `index` has printed to stdout so far.
  std::string StdoutSoFar(int index) const;

  // Waits until process `index` printed `text` on stdout; false on timeout.
  bool WaitForStdout(int index, const std::string& text, absl::Duration timeout) const;

 private:
  struct Process {
    pid_t pid = -1;
    bool reaped = false;
    std::string out_path;
    std::string err_path;
    absl::Time started;
  };
  std::vector<Process> processes_;
};

// The environment the launcher would give rank `rank` of `world_size`.
std::map<std::string, std::string> TorchrunEnv(int rank, int world_size, int port,
                                               const std::string& token);

// Absolute path of a file in this test's runfiles, e.g.
// "tests/comm/rendezvous/rendezvous_worker".
std::string RunfilePath(const std::string& workspace_relative);

// A TCP port that was free a moment ago.
int FreePort();

// Success if `needle` occurs in `text`; the failure message shows both.
::testing::AssertionResult Contains(const std::string& text, const std::string& needle);

}  // namespace comm::testing

#endif  // TESTS_COMM_RENDEZVOUS_RANK_PROCESSES_H_
