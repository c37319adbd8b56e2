// File: comm/launcher/restarts.h
//
// Automatic restarts (torchrun's --max_restarts): when a rank dies, exits
// non-zero or hangs, LaunchLocalRanks (launcher.h) stops every rank; this
// runs the whole job again, up to `max_restarts` times, telling the ranks
// which attempt they are (FSDP_RESTART_COUNT, and TORCHELASTIC_RESTART_COUNT
// as torchrun does), so that a training program resumes from its newest
// checkpoint, or from the copies its survivors left in FSDP_HANDOVER_DIR (a
// directory in memory for the whole job, comm/launcher/handover_dir.h). Each
// attempt gets a new master port and job token. Ctrl-C or SIGTERM to the
// launcher, or a job that fails to start (bad options), ends it at once: a
// restart only answers a failure of a rank.
//
//   comm::LaunchOptions launch = comm::SelfLaunchOptions(4, argc, argv);
//   absl::StatusOr<int> result = comm::LaunchWithRestarts(launch, /*max_restarts=*/2, stderr);
//   return comm::JobExitCode(result);
#ifndef COMM_LAUNCHER_RESTARTS_H_
#define COMM_LAUNCHER_RESTARTS_H_

#include <cstdio>

#include "absl/status/statusor.h"
#include "comm/launcher/launcher.h"

namespace comm {

// The restart count a rank was started with (FSDP_RESTART_COUNT; 0 when
// unset or not launched by LaunchWithRestarts).
int RestartCountFromEnvironment();

// As LaunchLocalRanks, with up to `max_restarts` restarts after a rank's
// failure. `log` (may be null) gets one line per restart: the failure, the
// attempt and how long the failed attempt ran. When the restarts are used
// up, the error is the last attempt's (naming the rank and the cause),
// followed by "(after N restarts)".
absl::StatusOr<int> LaunchWithRestarts(const LaunchOptions& options, int max_restarts,
                                       std::FILE* log);

}  // namespace comm

#endif  // COMM_LAUNCHER_RESTARTS_H_
