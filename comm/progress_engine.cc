// File: comm/progress_engine.cc
#include "comm/progress_engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/signal_stack.h"

namespace comm {

struct ProgressEngine::Record {
  std::unique_ptr<CollectiveOp> op;
  std::string description;
  absl::Time posted_at;
  CallerLiveness::Clock::time_point posted_steady;
  absl::Status status;       // final status, once done
  std::atomic<bool> done{false};
};

class ProgressEngine::EngineWork : public Work {
 public:
  EngineWork(std::shared_ptr<ProgressEngine> engine, std::shared_ptr<Record> record)
      : engine_(std::move(engine)), record_(std::move(record)) {}
  bool Test() override { return engine_->Test(record_.get()); }
  absl::Status Wait(absl::Duration timeout) override {
    return engine_->Wait(record_.get(), timeout);
  }

 private:
  std::shared_ptr<ProgressEngine> engine_;
  std::shared_ptr<Record> record_;
};

namespace {

class FinishedWork : public Work {
 public:
  explicit FinishedWork(absl::Status status) : status_(std::move(status)) {}
  bool Test() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  absl::Status status_;
};

}  // namespace

std::shared_ptr<ProgressEngine> ProgressEngine::Create(Transport* transport,
                                                       absl::Duration wait_spin) {
  std::shared_ptr<ProgressEngine> engine(new ProgressEngine(transport, wait_spin));
  engine->thread_ = std::thread([raw = engine.get()] {
    ScopedSignalStack signal_stack;  // a crash trace even if this stack overflows
    raw->ThreadLoop();
  });
  return engine;
}

std::shared_ptr<ProgressEngine> ProgressEngine::CreateOwning(
    std::unique_ptr<Transport> transport, absl::Duration wait_spin) {
  std::shared_ptr<ProgressEngine> engine(new ProgressEngine(transport.get(), wait_spin));
  engine->owned_transport_ = std::move(transport);
  engine->thread_ = std::thread([raw = engine.get()] {
    ScopedSignalStack signal_stack;  // a crash trace even if this stack overflows
    raw->ThreadLoop();
  });
  return engine;
}

ProgressEngine::ProgressEngine(Transport* transport, absl::Duration wait_spin)
    : transport_(transport), wait_spin_(wait_spin), liveness_(transport->caller_liveness()) {}

void ProgressEngine::NoteCall() {
  if (liveness_ != nullptr) liveness_->NoteCall();
}

void ProgressEngine::PublishPendingLocked() {
  if (liveness_ == nullptr) return;
  // active_ is in posting order: the front is the oldest.
  if (active_.empty()) {
    liveness_->SetOldestPending(std::nullopt);
  } else {
    liveness_->SetOldestPending(active_.front()->posted_steady);
  }
  awaited_published_at_ = absl::InfinitePast();  // the oldest may have changed
}

void ProgressEngine::PublishAwaitedLocked() {
  if (liveness_ == nullptr || active_.empty()) return;
  const absl::Time now = absl::Now();
  if (now - awaited_published_at_ < kAwaitedRefresh) return;
  awaited_published_at_ = now;
  const Record& oldest = *active_.front();
  AwaitedPeer awaited = oldest.op->Awaited();
  liveness_->SetAwaited(awaited.global_rank,
                        awaited.what.empty()
                            ? oldest.description
                            : absl::StrCat(oldest.description, ": ", awaited.what));
}

ProgressEngine::~ProgressEngine() {
  lock_wanted_.fetch_add(1);  // makes a busy progress thread let go of mu_
  transport_->Interrupt();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    lock_wanted_.fetch_sub(1);
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();

  std::lock_guard<std::mutex> lock(mu_);
  if (active_.empty()) return;
  // Collectives still in flight: their callers are going away, and so may
  // their buffers. Nothing may move data for them any more, and a transport
  // cannot withdraw a send otherwise, so it stops (comm/transport.h, Abort).
  const absl::Status cancelled = absl::CancelledError(
      absl::StrCat("rank ", transport_->rank(), ": ", active_.front()->description,
                   active_.size() > 1 ? absl::StrCat(" and ", active_.size() - 1, " more") : "",
                   " still in flight when the communicator was destroyed"));
  transport_->Abort(cancelled);
  for (auto& record : active_) {
    record->status = cancelled;
    record->done.store(true, std::memory_order_release);
    ReleaseOpLocked(std::move(record->op));
  }
  active_.clear();
}

void ProgressEngine::ReleaseOpLocked(std::unique_ptr<CollectiveOp> op) {
  // A transport that broke Abort's contract may still write into
  // completions the op owns: leaked rather than freed under it.
  if (op != nullptr && op->HasPendingTransportOps()) {
    op.release();
    return;
  }
  op.reset();
}

WorkHandle ProgressEngine::Finished(absl::Status status) {
  return std::make_shared<FinishedWork>(std::move(status));
}

void ProgressEngine::InterruptIfBlocked() {
  if (blocked_in_transport_.load()) transport_->Interrupt();
}

absl::Status ProgressEngine::BlockInTransportLocked(absl::Duration timeout,
                                                    int own_lock_wanted) {
  // Dekker-style: we publish "blocked" before reading lock_wanted_, a poster
  // publishes lock_wanted_ before reading "blocked", so one sees the other.
  blocked_in_transport_.store(true);
  absl::Status status = absl::OkStatus();
  if (lock_wanted_.load() <= own_lock_wanted) status = transport_->BlockUntilActivity(timeout);
  blocked_in_transport_.store(false);
  return status;
}

WorkHandle ProgressEngine::Submit(std::unique_ptr<CollectiveOp> op, std::string description) {
  auto record = std::make_shared<Record>();
  record->op = std::move(op);
  record->description = std::move(description);
  record->posted_at = absl::Now();
  record->posted_steady = CallerLiveness::Clock::now();
  NoteCall();
  lock_wanted_.fetch_add(1);
  InterruptIfBlocked();
  {
    std::lock_guard<std::mutex> lock(mu_);
    lock_wanted_.fetch_sub(1);
    active_.push_back(record);
    PublishPendingLocked();
    // Step just this one now, so its first messages leave before we return.
    bool progressed = false;
    absl::StatusOr<bool> finished = record->op->Step(&progressed);
    if (!finished.ok()) {
      FinishLocked(record.get(), finished.status());
    } else if (*finished) {
      FinishLocked(record.get(), absl::OkStatus());
    }
  }
  work_cv_.notify_one();
  return std::make_shared<EngineWork>(shared_from_this(), std::move(record));
}

void ProgressEngine::FinishLocked(Record* record, absl::Status status) {
  if (!status.ok()) {
    status = absl::Status(status.code(), absl::StrCat("rank ", transport_->rank(), ": ",
                                                      record->description, " failed: ",
                                                      status.message()));
  }
  if (!status.ok() && record->op->HasPendingTransportOps()) {
    // The caller gets its buffers back with the error, so the transfers
    // still posted into them (to peers that will never answer: the job is
    // failing) must stop first. The transport stops for good: one failure
    // stops the job.
    transport_->Abort(status);
    if (record->op->HasPendingTransportOps()) {
      status = absl::Status(status.code(),
                            absl::StrCat(status.message(),
                                         " (the transport did not release its transfers on "
                                         "abort: their buffers may still be in use)"));
    }
  }
  record->status = std::move(status);
  ReleaseOpLocked(std::move(record->op));
  record->done.store(true, std::memory_order_release);
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [record](const std::shared_ptr<Record>& r) {
                                 return r.get() == record;
                               }),
                active_.end());
  PublishPendingLocked();
}

bool ProgressEngine::StepAllLocked() {
  bool progressed = transport_->Progress();
  // Copy: FinishLocked edits active_.
  std::vector<std::shared_ptr<Record>> active = active_;
  for (const auto& record : active) {
    absl::StatusOr<bool> finished = record->op->Step(&progressed);
    if (!finished.ok()) {
      FinishLocked(record.get(), finished.status());
      progressed = true;
    } else if (*finished) {
      FinishLocked(record.get(), absl::OkStatus());
      progressed = true;
    }
  }
  if (!progressed && !active_.empty()) {
    absl::Status health = transport_->health();
    if (!health.ok()) {
      std::vector<std::shared_ptr<Record>> doomed = active_;
      for (const auto& record : doomed) {
        FinishLocked(record.get(), absl::UnavailableError(health.message()));
      }
      progressed = true;
    }
  }
  return progressed;
}

bool ProgressEngine::Test(Record* record) {
  NoteCall();
  if (record->done.load(std::memory_order_acquire)) return true;
  if (mu_.try_lock()) {
    StepAllLocked();
    mu_.unlock();
  }
  return record->done.load(std::memory_order_acquire);
}

absl::Status ProgressEngine::Wait(Record* record, absl::Duration timeout) {
  NoteCall();
  if (record->done.load(std::memory_order_acquire)) return record->status;
  // Blocked here, the caller is waiting for others, not stuck.
  struct WaitScope {
    CallerLiveness* liveness;
    explicit WaitScope(CallerLiveness* l) : liveness(l) {
      if (liveness != nullptr) liveness->EnterWait();
    }
    ~WaitScope() {
      if (liveness != nullptr) liveness->LeaveWait();
    }
  } wait_scope(liveness_);
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  lock_wanted_.fetch_add(1);
  InterruptIfBlocked();
  std::unique_lock<std::mutex> lock(mu_);
  absl::Time last_progress = absl::Now();
  absl::Status result;
  while (true) {
    bool progressed = StepAllLocked();
    if (record->done.load(std::memory_order_acquire)) {
      result = record->status;
      break;
    }
    absl::Time now = absl::Now();
    if (progressed) {
      last_progress = now;
      continue;
    }
    if (now >= deadline) {
      AwaitedPeer awaited = record->op->Awaited();
      std::string whom =
          awaited.global_rank >= 0
              ? absl::StrCat("rank ", awaited.global_rank, " (", awaited.what, ")")
              : awaited.what;
      std::string hint =
          awaited.global_rank >= 0
              ? absl::StrCat(" and that rank ", awaited.global_rank, " is alive and progressing")
              : "";
      result = absl::DeadlineExceededError(absl::StrCat(
          "rank ", transport_->rank(), ": ", record->description, " waited ",
          absl::FormatDuration(now - start), " for ", whom,
          "; it is still in flight: check that every rank of the group posts the same "
          "collectives in the same order",
          hint));
      break;
    }
    if (lock_wanted_.load() > 1) {
      // Another poster or waiter wants the lock: let it in (it may be
      // waiting on a collective that already finished).
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    if (now - last_progress < wait_spin_) {
      // Past a short pure spin, yield between polls: a rank sharing its core
      // with the peer it waits for must let that peer run.
      if (now - last_progress > kPureSpin) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      }
      continue;
    }
    PublishAwaitedLocked();
    absl::Status blocked = BlockInTransportLocked(std::min(deadline - now, kWaitBlock), /*own_lock_wanted=*/1);
    if (!blocked.ok()) {
      result = absl::Status(blocked.code(),
                            absl::StrCat("rank ", transport_->rank(), ": waiting for ",
                                         record->description, ": ", blocked.message()));
      break;
    }
  }
  lock_wanted_.fetch_sub(1);  // under mu_, so the thread's condition sees it
  lock.unlock();
  work_cv_.notify_one();  // the progress thread may take over the rest
  return result;
}

void ProgressEngine::ThreadLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  absl::Time last_progress = absl::Now();
  auto has_work = [this]() {
    return stopping_ || (!active_.empty() && lock_wanted_.load() == 0);
  };
  while (true) {
    if (!has_work()) {
      // Every change that can make has_work() true notifies work_cv_:
      // Submit, the end of Wait (lock_wanted_ drops) and the destructor.
      work_cv_.wait(lock, has_work);
      last_progress = absl::Now();
    }
    if (stopping_) return;
    if (StepAllLocked()) {
      last_progress = absl::Now();
    } else if (absl::Now() - last_progress > kThreadSpin) {
      PublishAwaitedLocked();
      BlockInTransportLocked(kThreadBlock, /*own_lock_wanted=*/0).IgnoreError();
    }
    if (lock_wanted_.load() > 0) {
      // Let the poster or waiter in; it will step everything itself.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
  }
}

}  // namespace comm
