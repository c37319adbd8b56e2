// File: fsdp/nn/compute_threads.h
//
// How many threads the matrix products use (OpenBLAS and oneDNN). Several ranks on one
// machine must not each spawn a thread per core, so the default is the
// machine's hardware threads divided by the ranks on it (LOCAL_WORLD_SIZE):
//
//   FSDP_RETURN_IF_ERROR(SetComputeThreads(flag_threads > 0 ? flag_threads
//                                                           : DefaultComputeThreads()));
#ifndef FSDP_NN_COMPUTE_THREADS_H_
#define FSDP_NN_COMPUTE_THREADS_H_

#include <string>

#include "absl/status/status.h"

namespace fsdp {

// max(1, CPUs in this process's affinity mask / LOCAL_WORLD_SIZE);
// LOCAL_WORLD_SIZE defaults to 1 when unset or not a positive integer.
int DefaultComputeThreads();

// The same for a process that will launch `local_ranks` ranks on this host
// (LOCAL_WORLD_SIZE unset: train_gpt's launching parent, which checks the
// ranks' memory before starting them): what each of them will take. Under
// LOCAL_WORLD_SIZE, as DefaultComputeThreads.
int DefaultComputeThreadsOfLocalRanks(int local_ranks);

// Why the default is what it is, for the start-up line: "2 CPUs in this
// process's affinity / 1 rank on this host".
std::string DefaultComputeThreadsReason();

// Sets the thread count of OpenBLAS, oneDNN (OpenMP) and the kernels between
// the products (base/parallel_for.h; the calling thread becomes the compute
// thread). InvalidArgument if threads < 1.
absl::Status SetComputeThreads(int threads);

// The thread count OpenBLAS will use now.
int ComputeThreads();

}  // namespace fsdp

#endif  // FSDP_NN_COMPUTE_THREADS_H_
