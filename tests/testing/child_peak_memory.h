// File: tests/testing/child_peak_memory.h
//
// testonly: runs a function in a forked child process and reports its
// status and how much the child's peak resident memory grew while it ran,
// so that a test can assert "this bad file is refused with a clear error and
// under 100 MB" (issue #39) without the parent's own memory in the figure.
//
//   ChildRun run = RunInChild([&] { return LoadByteBpe(path).status(); });
//   EXPECT_THAT(run.status.message(), HasSubstr("limit"));
//   EXPECT_LT(run.peak_rss_growth_bytes, 100 << 20);
//
// The child also gets an address-space limit of its start plus
// `address_space_headroom` (not under ASan or TSan, which reserve terabytes
// of shadow), so that code that would allocate gigabytes fails fast with
// bad_alloc instead of taking the machine; an exception out of the function
// ends the child at once (it never reaches the test framework the child
// inherited) and the result says which.
#ifndef TESTS_TESTING_CHILD_PEAK_MEMORY_H_
#define TESTS_TESTING_CHILD_PEAK_MEMORY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace fsdp_test {

struct ChildRun {
  bool finished = false;              // the function returned and the child exited normally
  std::string failure;                // otherwise: how the child ended (exception, signal, timeout)
  absl::Status status;                // what the function returned (code and message)
  int64_t peak_rss_growth_bytes = 0;  // ru_maxrss at the end minus ru_maxrss at the start
};

ChildRun RunInChild(const std::function<absl::Status()>& fn,
                    int64_t address_space_headroom = int64_t{1} << 30,
                    absl::Duration timeout = absl::Seconds(60));

}  // namespace fsdp_test

#endif  // TESTS_TESTING_CHILD_PEAK_MEMORY_H_
