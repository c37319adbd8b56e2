// File: comm/loopback_transport.cc
#include "comm/loopback_transport.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cstring>
#include <deque>
#include <list>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace comm {

namespace {

// A rendezvous message goes kInFlight -> kCopying -> kCopied (or kRejected)
// on the receiver's side, or kInFlight -> kWithdrawn when its sender aborts
// first: then the receiver never reads the sender's buffer.
enum MessageState : int { kInFlight = 0, kCopied = 1, kRejected = 2, kCopying = 3, kWithdrawn = 4 };

}  // namespace

struct LoopbackMessage {
  int source = 0;
  uint64_t tag = 0;
  size_t num_bytes = 0;
  std::vector<std::byte> eager_copy;        // eager messages: copied at post
  const void* sender_data = nullptr;        // others: read by the receiver at match
  absl::Time deliver_at;                    // perturbation hold-back
  std::atomic<int> state{kInFlight};
};

// The part of a rank that other ranks touch: its inbox and wake-up.
class LoopbackEndpoint {
 public:
  void Push(std::shared_ptr<LoopbackMessage> message) {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(std::move(message));
    wake_ = true;
    cv_.notify_one();
  }
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
    cv_.notify_one();
  }
  std::deque<std::shared_ptr<LoopbackMessage>> TakeInbox() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<std::shared_ptr<LoopbackMessage>> taken;
    taken.swap(inbox_);
    return taken;
  }
  void Block(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!wake_ && inbox_.empty()) cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout));
    wake_ = false;
  }

  std::atomic<bool> dead{false};

 private:
  // std:: primitives, so ThreadSanitizer sees them (Debian's Abseil is not
  // built with it).
  std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;                                    // guarded by mu_
  std::deque<std::shared_ptr<LoopbackMessage>> inbox_;  // guarded by mu_
};

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(LoopbackHub* hub, int rank)
      : hub_(hub), rank_(rank), random_(hub->options_.seed * 7919 + rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return hub_->world_size(); }
  int HostIndex(int rank) const override {
    const std::vector<int>& hosts = hub_->options_.host_of_rank;
    return rank >= 0 && rank < static_cast<int>(hosts.size()) ? hosts[rank] : 0;
  }

  absl::Status PostSend(int peer, uint64_t tag, const void* data, size_t num_bytes,
                        Completion* completion) override {
    FSDP_RETURN_IF_ERROR(CheckPeerAndTag("send to", peer, tag));
    auto message = std::make_shared<LoopbackMessage>();
    message->source = rank_;
    message->tag = tag;
    message->num_bytes = num_bytes;
    message->deliver_at = absl::Now() + RandomDelay();
    const bool eager = num_bytes <= hub_->options_.eager_bytes;
    if (eager) {
      if (num_bytes > 0) {
        message->eager_copy.assign(static_cast<const std::byte*>(data),
                                   static_cast<const std::byte*>(data) + num_bytes);
      }
      message->state.store(kCopied);
    } else {
      message->sender_data = data;
    }
    *completion = Completion{};
    pending_sends_.push_back({message, completion, peer});
    hub_->endpoints_[peer]->Push(std::move(message));
    return absl::OkStatus();
  }

  absl::Status PostRecv(int peer, uint64_t tag, void* data, size_t num_bytes,
                        Completion* completion) override {
    FSDP_RETURN_IF_ERROR(CheckPeerAndTag("receive from", peer, tag));
    *completion = Completion{};
    PostedRecv recv{peer, tag, data, num_bytes, completion};
    for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
      if ((*it)->source == peer && (*it)->tag == tag) {
        Deliver(**it, recv);
        unexpected_.erase(it);
        return absl::OkStatus();
      }
    }
    posted_recvs_.push_back(recv);
    return absl::OkStatus();
  }

  bool Progress() override {
    if (!stopped_.ok()) return false;
    bool progressed = false;
    const absl::Time now = absl::Now();
    for (auto& message : self().TakeInbox()) arriving_.push_back(std::move(message));
    // Deliver arrived messages, keeping per-(source, tag) order: a message
    // waits while an earlier one of its (source, tag) is held back.
    std::set<std::pair<int, uint64_t>> held_back;
    for (auto it = arriving_.begin(); it != arriving_.end();) {
      LoopbackMessage& message = **it;
      auto key = std::make_pair(message.source, message.tag);
      if (message.deliver_at > now || held_back.count(key) > 0) {
        held_back.insert(key);
        ++it;
        continue;
      }
      auto recv = std::find_if(posted_recvs_.begin(), posted_recvs_.end(),
                               [&](const PostedRecv& r) {
                                 return r.peer == message.source && r.tag == message.tag;
                               });
      if (recv != posted_recvs_.end()) {
        Deliver(message, *recv);
        posted_recvs_.erase(recv);
      } else {
        unexpected_.push_back(*it);
      }
      it = arriving_.erase(it);
      progressed = true;
    }
    // Finish sends whose data has been copied (or refused), or whose peer died.
    for (auto it = pending_sends_.begin(); it != pending_sends_.end();) {
      int state = it->message->state.load(std::memory_order_acquire);
      bool peer_dead = hub_->endpoints_[it->peer]->dead.load();
      if (state == kInFlight && peer_dead) {
        // Withdrawn, so the dead rank's thread cannot read it later.
        it->message->state.compare_exchange_strong(state, kWithdrawn);
      }
      if (state == kCopying || (state == kInFlight && !peer_dead)) {
        ++it;
        continue;
      }
      if (state == kCopied) {
        it->completion->status = absl::OkStatus();
      } else if (state == kRejected) {
        it->completion->status = absl::InternalError(absl::StrCat(
            "rank ", it->peer, " posted a receive shorter than this ", it->message->num_bytes,
            "-byte message"));
      } else {
        it->completion->status = PeerDied(it->peer);
      }
      it->completion->done = true;
      it = pending_sends_.erase(it);
      progressed = true;
    }
    for (auto it = posted_recvs_.begin(); it != posted_recvs_.end();) {
      if (!hub_->endpoints_[it->peer]->dead.load()) {
        ++it;
        continue;
      }
      it->completion->status = PeerDied(it->peer);
      it->completion->done = true;
      it = posted_recvs_.erase(it);
      progressed = true;
    }
    return progressed;
  }

  absl::Status BlockUntilActivity(absl::Duration timeout) override {
    // Held-back messages are not announced again: poll for them.
    if (!arriving_.empty()) timeout = std::min(timeout, absl::Microseconds(50));
    self().Block(timeout);
    return absl::OkStatus();
  }

  void Interrupt() override { self().Wake(); }

  absl::Status health() const override {
    for (int r = 0; r < world_size(); ++r) {
      if (r != rank_ && hub_->endpoints_[r]->dead.load()) return PeerDied(r);
    }
    return stopped_;
  }

  void Abort(const absl::Status& why) override {
    if (!stopped_.ok()) return;
    stopped_ = why.ok() ? absl::InternalError("stopped without a reason") : why;
    for (PendingSend& send : pending_sends_) {
      int expected = kInFlight;
      if (!send.message->state.compare_exchange_strong(expected, kWithdrawn)) {
        // A receiver is copying it right now: let it finish reading.
        while (send.message->state.load(std::memory_order_acquire) == kCopying) {
          std::this_thread::yield();
        }
      }
      send.completion->status = stopped_;
      send.completion->done = true;
    }
    pending_sends_.clear();
    for (PostedRecv& recv : posted_recvs_) {
      recv.completion->status = stopped_;
      recv.completion->done = true;
    }
    posted_recvs_.clear();
  }

 private:
  struct PostedRecv {
    int peer;
    uint64_t tag;
    void* data;
    size_t num_bytes;
    Completion* completion;
  };
  struct PendingSend {
    std::shared_ptr<LoopbackMessage> message;
    Completion* completion;
    int peer;
  };

  LoopbackEndpoint& self() { return *hub_->endpoints_[rank_]; }

  static absl::Status PeerDied(int peer) {
    return absl::UnavailableError(absl::StrCat("rank ", peer, " died (loopback KillRank)"));
  }

  absl::Status CheckPeerAndTag(const char* what, int peer, uint64_t tag) const {
    if (peer < 0 || peer >= world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": cannot ", what,
                                                     " rank ", peer, ": world size is ",
                                                     world_size()));
    }
    if (tag > kMaxTransportTag) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": tag 0x", absl::Hex(tag), " exceeds ",
                       kTransportTagBits, " bits"));
    }
    if (hub_->endpoints_[peer]->dead.load()) return PeerDied(peer);
    if (!stopped_.ok()) {
      return absl::Status(stopped_.code(), absl::StrCat("rank ", rank_, ": cannot ", what,
                                                        " rank ", peer,
                                                        ": the transport has stopped: ",
                                                        stopped_.message()));
    }
    return absl::OkStatus();
  }

  absl::Duration RandomDelay() {
    const absl::Duration max_delay = hub_->options_.max_delay;
    if (max_delay <= absl::ZeroDuration()) return absl::ZeroDuration();
    std::uniform_int_distribution<int64_t> nanos(0, absl::ToInt64Nanoseconds(max_delay));
    return absl::Nanoseconds(nanos(random_));
  }

  // Copies `message` into `recv` and finishes the receive; tells the sender.
  void Deliver(LoopbackMessage& message, const PostedRecv& recv) {
    int expected = kInFlight;
    const bool rendezvous = message.sender_data != nullptr;
    if (rendezvous && !message.state.compare_exchange_strong(
                          expected, message.num_bytes > recv.num_bytes ? kRejected : kCopying)) {
      recv.completion->status = absl::UnavailableError(absl::StrCat(
          "rank ", message.source, " withdrew its ", message.num_bytes,
          "-byte message (tag 0x", absl::Hex(message.tag), "): its transport stopped"));
      recv.completion->received_bytes = 0;
    } else if (message.num_bytes > recv.num_bytes) {
      recv.completion->status = absl::InternalError(absl::StrCat(
          "message of ", message.num_bytes, " bytes from rank ", message.source, " (tag 0x",
          absl::Hex(message.tag), ") is longer than the posted receive of ", recv.num_bytes,
          " bytes"));
      recv.completion->received_bytes = 0;
    } else {
      if (message.num_bytes > 0) {
        const void* source = message.sender_data != nullptr
                                 ? message.sender_data
                                 : static_cast<const void*>(message.eager_copy.data());
        std::memcpy(recv.data, source, message.num_bytes);
      }
      recv.completion->status = absl::OkStatus();
      recv.completion->received_bytes = message.num_bytes;
      message.state.store(kCopied, std::memory_order_release);
    }
    recv.completion->done = true;
    if (message.sender_data != nullptr) hub_->endpoints_[message.source]->Wake();
  }

  LoopbackHub* hub_;
  int rank_;
  std::mt19937_64 random_;
  // Owned by this rank's calling thread only.
  std::list<PostedRecv> posted_recvs_;
  std::list<std::shared_ptr<LoopbackMessage>> arriving_;    // taken from the inbox
  std::list<std::shared_ptr<LoopbackMessage>> unexpected_;  // arrived, unmatched
  std::list<PendingSend> pending_sends_;
  absl::Status stopped_;  // Abort()'s reason; OK while running
};

LoopbackHub::LoopbackHub(int world_size, LoopbackOptions options) : options_(options) {
  FSDP_CHECK(world_size >= 1);
  for (int r = 0; r < world_size; ++r) endpoints_.push_back(std::make_unique<LoopbackEndpoint>());
}

LoopbackHub::~LoopbackHub() = default;

std::unique_ptr<Transport> LoopbackHub::CreateTransport(int rank) {
  FSDP_CHECK(rank >= 0 && rank < world_size());
  return std::make_unique<LoopbackTransport>(this, rank);
}

void LoopbackHub::KillRank(int rank) {
  FSDP_CHECK(rank >= 0 && rank < world_size());
  endpoints_[rank]->dead.store(true);
  for (auto& endpoint : endpoints_) endpoint->Wake();
}

}  // namespace comm
