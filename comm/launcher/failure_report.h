// File: comm/launcher/failure_report.h
//
// How a rank tells the launcher which rank it found to be the cause of a
// failure, so that the launcher names the root cause rather than whichever
// rank happened to exit first (the first to exit is usually a survivor that
// gave up on the culprit; a hung culprit never exits by itself).
//
// //comm/launcher gives every rank the write end of one pipe and its number
// in FSDP_FAILURE_REPORT_FD (comm/rendezvous/job_env.h). The rank's runtime
// (Communicator::CreateFromEnvironment, comm/environment/communicator_from_environment.cc)
// writes one line there when its transport tells it of the job's first
// failure (UcxTransportOptions::on_peer_failure): the first rank it knows to
// have died or hung.
// Each report is a single write() of at most kMaxReportBytes (< PIPE_BUF), so
// reports of different ranks never mix. Other launchers simply do not set
// the variable.
//
// The line: "fsdp-failure culprit=3 kind=hung reporter=1 <message>\n", where
// the message has no newlines ("rank 3 is hung: no heartbeat ...").
#ifndef COMM_LAUNCHER_FAILURE_REPORT_H_
#define COMM_LAUNCHER_FAILURE_REPORT_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace comm {

struct FailureReport {
  int culprit = -1;   // the rank found dead or hung
  std::string kind;   // "died" or "hung"
  int reporter = -1;  // the rank that found it
  std::string message;
};

// Well under PIPE_BUF (4096 on Linux), so one write() stays whole.
inline constexpr size_t kMaxReportBytes = 2048;

// The line for `report` (message shortened to fit kMaxReportBytes, newlines
// replaced by spaces), ending in '\n'.
std::string FormatFailureReport(const FailureReport& report);

// Parses one line (without or with its '\n'); nullopt if it is not a report:
// another prefix, a field missing or not a number, a culprit below 0, a kind
// other than "died" or "hung", or a newline inside.
std::optional<FailureReport> ParseFailureReport(absl::string_view line);

// Writes `report` to `fd` in one write(); does nothing if fd < 0. Errors are
// ignored: the report only improves the launcher's message.
void WriteFailureReport(int fd, const FailureReport& report);

}  // namespace comm

#endif  // COMM_LAUNCHER_FAILURE_REPORT_H_
