// File: comm/rendezvous/job_secret.h
//
// The job's secret (issue 39): the key of the rendezvous's challenge-response
// (comm/rendezvous/rendezvous_auth.h). It never travels over the network;
// it reaches the ranks from whoever starts them:
//
//   the built-in launcher       32 random bytes (RandomSecretHex), in
//                               FSDP_JOB_TOKEN of every rank it forks
//   mpirun, srun --mpi=pmix     rank 0 makes one and publishes it through
//                               PMIx with its store's address
//   anything else               the user: FSDP_JOB_TOKEN, or
//                               FSDP_JOB_TOKEN_FILE naming a file only its
//                               owner can read (ReadJobTokenFile)
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(std::string secret, RandomSecretHex(32));
#ifndef COMM_RENDEZVOUS_JOB_SECRET_H_
#define COMM_RENDEZVOUS_JOB_SECRET_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace comm {

// `num_bytes` bytes from the kernel's random pool (getrandom, checked: a
// short or failed read is kInternal, never silently fewer bytes).
absl::StatusOr<std::string> RandomBytes(size_t num_bytes);

// RandomBytes(num_bytes) as lowercase hex (2 x num_bytes characters).
absl::StatusOr<std::string> RandomSecretHex(size_t num_bytes);

// The largest secret file read (a secret is tens of bytes).
inline constexpr size_t kMaxJobTokenFileBytes = 4096;

// The secret in `path` (FSDP_JOB_TOKEN_FILE), without a trailing newline.
// kPermissionDenied when the file is readable by its group or by others
// ("chmod 600 FILE") or belongs to another user; kInvalidArgument when it
// cannot be opened, is not a regular file, is empty or is larger than
// kMaxJobTokenFileBytes. Every message names the file and what to do.
absl::StatusOr<std::string> ReadJobTokenFile(const std::string& path);

}  // namespace comm

#endif  // COMM_RENDEZVOUS_JOB_SECRET_H_
