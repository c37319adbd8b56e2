// File: comm/launcher/job_failure.cc
#include "comm/launcher/job_failure.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace comm {

std::string RootCause(const std::vector<FailureReport>& reports, int* culprit) {
  if (reports.empty()) return "";
  const FailureReport& first = reports.front();
  std::vector<int> reporters;
  for (const FailureReport& report : reports) {
    if (report.culprit == first.culprit &&
        std::find(reporters.begin(), reporters.end(), report.reporter) == reporters.end()) {
      reporters.push_back(report.reporter);
    }
  }
  *culprit = first.culprit;
  return absl::StrCat(first.message, " (reported by rank", reporters.size() > 1 ? "s " : " ",
                      absl::StrJoin(reporters, ", "), ")");
}

std::string DescribeJobFailure(const JobFailure& failure,
                               const std::vector<FailureReport>& reports) {
  // Name the root cause: what the ranks reported (a hung rank never exits by
  // itself, and the first rank to exit is usually a survivor that gave up on
  // it), else a rank that was stopped, else the first to fail.
  int culprit = -1;
  const std::string cause = RootCause(reports, &culprit);
  if (!cause.empty() && culprit != failure.first_failed) {
    return absl::StrCat(cause, ": the root cause; ", failure.first_failure,
                        " (the first rank to exit); the other ranks were stopped");
  }
  if (!cause.empty()) {
    return absl::StrCat(failure.first_failure, " (the first rank to fail; ", cause,
                        "); the other ranks were stopped");
  }
  if (!failure.stopped_at_failure.empty()) {
    const auto [s, stop_signal] = failure.stopped_at_failure.front();
    return absl::StrCat("rank ", s, " was stopped (signal ", stop_signal, ", ",
                        strsignal(stop_signal), ") when ", failure.first_failure,
                        ": the stopped rank is the likely root cause; the other ranks were "
                        "stopped");
  }
  return absl::StrCat(failure.first_failure,
                      " (the first rank to fail); the other ranks were stopped");
}

absl::Status WithMessageSuffix(const absl::Status& failed, absl::string_view suffix) {
  absl::Status status(failed.code(), absl::StrCat(failed.message(), suffix));
  failed.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { status.SetPayload(url, payload); });
  return status;
}

int BlamedRank(const JobFailure& failure, const std::vector<FailureReport>& reports) {
  int culprit = -1;
  if (!RootCause(reports, &culprit).empty() && culprit >= 0) return culprit;
  if (!failure.stopped_at_failure.empty()) return failure.stopped_at_failure.front().first;
  return failure.first_failed;
}

}  // namespace comm
