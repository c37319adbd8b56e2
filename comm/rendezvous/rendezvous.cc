// File: comm/rendezvous/rendezvous.cc
#include "comm/rendezvous/rendezvous.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/liveness.h"
#include "comm/rendezvous/framed_socket.h"
#include "comm/rendezvous/hang_verdict.h"
#include "comm/rendezvous/heartbeat_thread.h"
#include "comm/rendezvous/job_secret.h"
#include "comm/rendezvous/pmix_session.h"
#include "comm/rendezvous/rendezvous_auth.h"
#include "comm/rendezvous/store_address.h"
#include "comm/rendezvous/store_server.h"
#include "proto/rendezvous.pb.h"

namespace comm {
namespace {

// After its own deadline a rank still listens this long for rank 0's
// explanation (rank 0's clock started at a slightly different moment).
constexpr absl::Duration kReasonGrace = absl::Seconds(2);

// Until the store proved it knows the secret, a frame from it is a challenge,
// a refusal or a welcome: small. A fake store cannot make a rank buffer more.
constexpr size_t kMaxUnprovenFrameBytes = size_t{64} << 10;

int64_t SteadyNanos(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string Tenths(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(100)));
}

bool IsLoopback(const std::string& ip) { return ip.rfind("127.", 0) == 0; }

// A job whose secret anyone can derive is safe only where nobody else can
// reach its store: on one host, with the store on loopback.
absl::Status CheckDerivedTokenStaysLocal(const JobEnv& env) {
  if (env.token_source != JobTokenSource::kDerived) return absl::OkStatus();
  absl::StatusOr<StoreListenAddress> where = StoreListenAddressOnThisHost(env);
  if (!where.ok() || IsLoopback(where->bind_ip)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the job has no secret: its token is ", env.token_origin,
      ", which others can see, and rank 0's rendezvous store would listen on ",
      where->bind_ip, ", reachable from other hosts; ", kHowToGiveASecret));
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Rendezvous>> Rendezvous::Join(
    const JobEnv& env, const std::string& blob, absl::Duration timeout,
    const HangDetection& hang_detection) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  const std::string me = absl::StrCat("rank ", env.rank);
  std::unique_ptr<Rendezvous> rendezvous(new Rendezvous());
  rendezvous->env_ = env;
  if (env.world_size == 1) {
    // Nobody to meet and nobody to watch: no store, no port.
    rendezvous->blobs_ = {blob};
    rendezvous->hosts_ = {HostName()};
    return rendezvous;
  }
  auto prefixed = [&me](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(me, ": ", status.message()));
  };
  auto prefixed_if_error = [&prefixed](const absl::Status& status) {
    return status.ok() ? status : prefixed(status);
  };
  const bool spans_hosts = env.world_size > env.local_world_size;
  PmixSession* pmix = nullptr;
  if (env.master_from_pmix) {
    absl::StatusOr<PmixSession*> session = PmixSession::Get();
    if (!session.ok()) return prefixed(session.status());
    pmix = *session;
  }

  FSDP_RETURN_IF_ERROR(prefixed_if_error(CheckDerivedTokenStaysLocal(env)));
  std::string secret = env.job_token;
  if (env.token_source == JobTokenSource::kFromPmix && env.rank == 0) {
    absl::StatusOr<std::string> made = RandomSecretHex(32);
    if (!made.ok()) return prefixed(made.status());
    secret = *std::move(made);
  }

  // Rank 0 reaches its own store over the address it listens on, like
  // everyone else, so the failure detector treats all ranks alike.
  std::string connect_host = env.master_addr;
  int connect_port = env.master_port;
  if (env.rank == 0) {
    JobEnv listen_env = env;
    if (pmix != nullptr) listen_env.master_addr = spans_hosts ? HostName() : "127.0.0.1";
    absl::StatusOr<StoreListenAddress> where = StoreListenAddressOnThisHost(listen_env);
    if (!where.ok()) return prefixed(where.status());
    if (!where->note.empty()) {
      std::fprintf(stderr, "rendezvous store on rank 0: %s\n", where->note.c_str());
      std::fflush(stderr);
    }
    connect_host = where->connect_ip;
    StoreServerOptions options;
    options.bind_ip = where->bind_ip;
    options.port = env.master_port;  // 0 under PMIx: the kernel picks
    options.world_size = env.world_size;
    options.job_token = secret;
    options.join_timeout = timeout;
    options.hang_timeout = hang_detection.bound;
    absl::StatusOr<std::unique_ptr<StoreServer>> server = StoreServer::Start(options);
    if (!server.ok()) return prefixed(server.status());
    rendezvous->server_ = std::move(server).value();
    connect_port = rendezvous->server_->port();
    if (pmix != nullptr) {
      absl::StatusOr<std::string> published = PublishedStoreIpOnThisHost(*where, spans_hosts);
      if (!published.ok()) return prefixed(published.status());
      const std::string address = absl::StrCat(*published, ":", connect_port);
      absl::Status put = pmix->Publish(kPmixStoreKey, address);
      if (!put.ok()) return prefixed(put);
      if (env.token_source == JobTokenSource::kFromPmix) {
        // Rank 0 makes the job's secret; the engine's PMIx server hands it
        // only to the tasks it started.
        put = pmix->Publish(kPmixSecretKey, secret);
        if (!put.ok()) return prefixed(put);
      }
      // Once per job: where the store went, since no variable says so.
      std::fprintf(stderr, "rendezvous store on rank 0: listening on %s:%d, published as %s "
                   "through PMIx\n", where->bind_ip.c_str(), connect_port, address.c_str());
      std::fflush(stderr);
    }
  }
  if (pmix != nullptr) {
    FSDP_RETURN_IF_ERROR(pmix->Fence(deadline));
    if (env.rank != 0) {
      absl::StatusOr<std::string> address = pmix->Read(0, kPmixStoreKey, deadline);
      if (!address.ok()) return address.status();
      const size_t colon = address->rfind(':');
      if (colon == std::string::npos ||
          !absl::SimpleAtoi(address->substr(colon + 1), &connect_port) || connect_port <= 0 ||
          connect_port > 65535) {
        return absl::InternalError(absl::StrCat(me, ": rank 0 published '", *address,
                                                "' through PMIx as its store's address, not "
                                                "<ipv4>:<port>"));
      }
      connect_host = address->substr(0, colon);
      if (env.token_source == JobTokenSource::kFromPmix) {
        absl::StatusOr<std::string> published = pmix->Read(0, kPmixSecretKey, deadline);
        if (!published.ok()) return published.status();
        if (published->empty()) {
          return absl::InternalError(
              absl::StrCat(me, ": rank 0 published an empty job secret through PMIx"));
        }
        secret = *std::move(published);
      }
    }
    // Errors and the failure detector name the store by what was learned.
    rendezvous->env_.master_addr = connect_host;
    rendezvous->env_.master_port = connect_port;
  }
  const std::string store = absl::StrCat(connect_host, ":", connect_port);

  absl::StatusOr<int> fd = ConnectWithRetry(connect_host, connect_port, deadline);
  if (!fd.ok()) return prefixed(fd.status());
  rendezvous->socket_ = std::make_unique<FramedSocket>(*fd);
  rendezvous->socket_->set_max_frame_bytes(kMaxUnprovenFrameBytes);

  // The store's challenge (proto/rendezvous.proto, step 0).
  auto no_reply = [&](const absl::Status& status, const char* awaited) {
    if (absl::IsDataLoss(status)) {
      return absl::DataLossError(absl::StrCat(
          me, ": awaiting the ", awaited, " from the rendezvous store at ", store, ": ",
          status.message(), "; is MASTER_PORT some other service's port, or a process posing "
          "as the store?"));
    }
    if (absl::IsDeadlineExceeded(status)) {
      return absl::DeadlineExceededError(absl::StrCat(
          me, ": no ", awaited, " from the rendezvous store at ", store, " after ",
          absl::FormatDuration(absl::Now() - start),
          "; rank 0 gave no reason (some ranks did not arrive, or rank 0 started much "
          "later than this rank)"));
    }
    return absl::UnavailableError(absl::StrCat(
        me, ": the rendezvous store at ", store, " closed the connection before sending the ",
        awaited, "; did rank 0 die?"));
  };
  absl::StatusOr<std::string> frame = rendezvous->socket_->ReadFrame(deadline + kReasonGrace);
  if (!frame.ok()) return no_reply(frame.status(), "challenge");
  fsdp::proto::ServerMessage challenge;
  if (!challenge.ParseFromString(*frame)) {
    return absl::DataLossError(absl::StrCat(
        me, ": garbage from ", store, "; is MASTER_PORT some other service's port?"));
  }
  if (challenge.has_refused()) {
    return absl::PermissionDeniedError(absl::StrCat(
        me, ": refused by the rendezvous store at ", store, ": ", challenge.refused().reason()));
  }
  if (!challenge.has_challenge() || challenge.challenge().store_nonce().size() != kNonceBytes) {
    return absl::DataLossError(absl::StrCat(
        me, ": the rendezvous store at ", store, " did not open with a challenge; is "
        "MASTER_PORT some other service's port, or a store of another version of this "
        "program?"));
  }
  const std::string& store_nonce = challenge.challenge().store_nonce();
  absl::StatusOr<std::string> rank_nonce = RandomBytes(kNonceBytes);
  if (!rank_nonce.ok()) return prefixed(rank_nonce.status());

  fsdp::proto::JoinRequest join;
  join.set_rank(env.rank);
  join.set_world_size(env.world_size);
  join.set_blob(blob);
  join.set_host(HostName());
  join.set_rank_nonce(*rank_nonce);
  fsdp::proto::ClientMessage join_message;
  join_message.mutable_join()->set_body(join.SerializeAsString());
  join_message.mutable_join()->set_mac(
      JoinMac(secret, store_nonce, join_message.join().body()));
  rendezvous->channel_ = std::make_unique<SealedChannel>(
      SessionKey(secret, store_nonce, *rank_nonce), SealedChannel::Side::kRank);
  absl::Status sent = rendezvous->socket_->Write(join_message, deadline);
  if (!sent.ok()) {
    return absl::Status(sent.code(), absl::StrCat(me, ": sending the join request to ",
                                                  store, ": ", sent.message()));
  }

  // The store's welcome (its proof), then the roster or why there is none.
  auto not_proven = [&](const std::string& what) {
    return absl::UnauthenticatedError(absl::StrCat(
        me, ": the rendezvous store at ", store,
        " could not prove it knows this job's secret (", what,
        "): it is not this job's store (another process took MASTER_PORT first, or the "
        "address is wrong); this rank refused it, and its join gave it nothing from which "
        "to learn the secret. Check that MASTER_ADDR/MASTER_PORT name rank 0's store"));
  };
  fsdp::proto::ServerMessage reply;
  bool store_proved = false;
  while (true) {
    frame = rendezvous->socket_->ReadFrame(deadline + kReasonGrace);
    if (!frame.ok()) return no_reply(frame.status(), store_proved ? "roster" : "welcome");
    fsdp::proto::ServerMessage outer;
    if (!outer.ParseFromString(*frame)) {
      return absl::DataLossError(absl::StrCat(
          me, ": garbage from ", store, "; is MASTER_PORT some other service's port?"));
    }
    if (outer.has_refused()) {
      // Unsealed: a store whose secret differs cannot seal for this rank.
      return absl::PermissionDeniedError(absl::StrCat(
          me, ": refused by the rendezvous store at ", store, ": ", outer.refused().reason()));
    }
    if (!outer.has_sealed()) return not_proven("it sent an unsealed message");
    std::string body;
    if (!rendezvous->channel_->Open(outer.sealed(), &body) || !reply.ParseFromString(body)) {
      return not_proven("a message whose MAC does not verify");
    }
    if (!store_proved) rendezvous->socket_->set_max_frame_bytes(kMaxFrameBytes);
    store_proved = true;
    if (!reply.has_welcome()) break;
  }
  if (reply.has_refused()) {
    return absl::PermissionDeniedError(absl::StrCat(
        me, ": refused by the rendezvous store at ", store, ": ",
        reply.refused().reason()));
  }
  if (reply.has_aborted()) {
    return absl::AbortedError(absl::StrCat(me, ": rendezvous at ", store,
                                           " failed: ", reply.aborted().reason()));
  }
  if (!reply.has_roster() || reply.roster().blobs_size() != env.world_size ||
      reply.roster().hosts_size() != env.world_size) {
    return absl::DataLossError(absl::StrCat(me, ": unexpected reply from ", store));
  }
  rendezvous->blobs_.assign(reply.roster().blobs().begin(), reply.roster().blobs().end());
  rendezvous->hosts_.assign(reply.roster().hosts().begin(), reply.roster().hosts().end());
  if (reply.roster().hang_timeout_ms() > 0) {
    rendezvous->hang_timeout_ = absl::Milliseconds(reply.roster().hang_timeout_ms());
    rendezvous->liveness_ = hang_detection.liveness;
    rendezvous->StartHeartbeats();
  }
  return rendezvous;
}

void Rendezvous::StartHeartbeats() {
  const int64_t now = SteadyNanos(SteadyClock::now());
  store_heard_at_ns_.store(now);
  last_beat_at_ns_.store(now);
  heartbeat_ = std::make_unique<HeartbeatThread>(HeartbeatInterval(hang_timeout_),
                                                 [this] { Beat(); });
}

absl::Duration Rendezvous::poll_interval() const {
  return hang_timeout_ == absl::InfiniteDuration() ? absl::InfiniteDuration()
                                                   : HeartbeatInterval(hang_timeout_);
}

void Rendezvous::Beat() {
  const int64_t now = SteadyNanos(SteadyClock::now());
  if (absl::Nanoseconds(now - last_beat_at_ns_.load()) > hang_timeout_ / 2) {
    // This process did not run for half a bound (it was stopped, e.g. a
    // suspended job): the store's silence over that gap is not the store's.
    store_heard_at_ns_.store(now);
  }
  last_beat_at_ns_.store(now);
  fsdp::proto::ClientMessage message;
  fsdp::proto::Heartbeat* beat = message.mutable_heartbeat();
  beat->set_awaited_rank(-1);
  if (liveness_ != nullptr) {
    CallerLiveness::Snapshot snapshot = liveness_->Read();
    beat->set_idle_ms(absl::ToInt64Milliseconds(snapshot.idle));
    beat->set_pending_ms(absl::ToInt64Milliseconds(snapshot.pending));
    beat->set_awaited_rank(snapshot.awaited_rank);
    beat->set_awaited_what(snapshot.awaited_what);
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  if (socket_ == nullptr || socket_->fd() < 0) return;
  fsdp::proto::ClientMessage sealed;
  channel_->Seal(message, sealed.mutable_sealed());
  // A store that cannot take a few bytes within one interval is judged by
  // its own silence, on the reading side.
  (void)socket_->Write(sealed, absl::Now() + HeartbeatInterval(hang_timeout_));
}

void Rendezvous::CloseSocket() {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (socket_ != nullptr) socket_->Close();
}

int Rendezvous::failure_detector_fd() const {
  return socket_ != nullptr ? socket_->fd() : -1;
}

std::vector<PeerEvent> Rendezvous::PollPeerEvents() {
  std::vector<PeerEvent> events;
  if (socket_ == nullptr || socket_->fd() < 0) return events;
  std::vector<std::string> frames;
  absl::StatusOr<bool> open = socket_->ReadAvailable(&frames);
  const SteadyClock::time_point now = SteadyClock::now();
  for (const std::string& frame : frames) {
    fsdp::proto::ServerMessage outer, message;
    std::string body;
    if (!outer.ParseFromString(frame) || !outer.has_sealed() ||
        !channel_->Open(outer.sealed(), &body) || !message.ParseFromString(body)) {
      // Not from the store (it seals everything): refused, and said, so
      // that a forged "rank N died" or "rank N is hung" cannot end the job.
      std::fprintf(stderr,
                   "rank %d: refused a message on the connection to the rendezvous store at "
                   "%s that does not carry this job's MAC (forged, or corrupted); ignored\n",
                   env_.rank, store_address().c_str());
      std::fflush(stderr);
      continue;
    }
    // Only what the store sealed shows it alive.
    store_heard_at_ns_.store(SteadyNanos(now));
    if (!message.has_peer_gone()) continue;
    const fsdp::proto::PeerGone& gone = message.peer_gone();
    const int rank = gone.rank();
    if (rank < 0 || rank >= env_.world_size) continue;
    if (rank == 0 && gone.clean()) rank0_left_ = true;
    if (gone.hung()) {
      if (rank == env_.rank) self_declared_hung_ = true;
      events.push_back({rank, PeerEvent::Kind::kHung, gone.reason()});
    } else {
      events.push_back({rank, gone.clean() ? PeerEvent::Kind::kLeft : PeerEvent::Kind::kDied, ""});
    }
  }
  if (!open.ok() || !*open) {
    // The store is gone. After rank 0's goodbye that is expected; otherwise
    // rank 0's process died (and took the store with it).
    CloseSocket();
    if (!rank0_left_ && !left_) events.push_back({0, PeerEvent::Kind::kDied, ""});
    return events;
  }
  // Rank 0 does not judge its own store: it runs in this very process. Nor
  // does a rank whose heartbeat thread has not kept time (this process was
  // stopped; the thread restarts the store's clock when it runs again).
  const bool keeping_time =
      absl::Nanoseconds(SteadyNanos(now) - last_beat_at_ns_.load()) < hang_timeout_ / 2;
  if (hang_timeout_ != absl::InfiniteDuration() && env_.rank != 0 && !store_declared_hung_ &&
      !self_declared_hung_ && !rank0_left_ && !left_ && keeping_time) {
    const absl::Duration silent =
        absl::Nanoseconds(SteadyNanos(now) - store_heard_at_ns_.load());
    if (silent > hang_timeout_) {
      store_declared_hung_ = true;
      events.push_back(
          {0, PeerEvent::Kind::kHung,
           absl::StrCat("rank 0 is hung: no heartbeat from its rendezvous store reached rank ",
                        env_.rank, " for ", Tenths(silent), " (hang bound ",
                        Tenths(hang_timeout_),
                        "): rank 0's process is stopped (SIGSTOP, a debugger) or not being "
                        "scheduled, or its host is cut off")});
    }
  }
  return events;
}

void Rendezvous::Leave(absl::Duration linger) {
  if (left_) return;
  left_ = true;
  heartbeat_.reset();  // no beat after the goodbye
  // No session key yet (the peer never sent a challenge, or sent no frame):
  // nothing to seal a goodbye with, and whatever listens there is owed none.
  if (socket_ != nullptr && socket_->fd() >= 0 && channel_ != nullptr) {
    fsdp::proto::ClientMessage goodbye, sealed;
    goodbye.mutable_goodbye();
    channel_->Seal(goodbye, sealed.mutable_sealed());
    (void)socket_->Write(sealed, absl::Now() + absl::Seconds(1));
  }
  if (server_ != nullptr) {
    server_->WaitForOthersToLeave(linger);
    server_.reset();
  }
  CloseSocket();
}

Rendezvous::~Rendezvous() { Leave(); }

}  // namespace comm
