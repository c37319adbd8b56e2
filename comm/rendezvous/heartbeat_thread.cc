// File: comm/rendezvous/heartbeat_thread.cc
#include "comm/rendezvous/heartbeat_thread.h"

#include <chrono>
#include <utility>

#include "comm/signal_stack.h"

namespace comm {

HeartbeatThread::HeartbeatThread(absl::Duration interval, std::function<void()> beat)
    : interval_(interval), beat_(std::move(beat)), thread_([this] {
        ScopedSignalStack signal_stack;  // a crash trace even if this stack overflows
        Run();
      }) {}

HeartbeatThread::~HeartbeatThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void HeartbeatThread::Run() {
  // Steady deadlines: a wall-clock step must not stop or flood the beats.
  auto next = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    beat_();
    lock.lock();
    next += absl::ToChronoNanoseconds(interval_);
    const auto now = std::chrono::steady_clock::now();
    // After a long stall (a stopped process) beat at once, then on time again.
    if (next < now) next = now;
    stop_cv_.wait_until(lock, next, [this] { return stop_; });
  }
}

}  // namespace comm
