// File: comm/launcher/restarts.cc
#include "comm/launcher/restarts.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/launcher/handover_dir.h"
#include "comm/launcher/job_failure.h"

namespace comm {

int RestartCountFromEnvironment() {
  const char* value = std::getenv("FSDP_RESTART_COUNT");
  int count = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &count) || count < 0) return 0;
  return count;
}

absl::StatusOr<int> LaunchWithRestarts(const LaunchOptions& options, int max_restarts,
                                       std::FILE* log) {
  if (max_restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_restarts=", max_restarts, " must not be negative"));
  }
  // Only a job that may restart hands state between attempts.
  std::unique_ptr<HandoverDir> handover;
  if (max_restarts > 0) {
    absl::StatusOr<std::unique_ptr<HandoverDir>> created = HandoverDir::Create();
    if (!created.ok()) return created.status();
    handover = std::move(*created);
  }
  for (int attempt = 0;; ++attempt) {
    LaunchOptions this_attempt = options;
    if (handover != nullptr) this_attempt.extra_env[kHandoverDirEnv] = handover->path();
    this_attempt.extra_env["FSDP_RESTART_COUNT"] = absl::StrCat(attempt);
    this_attempt.extra_env["TORCHELASTIC_RESTART_COUNT"] = absl::StrCat(attempt);
    // A fresh port: the last attempt's store may still hold it for a moment.
    if (attempt > 0 && options.master_port != 0) this_attempt.master_port = 0;
    const absl::Time start = absl::Now();
    absl::StatusOr<int> result = LaunchLocalRanks(this_attempt);
    // Only a rank's failure (kAborted) is worth a restart.
    if (result.ok() || !absl::IsAborted(result.status())) return result;
    if (attempt >= max_restarts) {
      if (max_restarts == 0) return result;
      // The payloads stay: JobExitCode reads the failed rank's exit code there.
      return WithMessageSuffix(
          result.status(),
          absl::StrCat(" (after ", max_restarts, max_restarts == 1 ? " restart)" : " restarts)"));
    }
    if (log != nullptr) {
      std::fprintf(log,
                   "[launcher] attempt %d failed after %.1f s: %s; restarting every rank "
                   "(restart %d of %d)\n",
                   attempt, absl::ToDoubleSeconds(absl::Now() - start),
                   std::string(result.status().message()).c_str(), attempt + 1, max_restarts);
      std::fflush(log);
    }
  }
}

}  // namespace comm
