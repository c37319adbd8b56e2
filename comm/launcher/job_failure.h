// File: comm/launcher/job_failure.h
//
// How the launcher words a failed job: pure functions of what it saw (the
// first rank to fail, ranks it saw stopped) and what the ranks reported
// (comm/launcher/failure_report.h), so that the wording is tested without
// processes. The rule, first that applies:
//
//   1. the ranks reported a culprit other than the first rank to fail:
//      "<report> (reported by ranks 0, 2): the root cause; rank 2 exited with
//      code 3 (the first rank to exit); the other ranks were stopped"
//   2. they reported the first rank to fail itself:
//      "rank 3 ... (the first rank to fail; <report> (reported by rank 0));
//      the other ranks were stopped"
//   3. a rank was stopped (SIGSTOP, a debugger) when the first one failed:
//      "rank 2 was stopped (signal 19, Stopped (signal)) when rank 0 exited
//      with code 6: the stopped rank is the likely root cause; ..."
//   4. otherwise "rank 1 exited with code 4 (the first rank to fail); the
//      other ranks were stopped".
#ifndef COMM_LAUNCHER_JOB_FAILURE_H_
#define COMM_LAUNCHER_JOB_FAILURE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/launcher/failure_report.h"

namespace comm {

// What the launcher saw of the first rank to fail.
struct JobFailure {
  int first_failed = -1;      // its rank
  std::string first_failure;  // "rank 1 exited with code 4" / "... was killed by signal 9 (Killed)"
  int exit_code = 0;          // the launcher's exit code for it (128+signal if killed)
  // Ranks that were stopped at that moment, with the signal that stopped them.
  std::vector<std::pair<int, int>> stopped_at_failure;
};

// The root cause the ranks agree on first: the culprit of the first report
// (set in *culprit), with every rank that reported it ("rank 3 is hung: ...
// (reported by ranks 0, 2)"). Empty (and *culprit untouched) if none.
std::string RootCause(const std::vector<FailureReport>& reports, int* culprit);

// The job's error message, by the rule above.
std::string DescribeJobFailure(const JobFailure& failure,
                               const std::vector<FailureReport>& reports);

// `failed` with `suffix` appended to its message, its code and payloads
// (the launcher's exit code and blamed rank) kept: how a restart or an
// elastic job says why it could not go on.
absl::Status WithMessageSuffix(const absl::Status& failed, absl::string_view suffix);

// The rank that rule blames: the reported culprit, else the first rank seen
// stopped, else the first to fail. An elastic job goes on without it
// (comm/launcher/elastic.h).
int BlamedRank(const JobFailure& failure, const std::vector<FailureReport>& reports);

}  // namespace comm

#endif  // COMM_LAUNCHER_JOB_FAILURE_H_
