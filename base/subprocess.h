// File: base/subprocess.h
//
// Runs another program to completion with a deadline: started with
// posix_spawnp (not fork: the caller may have threads), its output to a file
// or inherited, killed when the deadline passes.
//
//   FSDP_ASSIGN_OR_RETURN(int code, base::RunProcess({"gnuplot", "plot.gp"}, {}));
//   if (code != 0) ...
#ifndef BASE_SUBPROCESS_H_
#define BASE_SUBPROCESS_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace base {

struct ProcessOptions {
  // stdout and stderr go to this file (created or truncated) when set;
  // otherwise the child shares the caller's.
  std::string output_path;
  absl::Duration timeout = absl::Minutes(10);
  // When set and it becomes true (e.g. from a signal handler of the caller),
  // the child is killed and reaped, and RunProcess returns Cancelled: an
  // interrupted caller leaves no program running behind it.
  const std::atomic<bool>* cancel = nullptr;
};

// The exit code of argv[0] (found on PATH) run with `argv`; 128 + the signal
// number when a signal ended it. NotFound when argv[0] cannot be found;
// DeadlineExceeded naming the program when it ran past the timeout (it is
// killed and reaped first); Cancelled when options.cancel became true (the
// same); InvalidArgument for an empty argv; Internal for
// other spawn or wait failures, with the system's message.
absl::StatusOr<int> RunProcess(const std::vector<std::string>& argv,
                               const ProcessOptions& options);

}  // namespace base

#endif  // BASE_SUBPROCESS_H_
