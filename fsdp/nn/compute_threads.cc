// File: fsdp/nn/compute_threads.cc
#include "fsdp/nn/compute_threads.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "fsdp/nn/matmul.h"

namespace fsdp {

int DefaultComputeThreads() {
  int hardware = static_cast<int>(std::thread::hardware_concurrency());
  if (hardware < 1) hardware = 1;
  int local_ranks = 1;
  if (const char* env = std::getenv("LOCAL_WORLD_SIZE")) {
    int parsed = 0;
    if (absl::SimpleAtoi(env, &parsed) && parsed > 0) local_ranks = parsed;
  }
  return std::max(1, hardware / local_ranks);
}

absl::Status SetComputeThreads(int threads) {
  if (threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute threads must be at least 1, got ", threads));
  }
  SetMatmulThreads(threads);  // OpenBLAS's pool and oneDNN's OpenMP runtime
  return absl::OkStatus();
}

int ComputeThreads() { return openblas_get_num_threads(); }

}  // namespace fsdp
