// File: comm/liveness.cc
#include "comm/liveness.h"

#include <utility>

namespace comm {

int64_t CallerLiveness::NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

CallerLiveness::CallerLiveness() : last_call_ns_(NowNanos()) {}

void CallerLiveness::NoteCall() { last_call_ns_.store(NowNanos(), std::memory_order_relaxed); }

void CallerLiveness::EnterWait() {
  waiting_.fetch_add(1, std::memory_order_relaxed);
  NoteCall();
}

void CallerLiveness::LeaveWait() {
  NoteCall();
  waiting_.fetch_sub(1, std::memory_order_relaxed);
}

void CallerLiveness::SetOldestPending(std::optional<Clock::time_point> since) {
  const int64_t ns =
      since.has_value()
          ? std::chrono::duration_cast<std::chrono::nanoseconds>(since->time_since_epoch())
                .count()
          : -1;
  oldest_pending_ns_.store(ns, std::memory_order_relaxed);
  if (!since.has_value()) SetAwaited(-1, "");
}

void CallerLiveness::SetAwaited(int global_rank, std::string what) {
  std::lock_guard<std::mutex> lock(awaited_mu_);
  awaited_rank_ = global_rank;
  awaited_what_ = std::move(what);
}

CallerLiveness::Snapshot CallerLiveness::Read() const {
  const int64_t now = NowNanos();
  Snapshot snapshot;
  if (waiting_.load(std::memory_order_relaxed) == 0) {
    const int64_t last = last_call_ns_.load(std::memory_order_relaxed);
    snapshot.idle = absl::Nanoseconds(now > last ? now - last : 0);
  }
  const int64_t oldest = oldest_pending_ns_.load(std::memory_order_relaxed);
  if (oldest >= 0) {
    snapshot.pending = absl::Nanoseconds(now > oldest ? now - oldest : 0);
    std::lock_guard<std::mutex> lock(awaited_mu_);
    snapshot.awaited_rank = awaited_rank_;
    snapshot.awaited_what = awaited_what_;
  }
  return snapshot;
}

}  // namespace comm
