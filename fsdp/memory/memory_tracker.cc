// File: fsdp/memory/memory_tracker.cc
#include "fsdp/memory/memory_tracker.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "comm/transfer_memory.h"

namespace fsdp {
namespace {

constexpr size_t kAlignment = 64;  // cache line; also enough for any SIMD load

std::string InUseByCategory(const std::array<int64_t, kNumMemoryCategories>& current) {
  std::string out;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    absl::StrAppend(&out, c == 0 ? "" : ", ", MemoryCategoryName(static_cast<MemoryCategory>(c)),
                    " ", FormatBytes(current[c]));
  }
  return out;
}

// Reads one "Key:   1234 kB" line of /proc/self/status.
absl::StatusOr<int64_t> ReadProcStatusKb(absl::string_view key) {
  std::ifstream in("/proc/self/status");
  if (!in) return absl::NotFoundError("cannot open /proc/self/status (not Linux?)");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view view(line);
    if (!absl::ConsumePrefix(&view, key) || !absl::ConsumePrefix(&view, ":")) continue;
    view = absl::StripAsciiWhitespace(view);
    absl::ConsumeSuffix(&view, "kB");
    view = absl::StripAsciiWhitespace(view);
    int64_t kb = 0;
    if (!absl::SimpleAtoi(view, &kb)) {
      return absl::InternalError(absl::StrCat("cannot parse '", line, "' in /proc/self/status"));
    }
    return kb * 1024;
  }
  return absl::NotFoundError(absl::StrCat("no ", key, " line in /proc/self/status"));
}

}  // namespace

const char* MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters: return "parameters";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kOptimizerState: return "optimizer_state";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kCommBuffers: return "comm_buffers";
    case MemoryCategory::kWorkspace: return "workspace";
    case MemoryCategory::kSnapshots: return "snapshots";
  }
  return "unknown";
}

std::string FormatBytes(int64_t num_bytes) {
  const double b = static_cast<double>(num_bytes);
  if (num_bytes < 1024) return absl::StrCat(num_bytes, " B");
  if (num_bytes < (int64_t{1} << 20)) return absl::StrFormat("%.2f KiB", b / 1024.0);
  if (num_bytes < (int64_t{1} << 30)) return absl::StrFormat("%.2f MiB", b / (1024.0 * 1024.0));
  return absl::StrFormat("%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
}

std::string MemorySnapshot::ToString() const {
  std::string out;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    absl::StrAppend(&out, MemoryCategoryName(static_cast<MemoryCategory>(c)), ": current ",
                    FormatBytes(current_bytes[c]), ", peak ", FormatBytes(peak_bytes[c]), "\n");
  }
  absl::StrAppend(&out, "total: current ", FormatBytes(current_total_bytes), ", peak ",
                  FormatBytes(peak_total_bytes));
  if (budget_bytes > 0) absl::StrAppend(&out, ", budget ", FormatBytes(budget_bytes));
  absl::StrAppend(&out, "\n");
  return out;
}

absl::Status MemoryTracker::Count(MemoryCategory category, int64_t num_bytes,
                                  absl::string_view label, absl::string_view verb) {
  const int c = static_cast<int>(category);
  std::lock_guard<std::mutex> lock(mu_);
  if (budget_bytes_ > 0 && current_total_ + num_bytes > budget_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory budget exceeded: ", verb, " ", num_bytes, " bytes (", FormatBytes(num_bytes),
        ") of ", MemoryCategoryName(category), " for '", label, "' would bring the total to ",
        FormatBytes(current_total_ + num_bytes), " but the budget is ", budget_bytes_,
        " bytes (", FormatBytes(budget_bytes_), "); in use: ", InUseByCategory(current_),
        ". Shard more, lower the micro-batch, or raise the budget"));
  }
  current_[c] += num_bytes;
  current_total_ += num_bytes;
  if (current_[c] > peak_[c]) peak_[c] = current_[c];
  if (current_total_ > peak_total_) peak_total_ = current_total_;
  return absl::OkStatus();
}

namespace {

size_t RoundedBytes(int64_t num_bytes) {
  return (static_cast<size_t>(num_bytes) + kAlignment - 1) / kAlignment * kAlignment;
}

// What collectives send from (parameters, gradients, staging) is transfer
// memory: large buffers in transparent huge pages, from which other ranks on
// this host copy ~3x faster (comm/transfer_memory.h). The rest stays in
// ordinary pages, so its RSS is not rounded up to 2 MiB.
bool IsTransferMemory(MemoryCategory category) {
  return category == MemoryCategory::kParameters || category == MemoryCategory::kGradients ||
         category == MemoryCategory::kCommBuffers;
}

}  // namespace

MemoryTracker::~MemoryTracker() {
  for (auto& [key, blocks] : cache_) {
    for (void* block : blocks) std::free(block);
  }
}

void MemoryTracker::Recycle(MemoryCategory category, void* data, int64_t num_bytes) {
  Release(category, num_bytes);
  if (data == nullptr) return;
  const BlockKey key{IsTransferMemory(category), RoundedBytes(num_bytes)};
  std::lock_guard<std::mutex> lock(mu_);
  --block_counts_[key].in_use;
  cache_[key].push_back(data);
  cached_bytes_ += static_cast<int64_t>(key.second);
}

std::vector<void*> MemoryTracker::TrimToStepNeedsLocked() {
  std::vector<void*> evicted;
  for (auto it = cache_.begin(); it != cache_.end();) {
    const BlockCounts& counts = block_counts_[it->first];
    const int64_t keep = std::max(counts.peak_this_step, counts.peak_last_step);
    std::vector<void*>& blocks = it->second;
    while (!blocks.empty() && counts.in_use + static_cast<int64_t>(blocks.size()) > keep) {
      evicted.push_back(blocks.back());
      blocks.pop_back();
      cached_bytes_ -= static_cast<int64_t>(it->first.second);
    }
    it = blocks.empty() ? cache_.erase(it) : std::next(it);
  }
  return evicted;
}

void MemoryTracker::BeginStep() {
  std::vector<void*> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // What set-up freed before the first step (initialization, the
    // backend's measurement) is no step's need: the first mark frees it.
    const bool first_step = !steps_marked_;
    steps_marked_ = true;
    for (auto& [key, counts] : block_counts_) {
      counts.peak_last_step = first_step ? 0 : counts.peak_this_step;
      counts.peak_this_step = counts.in_use;
    }
    evicted = TrimToStepNeedsLocked();
  }
  for (void* block : evicted) std::free(block);
}

void* MemoryTracker::AllocateBytes(MemoryCategory category, int64_t num_bytes,
                                   absl::string_view label, bool zeroed, absl::Status* status) {
  // Count before allocating so concurrent allocations cannot both pass the
  // budget check; undone below if the system allocator fails.
  *status = Count(category, num_bytes, label, "allocating");
  if (!status->ok() || num_bytes == 0) return nullptr;
  const size_t rounded = RoundedBytes(num_bytes);
  const bool communicated = IsTransferMemory(category);
  const BlockKey key{communicated, rounded};
  void* bytes = nullptr;
  std::vector<void*> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    high_water_total_ = std::max(high_water_total_, current_total_);
    BlockCounts& counts = block_counts_[key];
    ++counts.in_use;
    counts.peak_this_step = std::max(counts.peak_this_step, counts.in_use);
    auto hit = cache_.find(key);
    if (hit != cache_.end()) {
      bytes = hit->second.back();
      hit->second.pop_back();
      if (hit->second.empty()) cache_.erase(hit);
      cached_bytes_ -= static_cast<int64_t>(rounded);
    } else if (steps_marked_) {
      // Every cached block is one the last two steps needed at once with
      // the blocks in use: nothing to give back (BeginStep trims).
      ++fresh_allocations_;
    } else {
      ++fresh_allocations_;
      // Keep in-use + cached within the high-water mark: give back the
      // largest cached blocks first (the likeliest never to be asked again).
      while (cached_bytes_ > 0 && current_total_ + cached_bytes_ > high_water_total_) {
        auto largest = std::prev(cache_.end());
        evicted.push_back(largest->second.back());
        largest->second.pop_back();
        cached_bytes_ -= static_cast<int64_t>(largest->first.second);
        if (largest->second.empty()) cache_.erase(largest);
      }
    }
  }
  for (void* block : evicted) std::free(block);
  if (bytes == nullptr) {
    bytes = communicated ? comm::AllocateTransferMemory(rounded)
                         : std::aligned_alloc(kAlignment, rounded);
  }
  if (bytes == nullptr) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --block_counts_[key].in_use;
    }
    Release(category, num_bytes);
    *status = absl::ResourceExhaustedError(
        absl::StrCat("the system allocator refused ", num_bytes, " bytes of ",
                     MemoryCategoryName(category), " for '", label, "'"));
    return nullptr;
  }
  if (zeroed) std::memset(bytes, 0, rounded);
  return bytes;
}

absl::Status MemoryTracker::Reserve(MemoryCategory category, int64_t num_bytes,
                                    absl::string_view label) {
  if (num_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reserve negative bytes for ", label));
  }
  return Count(category, num_bytes, label, "reserving");
}

void MemoryTracker::Release(MemoryCategory category, int64_t num_bytes) {
  const int c = static_cast<int>(category);
  std::lock_guard<std::mutex> lock(mu_);
  current_[c] -= num_bytes;
  current_total_ -= num_bytes;
}

MemorySnapshot MemoryTracker::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemorySnapshot s;
  s.current_bytes = current_;
  s.peak_bytes = peak_;
  s.current_total_bytes = current_total_;
  s.peak_total_bytes = peak_total_;
  s.budget_bytes = budget_bytes_ > 0 ? budget_bytes_ : 0;
  s.cached_bytes = cached_bytes_;
  s.fresh_allocations = fresh_allocations_;
  return s;
}

void MemoryTracker::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = current_;
  peak_total_ = current_total_;
}

void MemoryTracker::set_budget_bytes(int64_t budget_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_bytes_ = budget_bytes;
}

absl::StatusOr<int64_t> PeakRssBytes() { return ReadProcStatusKb("VmHWM"); }
absl::StatusOr<int64_t> CurrentRssBytes() { return ReadProcStatusKb("VmRSS"); }

}  // namespace fsdp
