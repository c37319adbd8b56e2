// File: comm/rendezvous/heartbeat_thread.h
//
// A thread that calls `beat` every `interval` until it is destroyed: the
// sending half of the hang detector (comm/rendezvous/rendezvous.h builds the
// beat). A thread of its own, because the caller's threads may be stuck in a
// computation or blocked: the beat must go out regardless, and say so
// (comm/liveness.h).
//
//   HeartbeatThread beats(absl::Milliseconds(200), [&] { SendBeat(); });
//   ... // beats until `beats` goes out of scope
#ifndef COMM_RENDEZVOUS_HEARTBEAT_THREAD_H_
#define COMM_RENDEZVOUS_HEARTBEAT_THREAD_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace comm {

class HeartbeatThread {
 public:
  // Beats once at once, then every `interval`.
  HeartbeatThread(absl::Duration interval, std::function<void()> beat);
  // Stops: waits for a beat in progress, then joins.
  ~HeartbeatThread();

  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

 private:
  void Run();

  const absl::Duration interval_;
  const std::function<void()> beat_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace comm

#endif  // COMM_RENDEZVOUS_HEARTBEAT_THREAD_H_
