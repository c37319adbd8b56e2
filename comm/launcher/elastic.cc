// File: comm/launcher/elastic.cc
#include "comm/launcher/elastic.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "comm/launcher/handover_dir.h"
#include "comm/launcher/job_failure.h"

namespace comm {
namespace {

void Log(std::FILE* log, const std::string& line) {
  if (log == nullptr) return;
  std::fprintf(log, "[launcher] %s\n", line.c_str());
  std::fflush(log);
}

}  // namespace

absl::Status ValidateElastic(int nproc, const ElasticOptions& elastic) {
  if (elastic.min_nproc < 1 || elastic.min_nproc > nproc) {
    return absl::InvalidArgumentError(absl::StrCat("--min_nproc=", elastic.min_nproc,
                                                   " must be between 1 and --nproc=", nproc,
                                                   " (the world size the job starts at)"));
  }
  if (elastic.max_nproc < nproc) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_nproc=", elastic.max_nproc, " must be at least --nproc=", nproc));
  }
  if (elastic.max_restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_restarts=", elastic.max_restarts, " must not be negative"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> LaunchElastic(const LaunchOptions& options, const ElasticOptions& elastic,
                                  std::FILE* log) {
  if (absl::Status valid = ValidateElastic(options.nproc, elastic); !valid.ok()) return valid;
  absl::StatusOr<std::unique_ptr<HandoverDir>> handover = HandoverDir::Create();
  if (!handover.ok()) return handover.status();
  int world = options.nproc;
  int restarts = 0;
  for (int attempt = 0;; ++attempt) {
    LaunchOptions this_attempt = options;
    this_attempt.nproc = world;
    this_attempt.room_to_grow = elastic.max_nproc - world;
    this_attempt.extra_env["FSDP_RESTART_COUNT"] = absl::StrCat(attempt);
    this_attempt.extra_env["TORCHELASTIC_RESTART_COUNT"] = absl::StrCat(attempt);
    this_attempt.extra_env[kHandoverDirEnv] = (*handover)->path();
    // A fresh port: the last attempt's store may still hold it for a moment.
    if (attempt > 0) this_attempt.master_port = 0;
    const absl::Time start = absl::Now();
    absl::StatusOr<int> result = LaunchLocalRanks(this_attempt);
    const double ran_s = absl::ToDoubleSeconds(absl::Now() - start);
    if (result.ok() && *result == 0) return 0;
    if (result.ok()) {
      const int grown = std::min(elastic.max_nproc, world + *result);
      Log(log, absl::StrCat("attempt ", attempt, " stopped after ", absl::StrFormat("%.1f", ran_s),
                            " s for ", *result, *result == 1 ? " slot" : " slots",
                            " that came back; going on with ", grown, " ranks (from ", world, ")"));
      world = grown;
      continue;
    }
    const std::optional<int> blamed = BlamedRankOf(result.status());
    if (!blamed.has_value()) return result;  // not a rank's failure: Ctrl-C, bad options
    const std::string failure(result.status().message());
    if (world - 1 >= elastic.min_nproc) {
      Log(log, absl::StrCat("attempt ", attempt, " failed after ", absl::StrFormat("%.1f", ran_s),
                            " s: ", failure, "; going on without rank ", *blamed, "'s slot: ",
                            world - 1, " ranks (--min_nproc=", elastic.min_nproc, ")"));
      --world;
      continue;
    }
    if (restarts < elastic.max_restarts) {
      ++restarts;
      Log(log, absl::StrCat("attempt ", attempt, " failed after ", absl::StrFormat("%.1f", ran_s),
                            " s: ", failure, "; at --min_nproc=", elastic.min_nproc,
                            " no rank can be spared: restarting every rank (restart ", restarts,
                            " of ", elastic.max_restarts, ")"));
      continue;
    }
    return WithMessageSuffix(
        result.status(),
        absl::StrCat(" (the job ran ", world, " ranks, --min_nproc=", elastic.min_nproc,
                     ": no rank to spare",
                     elastic.max_restarts > 0
                         ? absl::StrCat(", and its ", elastic.max_restarts, " restarts are used up")
                         : "",
                     ")"));
  }
}

}  // namespace comm
