// File: fsdp/memory/memory_tracker.h
//
// Counts every byte the training allocates, by category, on one rank (one
// tracker per process). The memory model in fsdp/plan/ predicts these same
// categories, so a test can compare prediction and measurement term by term.
//
//   MemoryTracker tracker(/*budget_bytes=*/int64_t{1} << 30);
//   FSDP_ASSIGN_OR_RETURN(FloatBuffer grads,
//                         tracker.Allocate<float>(MemoryCategory::kGradients,
//                                                 numel, "block3 grads"));
//   ... grads.span() ...
//   // grads going out of scope returns its bytes to the tracker.
//   MemorySnapshot s = tracker.Snapshot();   // current and peak per category
//
// Freed buffers are kept for reuse: a later allocation of the same rounded
// size (and kind of memory) takes one back instead of asking the system, so a
// training step that allocates the same buffers every step touches no fresh
// pages after the first (no page faults, no kernel page clearing). Cached
// bytes are not in use and are not counted in the categories.
//
// How much the cache keeps depends on whether the caller marks steps:
//   - Without BeginStep(), in-use plus cached bytes never exceed the highest
//     in-use total seen so far (the largest cached blocks go first).
//   - After BeginStep(), each size keeps as many blocks as were in use at
//     once during this step or the one before, and nothing else: what a
//     repeating step needs, so it never misses. That can be more than the
//     in-use peak, because sizes peak at different moments (under full_shard
//     the gathered parameters and unsharded gradients peak in the backward,
//     after the activations of other sizes were freed); the difference shows
//     as cached_bytes, and a size the last two steps did not use is freed.
//
// With a budget (> 0), an allocation that would push the total above it fails
// with absl::ResourceExhaustedError naming the category, the label, the bytes
// requested, the bytes in use by category and the budget; it never crashes.
// Thread-safe: the comm progress thread may free buffers while compute runs.
// The tracker must outlive every buffer it handed out.
#ifndef FSDP_MEMORY_MEMORY_TRACKER_H_
#define FSDP_MEMORY_MEMORY_TRACKER_H_

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fsdp {

enum class MemoryCategory : int {
  kParameters = 0,  // sharded and gathered (unsharded) parameter buffers
  kGradients,       // unsharded gradient buffers and gradient shards
  kOptimizerState,  // AdamW moments, SGD momentum
  kActivations,     // tensors a unit's forward saves for its backward
  kCommBuffers,     // staging buffers owned by collectives
  kWorkspace,       // transient scratch (backward gradients of activations)
  kSnapshots,       // memory copies of the state (--buddy_every, memory_snapshots.h)
};
inline constexpr int kNumMemoryCategories = 7;

// "parameters", "gradients", "optimizer_state", "activations",
// "comm_buffers", "workspace", "snapshots".
const char* MemoryCategoryName(MemoryCategory category);

// A copy of the counters at one moment, for reports.
struct MemorySnapshot {
  std::array<int64_t, kNumMemoryCategories> current_bytes{};
  std::array<int64_t, kNumMemoryCategories> peak_bytes{};
  int64_t current_total_bytes = 0;
  int64_t peak_total_bytes = 0;  // peak of the sum, not the sum of peaks
  int64_t budget_bytes = 0;      // 0 = no budget
  int64_t cached_bytes = 0;      // freed, kept for reuse (not in any category)
  int64_t fresh_allocations = 0;  // allocations the cache could not serve

  int64_t current(MemoryCategory c) const { return current_bytes[static_cast<int>(c)]; }
  int64_t peak(MemoryCategory c) const { return peak_bytes[static_cast<int>(c)]; }
  // One line per category: "activations: current 1.50 MiB, peak 2.00 MiB".
  std::string ToString() const;
};

class MemoryTracker;

// An owning, move-only, 64-byte aligned array of T (zero-initialized unless it
// came from AllocateUninitialized) whose bytes are counted by a MemoryTracker
// until it is destroyed or Reset().
// Parameters, gradients and comm buffers are comm transfer memory (large ones
// in transparent huge pages, see comm/transfer_memory.h); the tracker counts
// the requested bytes, not the rounding to whole huge pages.
template <typename T>
class TrackedBuffer {
 public:
  TrackedBuffer() = default;
  TrackedBuffer(TrackedBuffer&& other) noexcept { *this = std::move(other); }
  TrackedBuffer& operator=(TrackedBuffer&& other) noexcept;
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;
  ~TrackedBuffer() { Reset(); }

  // Frees the memory and returns its bytes to the tracker. Idempotent.
  void Reset();

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return numel_; }
  int64_t num_bytes() const { return numel_ * static_cast<int64_t>(sizeof(T)); }
  bool empty() const { return numel_ == 0; }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }
  absl::Span<T> span() { return absl::Span<T>(data_, numel_); }
  absl::Span<const T> span() const { return absl::Span<const T>(data_, numel_); }
  MemoryCategory category() const { return category_; }

 private:
  friend class MemoryTracker;
  T* data_ = nullptr;
  int64_t numel_ = 0;
  MemoryCategory category_ = MemoryCategory::kWorkspace;
  MemoryTracker* tracker_ = nullptr;
};

using FloatBuffer = TrackedBuffer<float>;

class MemoryTracker {
 public:
  // budget_bytes <= 0 means unlimited.
  explicit MemoryTracker(int64_t budget_bytes = 0) : budget_bytes_(budget_bytes) {}
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Allocates `numel` zeroed elements counted under `category`. `label` only
  // appears in error messages. Errors: InvalidArgument for numel < 0,
  // ResourceExhausted when over budget or when the system allocator fails.
  // T defaults to float: tracker.Allocate(MemoryCategory::kGradients, n, "grads").
  template <typename T = float>
  absl::StatusOr<TrackedBuffer<T>> Allocate(MemoryCategory category, int64_t numel,
                                            absl::string_view label);
  // The same, without zeroing: for buffers their first use overwrites
  // entirely (activations a forward writes), where clearing a reused block
  // would be a wasted pass over memory. Counted exactly like Allocate.
  template <typename T = float>
  absl::StatusOr<TrackedBuffer<T>> AllocateUninitialized(MemoryCategory category, int64_t numel,
                                                         absl::string_view label);

  // Counts bytes that live elsewhere (e.g. a transport's registered memory).
  // Every successful Reserve must be matched by a Release of the same size.
  absl::Status Reserve(MemoryCategory category, int64_t num_bytes, absl::string_view label);
  void Release(MemoryCategory category, int64_t num_bytes);

  MemorySnapshot Snapshot() const;
  // Sets every peak to the current value (e.g. to measure one step alone).
  void ResetPeaks();
  // Marks the start of a training step: from now on the cache keeps, per
  // size, what this step and the one before had in use at once (see above),
  // and frees cached blocks beyond that.
  void BeginStep();
  void set_budget_bytes(int64_t budget_bytes);

  ~MemoryTracker();  // frees the cached blocks

 private:
  template <typename T>
  friend class TrackedBuffer;
  // A buffer's memory comes back: cached for reuse, its bytes uncounted.
  void Recycle(MemoryCategory category, void* data, int64_t num_bytes);

  // Adds num_bytes to the counters, or fails if that would exceed the budget.
  absl::Status Count(MemoryCategory category, int64_t num_bytes, absl::string_view label,
                     absl::string_view verb);
  template <typename T>
  absl::StatusOr<TrackedBuffer<T>> AllocateImpl(MemoryCategory category, int64_t numel,
                                                absl::string_view label, bool zeroed);
  void* AllocateBytes(MemoryCategory category, int64_t num_bytes, absl::string_view label,
                      bool zeroed,
                      absl::Status* status);

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built with
  // ThreadSanitizer, which then cannot see absl::Mutex's ordering and reports
  // false races; pthread mutexes are intercepted. Guards everything below.
  mutable std::mutex mu_;
  int64_t budget_bytes_;
  std::array<int64_t, kNumMemoryCategories> current_{};
  std::array<int64_t, kNumMemoryCategories> peak_{};
  int64_t current_total_ = 0;
  int64_t peak_total_ = 0;
  // Never lowered by ResetPeaks: the bound on in-use plus cached bytes
  // until the first BeginStep.
  int64_t high_water_total_ = 0;
  // A block size: (transfer memory?, rounded bytes).
  using BlockKey = std::pair<bool, size_t>;
  // Blocks of one size: how many are in use now, and the most in use at
  // once during this step and during the step before.
  struct BlockCounts {
    int64_t in_use = 0;
    int64_t peak_this_step = 0;
    int64_t peak_last_step = 0;
  };
  // Evicts cached blocks of sizes holding more than the last two steps
  // needed; returns them for freeing outside the lock.
  std::vector<void*> TrimToStepNeedsLocked();
  bool steps_marked_ = false;
  std::map<BlockKey, BlockCounts> block_counts_;
  // Freed blocks by size.
  std::map<BlockKey, std::vector<void*>> cache_;
  int64_t cached_bytes_ = 0;
  int64_t fresh_allocations_ = 0;
};

// The process's peak resident set size (VmHWM in /proc/self/status), and the
// current one (VmRSS), in bytes. NotFound/Internal errors if unreadable.
absl::StatusOr<int64_t> PeakRssBytes();
absl::StatusOr<int64_t> CurrentRssBytes();

// "1.50 MiB"-style rendering used by reports.
std::string FormatBytes(int64_t num_bytes);

// ----------------------------------------------------------------------------
// Implementation details.

template <typename T>
TrackedBuffer<T>& TrackedBuffer<T>::operator=(TrackedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    numel_ = std::exchange(other.numel_, 0);
    category_ = other.category_;
    tracker_ = std::exchange(other.tracker_, nullptr);
  }
  return *this;
}

template <typename T>
void TrackedBuffer<T>::Reset() {
  if (tracker_ != nullptr) tracker_->Recycle(category_, data_, num_bytes());
  data_ = nullptr;
  numel_ = 0;
  tracker_ = nullptr;
}

template <typename T>
absl::StatusOr<TrackedBuffer<T>> MemoryTracker::Allocate(MemoryCategory category, int64_t numel,
                                                         absl::string_view label) {
  return AllocateImpl<T>(category, numel, label, /*zeroed=*/true);
}

template <typename T>
absl::StatusOr<TrackedBuffer<T>> MemoryTracker::AllocateUninitialized(MemoryCategory category,
                                                                      int64_t numel,
                                                                      absl::string_view label) {
  return AllocateImpl<T>(category, numel, label, /*zeroed=*/false);
}

template <typename T>
absl::StatusOr<TrackedBuffer<T>> MemoryTracker::AllocateImpl(MemoryCategory category,
                                                             int64_t numel,
                                                             absl::string_view label,
                                                             bool zeroed) {
  if (numel < 0) {
    return absl::InvalidArgumentError(
        std::string("cannot allocate a negative element count for ") + std::string(label));
  }
  absl::Status status;
  void* bytes =
      AllocateBytes(category, numel * static_cast<int64_t>(sizeof(T)), label, zeroed, &status);
  if (!status.ok()) return status;
  TrackedBuffer<T> buffer;
  buffer.data_ = static_cast<T*>(bytes);
  buffer.numel_ = numel;
  buffer.category_ = category;
  buffer.tracker_ = this;
  return buffer;
}

}  // namespace fsdp

#endif  // FSDP_MEMORY_MEMORY_TRACKER_H_
