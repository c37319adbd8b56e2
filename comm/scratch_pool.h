// File: comm/scratch_pool.h
//
// Reusable scratch buffers for the collectives (the ring reduce-scatter's
// partial sums and receive slots). A fresh 64 MiB allocation is an mmap plus
// 16k page faults and an munmap on every call, which costs as much as moving
// the data; the pool hands back buffers of earlier collectives instead.
// Thread-safe. Buffers return to the pool when their ScratchBuffer dies (the
// pool outlives them: each holds a shared_ptr to it). At most kMaxFreeBuffers
// free buffers are kept, the largest ones. Buffers are transfer memory
// (comm/transfer_memory.h): partial sums are sent from them.
#ifndef COMM_SCRATCH_POOL_H_
#define COMM_SCRATCH_POOL_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include <mutex>

#include "comm/transfer_memory.h"

namespace comm {

class ScratchPool;

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(std::shared_ptr<ScratchPool> pool, std::unique_ptr<std::byte, FreeDeleter> data,
                size_t capacity)
      : pool_(std::move(pool)), data_(std::move(data)), capacity_(capacity) {}
  ScratchBuffer(ScratchBuffer&&) = default;
  ScratchBuffer& operator=(ScratchBuffer&& other) {
    Release();
    pool_ = std::move(other.pool_);
    data_ = std::move(other.data_);
    capacity_ = other.capacity_;
    return *this;
  }
  ~ScratchBuffer() { Release(); }

  std::byte* data() const { return data_.get(); }

 private:
  inline void Release();
  std::shared_ptr<ScratchPool> pool_;
  std::unique_ptr<std::byte, FreeDeleter> data_;
  size_t capacity_ = 0;
};

class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
 public:
  static constexpr size_t kMaxFreeBuffers = 4;

  static std::shared_ptr<ScratchPool> Create() {
    return std::shared_ptr<ScratchPool>(new ScratchPool());
  }

  // A buffer of at least `num_bytes` bytes (contents undefined).
  ScratchBuffer Acquire(size_t num_bytes) {
    num_bytes = std::max<size_t>(num_bytes, 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The smallest free buffer that fits.
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->capacity >= num_bytes && (best == free_.end() || it->capacity < best->capacity)) {
          best = it;
        }
      }
      if (best != free_.end()) {
        Free chosen = std::move(*best);
        free_.erase(best);
        return ScratchBuffer(shared_from_this(), std::move(chosen.data), chosen.capacity);
      }
    }
    std::unique_ptr<std::byte, FreeDeleter> data(
        static_cast<std::byte*>(AllocateTransferMemory(num_bytes)));
    if (data == nullptr) throw std::bad_alloc();  // as new[] did
    return ScratchBuffer(shared_from_this(), std::move(data), num_bytes);
  }

  void Return(std::unique_ptr<std::byte, FreeDeleter> data, size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back({std::move(data), capacity});
    if (free_.size() > kMaxFreeBuffers) {
      auto smallest = std::min_element(free_.begin(), free_.end(),
                                       [](const Free& a, const Free& b) {
                                         return a.capacity < b.capacity;
                                       });
      free_.erase(smallest);
    }
  }

 private:
  ScratchPool() = default;
  struct Free {
    std::unique_ptr<std::byte, FreeDeleter> data;
    size_t capacity;
  };
  // std::mutex, not absl::Mutex: Debian's Abseil is not built with
  // ThreadSanitizer, which then cannot see absl::Mutex's ordering.
  std::mutex mu_;
  std::vector<Free> free_;  // guarded by mu_
};

inline void ScratchBuffer::Release() {
  if (pool_ != nullptr && data_ != nullptr) pool_->Return(std::move(data_), capacity_);
  pool_.reset();
  data_.reset();
}

}  // namespace comm

#endif  // COMM_SCRATCH_POOL_H_
