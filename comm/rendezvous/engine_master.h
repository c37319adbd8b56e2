// File: comm/rendezvous/engine_master.h
//
// Where rank 0 is, derived from what a cluster engine already tells every
// rank, so that `srun -n 4 prog` and `mpirun -np 4 prog` need no MASTER_ADDR
// or MASTER_PORT (issue 13). Pure functions of strings; job_env.cc uses them
// only when MASTER_ADDR / MASTER_PORT are not set.
//
//   Slurm:   master = first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST),
//            e.g. "gpu[03-05,9],cpu1" -> "gpu03"; srun places task 0 on it.
//            port   = DerivedPort("<SLURM_JOB_ID>.<SLURM_STEP_ID>").
//   mpirun:  only when every rank is on one host (OMPI_COMM_WORLD_LOCAL_SIZE ==
//            OMPI_COMM_WORLD_SIZE): master = 127.0.0.1, port =
//            DerivedPort(<OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE>). Across hosts
//            Open MPI names no host both ranks agree on; export MASTER_ADDR.
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(std::string host, FirstSlurmHost("n[1-4]"));   // "n1"
//   int port = DerivedPort("1234.0");
#ifndef COMM_RENDEZVOUS_ENGINE_MASTER_H_
#define COMM_RENDEZVOUS_ENGINE_MASTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace comm {

// The first host of a Slurm host list ("a,b", "n[01-04,7]", "r[1-2]-n[3-4]",
// "n[1-2]x" ...), zero padding kept. kInvalidArgument naming the list when it is
// empty or its brackets do not match.
absl::StatusOr<std::string> FirstSlurmHost(absl::string_view node_list);

// The lowest and one past the highest port DerivedPort returns: below the
// kernel's default ephemeral range (32768-60999), so that no process's
// outgoing connection or port-0 listener holds it by chance.
inline constexpr int kDerivedPortMin = 11000;
inline constexpr int kDerivedPortEnd = 32000;

// A port in [kDerivedPortMin, kDerivedPortEnd) that every rank computes alike
// from `job_id` (FNV-1a of its bytes); different jobs get different ports
// with high probability (and the job token refuses the rest).
int DerivedPort(absl::string_view job_id);

}  // namespace comm

#endif  // COMM_RENDEZVOUS_ENGINE_MASTER_H_
