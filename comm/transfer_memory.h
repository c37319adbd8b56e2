// File: comm/transfer_memory.h
//
// Memory that other ranks on this host can copy from quickly. Allocate the
// buffers you hand to collectives with this (the collectives' own scratch
// buffers already are).
//
// Why: on one host UCX moves large messages with a single copy through
// process_vm_readv (CMA), run by the receiver on the sender's pages. The
// kernel pins the sender's pages one page at a time, so with 4 KiB pages a
// copy runs at about a third of memcpy speed (7-8 GB/s on the project's
// 2-core machines); when the sender's buffer is backed by 2 MiB transparent
// huge pages the same copy runs at 20-25 GB/s. Only the sending side's pages
// matter, but in a ring every buffer is sent from at some step.
//
// What: buffers of at least kTransferHugePageMinBytes are aligned to 2 MiB,
// rounded up to whole 2 MiB pages and advised MADV_HUGEPAGE (the kernel may
// still decline: with THP "never", or when memory is too fragmented, the
// buffer is ordinary memory and only slower). Smaller buffers are 64-byte
// aligned ordinary memory. Contents are uninitialized.
//
//   comm::TransferBuffer buffer = comm::TransferBuffer::Allocate(64 << 20);
//   if (buffer.data() == nullptr) ...  // out of memory
//   comm.AllGather({.input = ..., .output = buffer.span()});
#ifndef COMM_TRANSFER_MEMORY_H_
#define COMM_TRANSFER_MEMORY_H_

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "absl/types/span.h"

namespace comm {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Below this the rounding to whole huge pages would waste too much.
inline constexpr size_t kTransferHugePageMinBytes = size_t{4} << 20;

// `num_bytes` of uninitialized memory as described above, or nullptr if the
// system refuses (or num_bytes is 0). Release with std::free.
void* AllocateTransferMemory(size_t num_bytes);

// True if this kernel lets a program ask for transparent huge pages
// (/sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise").
bool TransparentHugePagesAvailable();

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// An owning, move-only TransferMemory buffer.
class TransferBuffer {
 public:
  TransferBuffer() = default;
  // data() is nullptr if the allocation failed (or num_bytes is 0).
  static TransferBuffer Allocate(size_t num_bytes) {
    TransferBuffer buffer;
    buffer.data_.reset(static_cast<std::byte*>(AllocateTransferMemory(num_bytes)));
    buffer.size_ = buffer.data_ != nullptr ? num_bytes : 0;
    return buffer;
  }

  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  absl::Span<std::byte> span() const { return absl::Span<std::byte>(data_.get(), size_); }

 private:
  std::unique_ptr<std::byte, FreeDeleter> data_;
  size_t size_ = 0;
};

}  // namespace comm

#endif  // COMM_TRANSFER_MEMORY_H_
