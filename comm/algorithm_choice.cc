// File: comm/algorithm_choice.cc
#include "comm/algorithm_choice.h"

namespace comm {

bool UseLatencyAlgorithm(Algorithm algorithm, size_t num_bytes, size_t small_message_bytes) {
  switch (algorithm) {
    case Algorithm::kRing:
    case Algorithm::kDirect:
      return false;
    case Algorithm::kLatency:
      return true;
    case Algorithm::kAuto:
      break;
  }
  return num_bytes <= small_message_bytes;
}

bool UseDirectAlgorithm(Algorithm algorithm, int group_size, int direct_max_ranks,
                        bool on_one_host) {
  if (algorithm == Algorithm::kDirect) return true;
  if (algorithm != Algorithm::kAuto) return false;
  return on_one_host && group_size <= direct_max_ranks;
}

}  // namespace comm
