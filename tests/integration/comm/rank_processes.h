// File: tests/integration/comm/rank_processes.h
//
// Starts the ranks of a job as real processes on this host, with the
// torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT) that comm::Communicator::
// CreateFromEnvironment() reads, without //comm/launcher. The failure tests
// need that: they kill one rank, give one rank a wrong WORLD_SIZE, or leave a
// rank out, none of which the launcher allows (it tears the job down when one
// rank dies).
//
// Every rank's stdout and stderr go to one file that WaitAll() reads back.
// WaitAll() never waits past its deadline: stragglers are SIGKILLed and
// reported as such.
//
// Example:
//   RankProcesses job(worker_path, {"--scenario=join"});
//   ASSERT_OK(job.Start(/*world_size=*/2, /*ranks=*/{0, 1}, {}));
//   std::vector<RankOutcome> outcomes = job.WaitAll(absl::Seconds(30));
#ifndef TESTS_INTEGRATION_COMM_RANK_PROCESSES_H_
#define TESTS_INTEGRATION_COMM_RANK_PROCESSES_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace comm_test {

// A TCP port that was free a moment ago: comm::PickFreePort() (below the
// kernel's ephemeral range, so no other process's port-0 socket can take it
// before rank 0 binds it).
absl::StatusOr<int> PickFreePort();

struct RankOutcome {
  int rank = -1;
  bool exited = false;          // exited normally (exit_code is valid)
  int exit_code = -1;
  int term_signal = 0;          // set if a signal ended it
  bool killed_at_deadline = false;
  bool killed_after_others = false;  // a `linger` rank of WaitAll, killed then
  absl::Duration lifetime;      // from start to exit (or to the deadline)
  std::string output;           // stdout + stderr
};

class RankProcesses {
 public:
  RankProcesses(std::string program, std::vector<std::string> args);
  ~RankProcesses();  // SIGKILLs and reaps anything still running

  // Starts one process per entry of `ranks` (RANK=that value), all with
  // WORLD_SIZE=`world_size` unless `world_size_override` maps a rank to
  // another value. Output files go to $TEST_TMPDIR (or /tmp).
  absl::Status Start(int world_size, const std::vector<int>& ranks,
                     const std::map<int, int>& world_size_override);

  // Waits until every process exited or `deadline_from_now` passed. Ranks in
  // `linger` (a stopped or spinning victim) are SIGKILLed, SIGCONTed and
  // reaped as soon as every other rank has exited.
  std::vector<RankOutcome> WaitAll(absl::Duration deadline_from_now,
                                   const std::vector<int>& linger = {});

  int master_port() const { return master_port_; }

 private:
  struct Child {
    int rank;
    pid_t pid;
    std::string output_path;
  };

  std::string program_;
  std::vector<std::string> args_;
  int master_port_ = 0;
  absl::Time start_;
  std::vector<Child> children_;
};

// The first line of `output` containing `needle`, or "" if none.
std::string FindLine(const std::string& output, const std::string& needle);

}  // namespace comm_test

#endif  // TESTS_INTEGRATION_COMM_RANK_PROCESSES_H_
