// File: comm/launcher/failure_report.cc
#include "comm/launcher/failure_report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace comm {
namespace {

constexpr absl::string_view kPrefix = "fsdp-failure ";

// Takes "<name>=<value> " off the front of `line`.
bool TakeField(absl::string_view* line, absl::string_view name, absl::string_view* value) {
  if (!absl::ConsumePrefix(line, name) || !absl::ConsumePrefix(line, "=")) return false;
  size_t space = line->find(' ');
  if (space == absl::string_view::npos) return false;
  *value = line->substr(0, space);
  line->remove_prefix(space + 1);
  return true;
}

}  // namespace

std::string FormatFailureReport(const FailureReport& report) {
  std::string line = absl::StrCat(kPrefix, "culprit=", report.culprit, " kind=", report.kind,
                                  " reporter=", report.reporter, " ");
  std::string message = report.message;
  std::replace(message.begin(), message.end(), '\n', ' ');
  const size_t room = kMaxReportBytes - 1 - std::min(line.size(), kMaxReportBytes - 1);
  if (message.size() > room) message.resize(room);
  return absl::StrCat(line, message, "\n");
}

std::optional<FailureReport> ParseFailureReport(absl::string_view line) {
  absl::ConsumeSuffix(&line, "\n");
  // One line only: a newline inside would let it carry another report.
  if (line.find('\n') != absl::string_view::npos) return std::nullopt;
  if (!absl::ConsumePrefix(&line, kPrefix)) return std::nullopt;
  absl::string_view culprit, kind, reporter;
  FailureReport report;
  if (!TakeField(&line, "culprit", &culprit) || !TakeField(&line, "kind", &kind) ||
      !TakeField(&line, "reporter", &reporter) ||
      !absl::SimpleAtoi(culprit, &report.culprit) ||
      !absl::SimpleAtoi(reporter, &report.reporter) || report.culprit < 0 ||
      (kind != "died" && kind != "hung")) {
    return std::nullopt;
  }
  report.kind = std::string(kind);
  report.message = std::string(line);
  return report;
}

void WriteFailureReport(int fd, const FailureReport& report) {
  if (fd < 0) return;
  const std::string line = FormatFailureReport(report);
  ssize_t n;
  do {
    n = write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
}

}  // namespace comm
