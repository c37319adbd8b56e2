// File: comm/rendezvous/store_server.cc
#include "comm/rendezvous/store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "comm/rendezvous/framed_socket.h"
#include "comm/rendezvous/hang_verdict.h"
#include "comm/rendezvous/job_secret.h"
#include "comm/rendezvous/rendezvous_auth.h"
#include "comm/signal_stack.h"
#include "proto/rendezvous.pb.h"

namespace comm {
namespace {

using SteadyClock = std::chrono::steady_clock;

absl::Duration Since(SteadyClock::time_point then, SteadyClock::time_point now) {
  return absl::FromChrono(now - then);
}

}  // namespace

struct StoreServer::Connection {
  std::unique_ptr<FramedSocket> socket;
  std::string peer;     // "10.0.0.2:41234", for the refusal log
  std::string peer_ip;  // "10.0.0.2", for the per-address cap
  SteadyClock::time_point accepted_at = SteadyClock::now();
  int rank = -1;  // -1 until a JoinRequest was accepted
  // This connection's challenge, and once its join verified, its sealed
  // messages (comm/rendezvous/rendezvous_auth.h).
  std::string store_nonce;
  std::unique_ptr<SealedChannel> channel;
  std::string host;
  bool said_goodbye = false;
  // Hang detection: when the last message arrived, the latest heartbeat, and
  // whether this rank was declared hung.
  SteadyClock::time_point last_message_at = SteadyClock::now();
  fsdp::proto::Heartbeat heartbeat;
  bool declared_hung = false;
};

// The serving loop; runs on StoreServer::thread_ and owns all sockets.
class StoreServer::Loop {
 public:
  Loop(StoreServer* server, const StoreServerOptions& options, int listen_fd)
      : server_(server), options_(options), listen_fd_(listen_fd),
        start_(absl::Now()), blobs_(options.world_size), hosts_(options.world_size) {
    max_pending_ = options.max_pending_connections > 0 ? options.max_pending_connections
                                                       : 2 * options.world_size + 64;
    max_pending_per_address_ = options.max_pending_per_address > 0
                                   ? options.max_pending_per_address
                                   : options.world_size + 32;
  }

  ~Loop() { StopListening(); }

  void Run(int wake_fd);
  int port() const { return options_.port; }

 private:
  enum class State { kJoining, kRunning, kAborted };

  void Accept();
  // Closes the listener: nobody new can reach the store.
  void StopListening();
  // Whether a connection from `ip` may wait for its join now.
  bool HasRoomFor(const std::string& ip) const;
  // Handles what arrived on connection `index`; returns false to drop it.
  bool Serve(Connection& connection);
  // Verifies the join's MAC, then admits the rank; false to drop it.
  bool HandleJoin(Connection& connection, const fsdp::proto::Sealed& sealed_join);
  // A joined rank's sealed message (heartbeat, goodbye).
  void HandleSealed(Connection& connection, const fsdp::proto::Sealed& sealed);
  void Abort(const std::string& reason);
  void SendTo(Connection& connection, const fsdp::proto::ServerMessage& message);
  void Broadcast(const fsdp::proto::ServerMessage& message, int except_rank);
  void ConnectionLost(Connection& connection);
  void UpdateOthersConnected();
  // Counts and logs one refused connection; the caller drops it.
  enum class Refusal {
    kSilent, kOversized, kMalformed, kOutOfOrder, kWrongToken, kOverCapacity, kForged
  };
  void Refuse(const Connection& connection, Refusal why, const std::string& detail);
  // Drops connections that never joined within first_message_timeout; returns
  // the time until the next such deadline (for poll), or -1 ms if none.
  int64_t DropSilent(SteadyClock::time_point now);
  std::string MissingRanks() const;
  bool hang_detection() const { return options_.hang_timeout != absl::InfiniteDuration(); }
  // Every heartbeat interval: beats to every rank, then the hang verdicts.
  void Tick(SteadyClock::time_point now);

  StoreServer* server_;
  StoreServerOptions options_;
  int listen_fd_;
  absl::Time start_;
  State state_ = State::kJoining;
  std::string abort_reason_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::map<int, Connection*> joined_;  // rank -> its connection
  std::vector<std::string> blobs_;
  std::vector<std::string> hosts_;  // host name of each rank, for the roster
  SteadyClock::time_point next_tick_ = SteadyClock::now();
  SteadyClock::time_point last_tick_ = SteadyClock::now();
  // Out of descriptors or kernel memory: no accept before then.
  SteadyClock::time_point accept_paused_until_ = SteadyClock::now();
  int max_pending_ = 0;
  int max_pending_per_address_ = 0;
};

void StoreServer::Loop::Run(int wake_fd) {
  const absl::Time join_deadline = start_ + options_.join_timeout;
  while (true) {
    // Before the poll set is built: dropped connections close their fds.
    const int64_t silent_ms = DropSilent(SteadyClock::now());
    std::vector<pollfd> fds;
    fds.push_back({wake_fd, POLLIN, 0});
    // A negative fd is ignored by poll: not listening, or pausing.
    const bool accepting = listen_fd_ >= 0 && SteadyClock::now() >= accept_paused_until_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (const auto& connection : connections_) {
      fds.push_back({connection->socket->fd(), POLLIN, 0});
    }
    int timeout_ms = -1;
    if (state_ == State::kJoining) {
      absl::Duration left = join_deadline - absl::Now();
      timeout_ms = static_cast<int>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(left) + 1));
    } else if (state_ == State::kRunning && hang_detection()) {
      absl::Duration left = Since(SteadyClock::now(), next_tick_);
      timeout_ms = static_cast<int>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(left) + 1));
    }
    if (silent_ms >= 0 && (timeout_ms < 0 || silent_ms < timeout_ms)) {
      timeout_ms = static_cast<int>(silent_ms);
    }
    if (listen_fd_ >= 0 && !accepting) {
      const int64_t pause_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   accept_paused_until_ - SteadyClock::now())
                                   .count() +
                               1;
      if (timeout_ms < 0 || pause_ms < timeout_ms) timeout_ms = static_cast<int>(pause_ms);
    }
    int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // Stop()
    if (fds[1].revents & POLLIN) Accept();

    // Serve existing connections (indices shift as connections go away, so
    // walk the snapshot of fds and find each connection by fd).
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = std::find_if(connections_.begin(), connections_.end(),
                             [&](const std::unique_ptr<Connection>& c) {
                               return c->socket->fd() == fds[i].fd;
                             });
      if (it == connections_.end()) continue;
      if (!Serve(**it)) {
        Connection* gone = it->get();
        for (auto j = joined_.begin(); j != joined_.end(); ++j) {
          if (j->second == gone) {
            joined_.erase(j);
            break;
          }
        }
        connections_.erase(it);
        UpdateOthersConnected();
      }
    }

    if (state_ == State::kRunning && hang_detection() && SteadyClock::now() >= next_tick_) {
      Tick(SteadyClock::now());
    }

    if (state_ == State::kJoining && absl::Now() >= join_deadline) {
      Abort(absl::StrCat("rendezvous timed out after ",
                         absl::FormatDuration(absl::Now() - start_), " on rank 0: ",
                         MissingRanks(), " never arrived (", joined_.size(), " of ",
                         options_.world_size,
                         " ranks joined); check that every rank was started with the "
                         "same MASTER_ADDR/MASTER_PORT and that none crashed at startup"));
    }
  }
}

void StoreServer::Loop::Tick(SteadyClock::time_point now) {
  const absl::Duration bound = options_.hang_timeout;
  const absl::Duration interval = HeartbeatInterval(bound);
  if (Since(last_tick_, now) > bound / 2) {
    // This thread did not run for half a bound (the whole process was
    // stopped, e.g. a suspended job, or starved): the ranks' silence over that
    // gap is ours, not theirs.
    for (auto& [rank, connection] : joined_) connection->last_message_at = now;
  }
  last_tick_ = now;
  next_tick_ = now + absl::ToChronoNanoseconds(interval);

  fsdp::proto::ServerMessage beat;
  beat.mutable_heartbeat();
  for (auto& [rank, connection] : joined_) {
    if (!connection->said_goodbye && !connection->declared_hung) SendTo(*connection, beat);
  }

  std::vector<RankHeartbeat> ranks;
  for (const auto& [rank, connection] : joined_) {
    RankHeartbeat r;
    r.rank = rank;
    r.judged = !connection->said_goodbye && !connection->declared_hung;
    r.silent = Since(connection->last_message_at, now);
    r.idle = absl::Milliseconds(connection->heartbeat.idle_ms());
    r.pending = absl::Milliseconds(connection->heartbeat.pending_ms());
    r.awaited_rank = connection->heartbeat.awaited_rank();
    r.awaited_what = connection->heartbeat.awaited_what();
    ranks.push_back(std::move(r));
  }
  std::vector<HangVerdict> verdicts = FindHungRanks(ranks, bound);
  for (const HangVerdict& verdict : verdicts) {
    joined_[verdict.rank]->declared_hung = true;
    fsdp::proto::ServerMessage message;
    message.mutable_peer_gone()->set_rank(verdict.rank);
    message.mutable_peer_gone()->set_clean(false);
    message.mutable_peer_gone()->set_hung(true);
    message.mutable_peer_gone()->set_reason(verdict.reason);
    // The hung rank too: should it resume, it must not go on as if nothing
    // happened.
    Broadcast(message, /*except_rank=*/-1);
  }
  if (!verdicts.empty()) UpdateOthersConnected();
}

std::string StoreServer::Loop::MissingRanks() const {
  std::vector<int> missing;
  for (int rank = 0; rank < options_.world_size; ++rank) {
    if (joined_.count(rank) == 0) missing.push_back(rank);
  }
  const size_t kShown = 16;
  std::string text = absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                                  absl::StrJoin(missing.begin(),
                                                missing.begin() +
                                                    std::min(missing.size(), kShown),
                                                ", "));
  if (missing.size() > kShown) absl::StrAppend(&text, " and ", missing.size() - kShown, " more");
  return text;
}

void StoreServer::Loop::Accept() {
  // A bounded number per turn, so that a flood of connections cannot keep
  // the loop from the ranks' messages.
  for (int accepted = 0; accepted < 64; ++accepted) {
    sockaddr_in address{};
    socklen_t address_size = sizeof(address);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &address_size,
                     SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays in the kernel's queue; polling the
        // listener now would return at once, again and again.
        accept_paused_until_ =
            SteadyClock::now() + absl::ToChronoNanoseconds(options_.accept_backoff);
        std::fprintf(stderr,
                     "rendezvous store on rank 0 (port %d): cannot accept a connection (%s); "
                     "accepting again in %s\n",
                     options_.port, strerror(errno),
                     absl::FormatDuration(options_.accept_backoff).c_str());
        std::fflush(stderr);
      }
      return;
    }
    auto connection = std::make_unique<Connection>();
    connection->socket = std::make_unique<FramedSocket>(fd);
    connection->socket->set_max_frame_bytes(options_.max_client_frame_bytes);
    char text[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
    connection->peer_ip = text;
    connection->peer = absl::StrCat(text, ":", ntohs(address.sin_port));
    if (!HasRoomFor(connection->peer_ip)) {
      const std::string why =
          absl::StrCat("over capacity: ", max_pending_, " connections in all, or ",
                       max_pending_per_address_, " from one address, are already waiting to join");
      Refuse(*connection, Refusal::kOverCapacity, why);
      // A rank of the job learns why (a flood of strangers on this port?).
      fsdp::proto::ServerMessage reply;
      reply.mutable_refused()->set_reason(absl::StrCat("the rendezvous store on MASTER_PORT ",
                                                       options_.port, " is ", why));
      SendTo(*connection, reply);
      continue;  // closed as it goes out of scope
    }
    absl::StatusOr<std::string> nonce = RandomBytes(kNonceBytes);
    if (!nonce.ok()) {
      std::fprintf(stderr, "rendezvous store on rank 0 (port %d): dropped %s: %s\n",
                   options_.port, connection->peer.c_str(),
                   std::string(nonce.status().message()).c_str());
      std::fflush(stderr);
      continue;
    }
    connection->store_nonce = *std::move(nonce);
    fsdp::proto::ServerMessage challenge;
    challenge.mutable_challenge()->set_store_nonce(connection->store_nonce);
    SendTo(*connection, challenge);
    connections_.push_back(std::move(connection));
  }
}

bool StoreServer::Loop::HasRoomFor(const std::string& ip) const {
  int pending = 0, from_ip = 0;
  for (const auto& connection : connections_) {
    if (connection->rank >= 0) continue;
    ++pending;
    if (connection->peer_ip == ip) ++from_ip;
  }
  return pending < max_pending_ && from_ip < max_pending_per_address_;
}

void StoreServer::Loop::StopListening() {
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void StoreServer::Loop::Refuse(const Connection& connection, Refusal why,
                               const std::string& detail) {
  StoreRefusals counts;
  {
    std::lock_guard<std::mutex> lock(server_->mutex_);
    StoreRefusals& r = server_->refusals_;
    switch (why) {
      case Refusal::kSilent: ++r.silent; break;
      case Refusal::kOversized: ++r.oversized; break;
      case Refusal::kMalformed: ++r.malformed; break;
      case Refusal::kOutOfOrder: ++r.out_of_order; break;
      case Refusal::kWrongToken: ++r.wrong_token; break;
      case Refusal::kOverCapacity: ++r.over_capacity; break;
      case Refusal::kForged: ++r.forged; break;
    }
    counts = r;
  }
  // Every refusal is counted; the first 20 are logged one by one, then one
  // line per 100, so that a flood cannot fill the job's log.
  const int64_t n = counts.total();
  if (n <= 20 || n % 100 == 0) {
    std::fprintf(stderr, "rendezvous store on rank 0 (port %d): refused %s: %s (%s)\n",
                 options_.port, connection.peer.c_str(), detail.c_str(),
                 DescribeRefusals(counts).c_str());
    std::fflush(stderr);
  }
}

int64_t StoreServer::Loop::DropSilent(SteadyClock::time_point now) {
  const auto limit = absl::ToChronoNanoseconds(options_.first_message_timeout);
  int64_t next_ms = -1;
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection& connection = **it;
    if (connection.rank >= 0) {
      ++it;
      continue;
    }
    const auto deadline = connection.accepted_at + limit;
    if (now >= deadline) {
      Refuse(connection, Refusal::kSilent,
             absl::StrCat("no JoinRequest within ",
                          absl::FormatDuration(options_.first_message_timeout),
                          " of connecting"));
      it = connections_.erase(it);
      continue;
    }
    const int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    if (next_ms < 0 || ms < next_ms) next_ms = ms;
    ++it;
  }
  return next_ms;
}

void StoreServer::Loop::SendTo(Connection& connection,
                               const fsdp::proto::ServerMessage& message) {
  // A rank that cannot take a few bytes in 5 s is as good as gone; its own
  // reads will tell it. Once its join verified, everything goes sealed.
  if (connection.channel == nullptr) {
    (void)connection.socket->Write(message, absl::Now() + absl::Seconds(5));
    return;
  }
  fsdp::proto::ServerMessage sealed;
  connection.channel->Seal(message, sealed.mutable_sealed());
  (void)connection.socket->Write(sealed, absl::Now() + absl::Seconds(5));
}

void StoreServer::Loop::Broadcast(const fsdp::proto::ServerMessage& message,
                                  int except_rank) {
  for (auto& [rank, connection] : joined_) {
    if (rank != except_rank && !connection->said_goodbye) SendTo(*connection, message);
  }
}

void StoreServer::Loop::Abort(const std::string& reason) {
  state_ = State::kAborted;
  abort_reason_ = reason;
  fsdp::proto::ServerMessage message;
  message.mutable_aborted()->set_reason(reason);
  Broadcast(message, /*except_rank=*/-1);
}

bool StoreServer::Loop::HandleJoin(Connection& connection,
                                   const fsdp::proto::Sealed& sealed_join) {
  fsdp::proto::ServerMessage reply;
  if (!MacEquals(JoinMac(options_.job_token, connection.store_nonce, sealed_join.body()),
                 sealed_join.mac())) {
    Refuse(connection, Refusal::kWrongToken,
           "a join whose MAC does not fit this job's secret (a rank of another job, or a "
           "stranger)");
    // Unsealed: a rank with another secret could not check a seal anyway.
    reply.mutable_refused()->set_reason(absl::StrCat(
        "job token mismatch: the rendezvous store on MASTER_PORT ", options_.port,
        " belongs to another job (this rank's join does not carry a MAC of the store's "
        "secret, so its FSDP_JOB_TOKEN differs); this rank was refused. Give each job its "
        "own MASTER_PORT, or the same FSDP_JOB_TOKEN to all ranks of one job"));
    SendTo(connection, reply);
    return false;
  }
  fsdp::proto::JoinRequest join;
  if (!join.ParseFromString(sealed_join.body()) || join.rank_nonce().size() != kNonceBytes) {
    Refuse(connection, Refusal::kMalformed,
           "a join with a valid MAC but no JoinRequest with a nonce in it");
    return false;
  }
  connection.channel = std::make_unique<SealedChannel>(
      SessionKey(options_.job_token, connection.store_nonce, join.rank_nonce()),
      SealedChannel::Side::kStore);
  fsdp::proto::ServerMessage welcome;
  welcome.mutable_welcome();
  SendTo(connection, welcome);
  if (state_ == State::kAborted) {
    reply.mutable_aborted()->set_reason(abort_reason_);
    SendTo(connection, reply);
    return false;
  }
  if (state_ == State::kRunning) {
    reply.mutable_refused()->set_reason(absl::StrCat(
        "the job already started with all ", options_.world_size, " ranks; rank ",
        join.rank(), " from ", join.host(),
        " is a duplicate (two processes with the same rank?) or from a restarted job"));
    SendTo(connection, reply);
    return false;
  }
  connection.host = join.host();
  if (join.world_size() != options_.world_size) {
    Abort(absl::StrCat("rank ", join.rank(), " (host ", join.host(), ") says WORLD_SIZE=",
                       join.world_size(), " but rank 0 has WORLD_SIZE=",
                       options_.world_size,
                       "; launch every rank with the same world size"));
    reply.mutable_aborted()->set_reason(abort_reason_);
    SendTo(connection, reply);
    return false;
  }
  if (join.rank() < 0 || join.rank() >= options_.world_size) {
    Abort(absl::StrCat("a rank on host ", join.host(), " says RANK=", join.rank(),
                       ", outside [0, ", options_.world_size, ")"));
    reply.mutable_aborted()->set_reason(abort_reason_);
    SendTo(connection, reply);
    return false;
  }
  auto existing = joined_.find(join.rank());
  if (existing != joined_.end()) {
    Abort(absl::StrCat("duplicate rank: two processes say RANK=", join.rank(),
                       " (hosts ", existing->second->host, " and ", join.host(),
                       "); every rank needs a distinct RANK"));
    reply.mutable_aborted()->set_reason(abort_reason_);
    SendTo(connection, reply);
    return false;
  }
  connection.rank = join.rank();
  joined_[join.rank()] = &connection;
  blobs_[join.rank()] = join.blob();
  hosts_[join.rank()] = join.host();
  UpdateOthersConnected();
  if (static_cast<int>(joined_.size()) == options_.world_size) {
    state_ = State::kRunning;
    fsdp::proto::ServerMessage roster;
    for (const std::string& blob : blobs_) roster.mutable_roster()->add_blobs(blob);
    for (const std::string& host : hosts_) roster.mutable_roster()->add_hosts(host);
    if (hang_detection()) {
      roster.mutable_roster()->set_hang_timeout_ms(
          std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.hang_timeout)));
      // Every rank's silence starts now.
      const SteadyClock::time_point now = SteadyClock::now();
      for (auto& [rank, joined] : joined_) joined->last_message_at = now;
      last_tick_ = now;
      next_tick_ = now + absl::ToChronoNanoseconds(HeartbeatInterval(options_.hang_timeout));
    }
    Broadcast(roster, /*except_rank=*/-1);
    blobs_.clear();
    blobs_.shrink_to_fit();
    // Every later join would be refused: nobody new needs to reach the store.
    StopListening();
  }
  return true;
}

void StoreServer::Loop::ConnectionLost(Connection& connection) {
  if (connection.rank < 0 || connection.said_goodbye) return;
  if (state_ == State::kJoining) {
    joined_.erase(connection.rank);
    Abort(absl::StrCat("rank ", connection.rank, " (host ", connection.host,
                       ") disconnected during the rendezvous; did it crash?"));
    return;
  }
  if (state_ == State::kRunning) {
    fsdp::proto::ServerMessage message;
    message.mutable_peer_gone()->set_rank(connection.rank);
    message.mutable_peer_gone()->set_clean(false);
    Broadcast(message, connection.rank);
  }
}

bool StoreServer::Loop::Serve(Connection& connection) {
  std::vector<std::string> frames;
  absl::StatusOr<bool> open =
      connection.socket->ReadAvailable(&frames, options_.read_budget_bytes);
  for (const std::string& frame : frames) {
    fsdp::proto::ClientMessage message;
    if (!message.ParseFromString(frame) && connection.rank < 0) {
      Refuse(connection, Refusal::kMalformed,
             absl::StrCat("a ", frame.size(), "-byte frame that is not a ClientMessage"));
      return false;
    }
    if (connection.rank < 0) {
      if (!message.has_join()) {
        Refuse(connection, Refusal::kOutOfOrder, "a message other than a JoinRequest first");
        return false;
      }
      if (!HandleJoin(connection, message.join())) return false;
    } else {
      HandleSealed(connection, message.sealed());
    }
  }
  if (!open.ok() && connection.rank < 0) {
    Refuse(connection, Refusal::kOversized, std::string(open.status().message()));
    return false;
  }
  if (!open.ok() || !*open) {
    ConnectionLost(connection);
    return false;
  }
  return true;
}

void StoreServer::Loop::HandleSealed(Connection& connection,
                                     const fsdp::proto::Sealed& sealed) {
  std::string body;
  fsdp::proto::ClientMessage message;
  if (!connection.channel->Open(sealed, &body) || !message.ParseFromString(body)) {
    // Not from the rank (it would have sealed it): ignored, so that whoever
    // injected it cannot make the rank look dead or hung.
    Refuse(connection, Refusal::kForged,
           absl::StrCat("a message on rank ", connection.rank,
                        "'s connection without a valid MAC (ignored; the rank stays)"));
    return;
  }
  // Only what the rank sealed shows it alive.
  connection.last_message_at = SteadyClock::now();
  if (message.has_heartbeat()) {
    connection.heartbeat = message.heartbeat();
  } else if (message.has_goodbye() && !connection.said_goodbye) {
    connection.said_goodbye = true;
    if (state_ == State::kRunning) {
      fsdp::proto::ServerMessage gone;
      gone.mutable_peer_gone()->set_rank(connection.rank);
      gone.mutable_peer_gone()->set_clean(true);
      Broadcast(gone, connection.rank);
    }
    UpdateOthersConnected();
  }
}

std::string DescribeRefusals(const StoreRefusals& r) {
  return absl::StrCat(r.total(), " refused: ", r.silent, " silent, ", r.oversized,
                      " oversized, ", r.malformed, " malformed, ", r.out_of_order,
                      " out of order, ", r.wrong_token, " wrong token, ", r.over_capacity,
                      " over capacity, ", r.forged, " forged");
}

StoreRefusals StoreServer::refusals() {
  std::lock_guard<std::mutex> lock(mutex_);
  return refusals_;
}

void StoreServer::Loop::UpdateOthersConnected() {
  int count = 0;
  for (const auto& [rank, connection] : joined_) {
    // A hung rank will not say goodbye; rank 0 must not linger for it.
    if (rank != 0 && !connection->said_goodbye && !connection->declared_hung) ++count;
  }
  std::lock_guard<std::mutex> lock(server_->mutex_);
  server_->other_ranks_connected_ = count;
  if (count == 0) server_->others_left_.notify_all();
}

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(
    const StoreServerOptions& options) {
  FSDP_ASSIGN_OR_RETURN(int listen_fd, ListenOnPort(options.bind_ip, options.port));
  StoreServerOptions bound = options;
  if (bound.port == 0) {
    // The kernel chose it (the PMIx bootstrap publishes it).
    sockaddr_in address = {};
    socklen_t size = sizeof(address);
    if (getsockname(listen_fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      close(listen_fd);
      return absl::InternalError(absl::StrCat("getsockname on the store's socket failed: ",
                                              strerror(errno)));
    }
    bound.port = ntohs(address.sin_port);
  }
  std::unique_ptr<StoreServer> server(new StoreServer());
  if (pipe2(server->wake_pipe_, O_CLOEXEC) != 0) {
    close(listen_fd);
    return absl::InternalError("cannot create the store's wake-up pipe");
  }
  server->loop_ = std::make_unique<Loop>(server.get(), bound, listen_fd);
  StoreServer* raw = server.get();
  server->thread_ = std::thread([raw] {
    ScopedSignalStack signal_stack;  // a crash trace even if this stack overflows
    raw->loop_->Run(raw->wake_pipe_[0]);
  });
  return server;
}

int StoreServer::port() const { return loop_->port(); }

void StoreServer::WaitForOthersToLeave(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  others_left_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                        [this] { return other_ranks_connected_ == 0; });
}

StoreServer::~StoreServer() {
  char byte = 0;
  (void)!write(wake_pipe_[1], &byte, 1);
  if (thread_.joinable()) thread_.join();
  if (loop_ != nullptr && refusals_.total() > 0) {
    std::fprintf(stderr, "rendezvous store on rank 0 (port %d): %s\n", loop_->port(),
                 DescribeRefusals(refusals_).c_str());
    std::fflush(stderr);
  }
  loop_.reset();
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

}  // namespace comm
