// File: comm/launcher/failure_report_fuzz.cc
//
// libFuzzer target for the failure-report line the launcher reads from the
// pipe every rank may write (failure_report.h). For any bytes:
// ParseFailureReport returns or refuses without crashing; a report it returns
// names a culprit >= 0 and holds no newline inside; formatting that report
// again gives one line of at most kMaxReportBytes that parses back to the
// same culprit, kind and reporter (the message may be shortened to fit).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "comm/launcher/failure_report.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view line(reinterpret_cast<const char*>(data), size);
  const std::optional<comm::FailureReport> report = comm::ParseFailureReport(line);
  if (!report.has_value()) return 0;
  Check(report->culprit >= 0);
  const std::string again = comm::FormatFailureReport(*report);
  Check(!again.empty() && again.back() == '\n');
  Check(again.size() <= comm::kMaxReportBytes);
  Check(again.find('\n') == again.size() - 1);
  const std::optional<comm::FailureReport> reparsed = comm::ParseFailureReport(again);
  Check(reparsed.has_value());
  Check(reparsed->culprit == report->culprit);
  Check(reparsed->reporter == report->reporter);
  Check(reparsed->kind == report->kind);
  return 0;
}
