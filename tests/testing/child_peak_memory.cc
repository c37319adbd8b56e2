// File: tests/testing/child_peak_memory.cc
#include "tests/testing/child_peak_memory.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FSDP_TEST_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FSDP_TEST_UNDER_SANITIZER 1
#endif
#endif

namespace fsdp_test {
namespace {

constexpr int kThrewExitCode = 3;

int64_t PeakRssBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return int64_t{usage.ru_maxrss} * 1024;  // Linux reports KiB
}

// VmSize from /proc/self/status, in bytes (0 if unreadable).
[[maybe_unused]] int64_t AddressSpaceBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmSize:")) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t kib = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &kib)) return kib * 1024;
  }
  return 0;
}

void WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Child: "<peak growth> <status code> <message>".
[[noreturn]] void ChildMain(int fd, const std::function<absl::Status()>& fn,
                            int64_t address_space_headroom) {
#ifndef FSDP_TEST_UNDER_SANITIZER
  const int64_t now = AddressSpaceBytes();
  if (now > 0) {
    struct rlimit limit;
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(now + address_space_headroom);
    setrlimit(RLIMIT_AS, &limit);
  }
#else
  (void)address_space_headroom;
#endif
  const int64_t start = PeakRssBytes();
  absl::Status status;
  try {
    status = fn();
  } catch (const std::exception& e) {
    // Never let an exception unwind into the test framework the child
    // inherited from its parent: it would run the remaining tests.
    WriteAll(fd, absl::StrCat("threw ", e.what()));
    _exit(kThrewExitCode);
  } catch (...) {
    WriteAll(fd, "threw an exception that is not a std::exception");
    _exit(kThrewExitCode);
  }
  const int64_t growth = PeakRssBytes() - start;
  WriteAll(fd, absl::StrCat(growth, " ", static_cast<int>(status.code()), " ", status.message()));
  close(fd);
  _exit(0);
}

}  // namespace

ChildRun RunInChild(const std::function<absl::Status()>& fn, int64_t address_space_headroom,
                    absl::Duration timeout) {
  ChildRun run;
  int fds[2];
  if (pipe(fds) != 0) {
    run.failure = absl::StrCat("pipe: ", std::strerror(errno));
    return run;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    run.failure = absl::StrCat("fork: ", std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return run;
  }
  if (pid == 0) {
    close(fds[0]);
    ChildMain(fds[1], fn, address_space_headroom);
  }
  close(fds[1]);
  std::string report;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000))) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    report.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (timed_out) {
    run.failure = absl::StrCat("the child ran longer than ", absl::FormatDuration(timeout));
    return run;
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == kThrewExitCode) {
    run.failure = absl::StrCat("the function ", report);
    return run;
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    run.failure = WIFSIGNALED(wstatus)
                      ? absl::StrCat("the child died of signal ", WTERMSIG(wstatus), " (",
                                     strsignal(WTERMSIG(wstatus)), ")")
                      : absl::StrCat("the child exited with ", WEXITSTATUS(wstatus));
    return run;
  }
  std::vector<std::string> fields = absl::StrSplit(report, absl::MaxSplits(' ', 2));
  int code = 0;
  if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &run.peak_rss_growth_bytes) ||
      !absl::SimpleAtoi(fields[1], &code)) {
    run.failure = absl::StrCat("the child's report does not parse: '", report, "'");
    return run;
  }
  run.finished = true;
  run.status = absl::Status(static_cast<absl::StatusCode>(code), fields[2]);
  return run;
}

}  // namespace fsdp_test
