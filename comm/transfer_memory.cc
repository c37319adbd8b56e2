// File: comm/transfer_memory.cc
#include "comm/transfer_memory.h"

#include <sys/mman.h>

#include <fstream>
#include <string>

namespace comm {

void* AllocateTransferMemory(size_t num_bytes) {
  if (num_bytes == 0) return nullptr;
  if (num_bytes < kTransferHugePageMinBytes) {
    return std::aligned_alloc(64, (num_bytes + 63) / 64 * 64);
  }
  const size_t rounded = (num_bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* memory = std::aligned_alloc(kHugePageBytes, rounded);
  // Advice before the first touch, so the pages are faulted in huge. A
  // refusal (EINVAL without THP support) leaves ordinary pages: slower, fine.
  if (memory != nullptr) madvise(memory, rounded, MADV_HUGEPAGE);
  return memory;
}

bool TransparentHugePagesAvailable() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string setting;
  std::getline(file, setting);
  // The active choice is bracketed: "always [madvise] never".
  return setting.find("[always]") != std::string::npos ||
         setting.find("[madvise]") != std::string::npos;
}

}  // namespace comm
