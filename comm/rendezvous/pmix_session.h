// File: comm/rendezvous/pmix_session.h
//
// The part of PMIx (the process-management interface that mpirun and
// `srun --mpi=pmix` serve to their tasks) the rendezvous uses: rank 0
// publishes where its store listens, every rank fences, the others read it.
// So under those engines the ranks need no MASTER_ADDR / MASTER_PORT and no
// port derived from the job id (which two jobs can still share): rank 0's
// store listens on a port the kernel picks. Everything else (the UCX
// addresses, the roster, failure and hang detection) still goes through the
// store, identically under every launcher.
//
// Every call has a deadline: the fence is PMIx_Fence_nb waited on with a
// timeout, the read passes PMIX_TIMEOUT. PMIx is initialised once per
// process, on first use, and finalized at exit (an engine may report a task
// that exits without PMIx_Finalize as failed).
//
// Example (comm/rendezvous/rendezvous.cc):
//   FSDP_ASSIGN_OR_RETURN(PmixSession * pmix, PmixSession::Get());
//   if (rank == 0) FSDP_RETURN_IF_ERROR(pmix->Publish(kPmixStoreKey, "10.0.0.1:41234"));
//   FSDP_RETURN_IF_ERROR(pmix->Fence(deadline));
//   FSDP_ASSIGN_OR_RETURN(std::string store, pmix->Read(0, kPmixStoreKey, deadline));
#ifndef COMM_RENDEZVOUS_PMIX_SESSION_H_
#define COMM_RENDEZVOUS_PMIX_SESSION_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace comm {

// The key under which rank 0 publishes "<ipv4>:<port>" of its store.
inline constexpr char kPmixStoreKey[] = "fsdp.rendezvous.store";
// The key under which rank 0 publishes the job's secret (hex) when the user
// gave none (JobTokenSource::kFromPmix).
inline constexpr char kPmixSecretKey[] = "fsdp.rendezvous.secret";

// What the engine's PMIx server says about this process.
struct PmixIdentity {
  std::string nspace;  // the job's namespace (also the job token's source)
  int rank = 0;
  int world_size = 0;
  int local_rank = 0;
  int local_world_size = 0;
};

class PmixSession {
 public:
  // The process's session, initialised on the first call (PMIx_Init). Errors
  // name what failed and that the task must run under an engine with PMIx
  // (mpirun, srun --mpi=pmix) or get MASTER_ADDR / MASTER_PORT instead.
  static absl::StatusOr<PmixSession*> Get();

  const PmixIdentity& identity() const { return identity_; }

  // Puts `value` under `key` for every rank (PMIX_GLOBAL) and commits it.
  absl::Status Publish(const std::string& key, const std::string& value);
  // Every rank of the job reaches the fence, with the data they committed
  // collected; kDeadlineExceeded after `deadline`.
  absl::Status Fence(absl::Time deadline);
  // `key` as `rank` published it (after a Fence).
  absl::StatusOr<std::string> Read(int rank, const std::string& key, absl::Time deadline);

 private:
  PmixSession() = default;
  absl::Status Init();

  PmixIdentity identity_;
};

}  // namespace comm

#endif  // COMM_RENDEZVOUS_PMIX_SESSION_H_
