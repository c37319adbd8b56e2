// File: comm/launcher/elastic.h
//
// Elastic jobs (torchrun's --nnodes=MIN:MAX, with one rank per slot): when a
// rank fails, the job goes on with the survivors at a smaller world size
// instead of stopping, down to min_nproc; when a lost slot comes back
// (SIGUSR1 to the launcher), every rank stops at its next step boundary and
// the job goes on with one more rank, up to max_nproc.
//
// On one host a failed rank's slot stands for a lost machine: it stays out
// until SIGUSR1 says it is back (`kill -USR1 <launcher pid>`, once per slot).
// Every attempt is a new launch (new master port and token) with WORLD_SIZE
// set to its size and FSDP_RESTART_COUNT counting the attempts, so that the
// program resumes from the state its previous attempt kept and re-splits its
// global batch for the new size (train_gpt --min_nproc, docs/failures.md).
// FSDP_HANDOVER_DIR names a directory in memory that lasts for the whole job
// (comm/launcher/handover_dir.h), where survivors leave their state.
// At min_nproc a failure restarts the job at the same size while
// max_restarts allow it (comm/launcher/restarts.h), and ends it after.
//
//   comm::ElasticOptions elastic{/*min_nproc=*/2, /*max_nproc=*/4, /*max_restarts=*/0};
//   absl::StatusOr<int> result = comm::LaunchElastic(launch, elastic, stderr);
//   return comm::JobExitCode(result);
#ifndef COMM_LAUNCHER_ELASTIC_H_
#define COMM_LAUNCHER_ELASTIC_H_

#include <cstdio>

#include "absl/status/statusor.h"
#include "comm/launcher/launcher.h"

namespace comm {

struct ElasticOptions {
  int min_nproc = 1;
  int max_nproc = 1;
  int max_restarts = 0;  // restarts at min_nproc, where no rank can be spared
};

// Checks 1 <= min_nproc <= nproc <= max_nproc and max_restarts >= 0;
// kInvalidArgument naming the flag otherwise.
absl::Status ValidateElastic(int nproc, const ElasticOptions& elastic);

// Runs the job from options.nproc ranks as above. Returns 0 when an attempt
// ends with every rank exiting 0; otherwise the last attempt's error, which
// says why the job could not go on. `log` (may be null) gets one line per
// change of world size or restart.
absl::StatusOr<int> LaunchElastic(const LaunchOptions& options, const ElasticOptions& elastic,
                                  std::FILE* log);

}  // namespace comm

#endif  // COMM_LAUNCHER_ELASTIC_H_
