// File: comm/rendezvous/job_env.h
//
// Who am I in the job, and where is rank 0? Read from the environment that a
// launcher sets, so one binary runs under any of them:
//
//   launcher      rank / world size                      local rank / size
//   torchrun,     RANK, WORLD_SIZE                       LOCAL_RANK, LOCAL_WORLD_SIZE
//   //comm/launcher:launch
//   mpirun        OMPI_COMM_WORLD_RANK, _SIZE            OMPI_COMM_WORLD_LOCAL_RANK, _LOCAL_SIZE
//   (Open MPI)
//   srun (Slurm)  SLURM_PROCID, SLURM_NTASKS             SLURM_LOCALID, SLURM_NTASKS_PER_NODE
//                                                        (else derived from SLURM_TASKS_PER_NODE
//                                                        and SLURM_NODEID)
//
// The first convention whose rank variable is set wins, in the order above.
// MASTER_ADDR and MASTER_PORT (where rank 0 hosts the rendezvous store) come
// from the environment when set. Otherwise, under srun the master is the first
// host of SLURM_STEP_NODELIST and the port is derived from SLURM_JOB_ID and
// SLURM_STEP_ID; under mpirun with every rank on one host it is 127.0.0.1 and
// a port derived from Open MPI's job id (comm/rendezvous/engine_master.h,
// docs/comm-transport.md). With WORLD_SIZE 1 they may be omitted.
// Under an engine that serves PMIx (mpirun; srun --mpi=pmix: PMIX_RANK and
// PMIX_NAMESPACE are set) with neither MASTER_ADDR nor MASTER_PORT set, no
// address is derived: rank 0's store listens on a port the kernel picks and
// publishes it through PMIx (JobEnv::master_from_pmix; comm/rendezvous/
// pmix_session.h), also when mpirun's ranks span hosts.
//
// Also from the environment, for every convention:
//   FSDP_HANG_TIMEOUT_S     the hang bound in seconds (decimal; 0 = no hang
//                           detection), when the program does not set
//                           CommunicatorOptions::hang_timeout itself.
//   FSDP_FAILURE_REPORT_FD  set by //comm/launcher: a pipe on which the rank
//                           reports the first failure it diagnosed (the dead
//                           or hung rank), so the launcher can name the root
//                           cause (comm/launcher/failure_report.h).
//   FSDP_STORE_BIND         where rank 0's rendezvous store listens: unset for
//                           MASTER_ADDR's interface, 'all' for every interface,
//                           or one IPv4 address of rank 0's host
//                           (comm/rendezvous/store_address.h).
//
// The job token is the job's secret (issue 39): the key of the rendezvous's
// challenge-response (comm/rendezvous/rendezvous_auth.h), which keeps
// strangers and ranks of other jobs out and lets the ranks check that the
// store is the real one. It comes from FSDP_JOB_TOKEN if set (the built-in
// launcher sets a random one), else from the file FSDP_JOB_TOKEN_FILE names
// (readable only by its owner: chmod 600), else, under the PMIx bootstrap,
// from rank 0, which makes one and publishes it through PMIx. Otherwise it is
// derived from public ids (SLURM_JOB_ID and SLURM_STEP_ID, Open MPI's
// namespace, MASTER_ADDR:MASTER_PORT), which anyone on the cluster can read:
// such a job is refused across hosts, and on one host allowed only while its
// store listens on loopback (checked by the rendezvous).
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(comm::JobEnv env, comm::JobEnvFromEnvironment());
//   if (env.rank == 0) ...
#ifndef COMM_RENDEZVOUS_JOB_ENV_H_
#define COMM_RENDEZVOUS_JOB_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace comm {

// Where JobEnv::job_token came from; see the banner.
enum class JobTokenSource {
  kGiven,     // FSDP_JOB_TOKEN or FSDP_JOB_TOKEN_FILE (the launcher's, or the user's)
  kFromPmix,  // made by rank 0 during the rendezvous; job_token is empty until then
  kDerived,   // derived from public ids: no secret at all
};

// What to do when a job has no secret, for error messages.
inline constexpr char kHowToGiveASecret[] =
    "give every rank the same secret, e.g. export FSDP_JOB_TOKEN=$(openssl rand -hex 32) "
    "where the ranks inherit it (srun passes the environment on; mpirun -x "
    "FSDP_JOB_TOKEN), or FSDP_JOB_TOKEN_FILE=<a file only you can read (chmod 600), on "
    "every host>; under mpirun or srun --mpi=pmix without MASTER_ADDR and MASTER_PORT, "
    "rank 0 makes one itself";

struct JobEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  // host name or IPv4 address of rank 0
  int master_port = 0;      // 1..65535 (0 only when world_size == 1)
  std::string job_token;  // the job's secret; see the banner
  JobTokenSource token_source = JobTokenSource::kGiven;
  // For messages: "FSDP_JOB_TOKEN", "FSDP_JOB_TOKEN_FILE=/path", "made by
  // rank 0 (PMIx)", "derived from SLURM_JOB_ID and SLURM_STEP_ID", ...
  std::string token_origin;
  std::string source;       // "torchrun" | "mpirun" | "slurm"
  // FSDP_HANG_TIMEOUT_S if set (infinite for 0).
  std::optional<absl::Duration> hang_timeout;
  // FSDP_FAILURE_REPORT_FD, or -1.
  int failure_report_fd = -1;
  // FSDP_STORE_BIND: "" (MASTER_ADDR's interface), "all", or a dotted IPv4
  // address.
  std::string store_bind;
  // The rendezvous learns master_addr:master_port through PMIx (see above);
  // they are empty / 0 until then.
  bool master_from_pmix = false;
};

// The largest world size: the UCX transport keeps the source rank in the top
// 20 bits of a 64-bit tag (comm/ucx/ucx_transport.h).
inline constexpr int kMaxWorldSize = 1 << 20;

// Returns the value of an environment variable, or nullopt if it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Parses the job environment through `lookup` (tests pass a map). Errors are
// kInvalidArgument naming the variable, its value and what to set (also for a
// job across hosts without a secret); kNotFound when no launcher convention
// is present at all; ReadJobTokenFile's errors for FSDP_JOB_TOKEN_FILE.
absl::StatusOr<JobEnv> JobEnvFromLookup(const EnvLookup& lookup);

// The same, from this process's environment (getenv).
absl::StatusOr<JobEnv> JobEnvFromEnvironment();

// "rank 2 of 4 (local 0 of 2, from torchrun), master 10.0.0.1:29500".
std::string DescribeJobEnv(const JobEnv& env);

}  // namespace comm

#endif  // COMM_RENDEZVOUS_JOB_ENV_H_
