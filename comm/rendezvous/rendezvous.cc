// File: comm/rendezvous/rendezvous.cc
#include "comm/rendezvous/rendezvous.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "comm/rendezvous/framed_socket.h"
#include "comm/rendezvous/store_server.h"
#include "comm/status_macros.h"
#include "proto/rendezvous.pb.h"

namespace comm {
namespace {

// After its own deadline a rank still listens this long for rank 0's
// explanation (rank 0's clock started at a slightly different moment).
constexpr absl::Duration kReasonGrace = absl::Seconds(2);

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Rendezvous>> Rendezvous::Join(const JobEnv& env,
                                                             const std::string& blob,
                                                             absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  const std::string me = absl::StrCat("rank ", env.rank);
  const std::string store =
      absl::StrCat(env.master_addr, ":", env.master_port);
  std::unique_ptr<Rendezvous> rendezvous(new Rendezvous());
  rendezvous->env_ = env;
  if (env.world_size == 1) {
    // Nobody to meet and nobody to watch: no store, no port.
    rendezvous->blobs_ = {blob};
    rendezvous->hosts_ = {HostName()};
    return rendezvous;
  }

  if (env.rank == 0) {
    StoreServerOptions options;
    options.port = env.master_port;
    options.world_size = env.world_size;
    options.job_token = env.job_token;
    options.join_timeout = timeout;
    absl::StatusOr<std::unique_ptr<StoreServer>> server = StoreServer::Start(options);
    if (!server.ok()) {
      return absl::Status(server.status().code(),
                          absl::StrCat(me, ": ", server.status().message()));
    }
    rendezvous->server_ = std::move(server).value();
  }

  // Rank 0 reaches its own store over loopback like everyone else, so the
  // failure detector treats all ranks alike.
  const std::string connect_host = env.rank == 0 ? "127.0.0.1" : env.master_addr;
  absl::StatusOr<int> fd = ConnectWithRetry(connect_host, env.master_port, deadline);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat(me, ": ", fd.status().message()));
  }
  rendezvous->socket_ = std::make_unique<FramedSocket>(*fd);

  fsdp::proto::ClientMessage join_message;
  fsdp::proto::JoinRequest* join = join_message.mutable_join();
  join->set_job_token(env.job_token);
  join->set_rank(env.rank);
  join->set_world_size(env.world_size);
  join->set_blob(blob);
  join->set_host(HostName());
  absl::Status sent = rendezvous->socket_->Write(join_message, deadline);
  if (!sent.ok()) {
    return absl::Status(sent.code(), absl::StrCat(me, ": sending the join request to ",
                                                  store, ": ", sent.message()));
  }

  absl::StatusOr<std::string> frame = rendezvous->socket_->ReadFrame(deadline + kReasonGrace);
  if (!frame.ok()) {
    if (absl::IsDeadlineExceeded(frame.status())) {
      return absl::DeadlineExceededError(absl::StrCat(
          me, ": no roster from the rendezvous store at ", store, " after ",
          absl::FormatDuration(absl::Now() - start),
          "; rank 0 gave no reason (some ranks did not arrive, or rank 0 started much "
          "later than this rank)"));
    }
    return absl::UnavailableError(absl::StrCat(
        me, ": the rendezvous store at ", store,
        " closed the connection before sending the roster; did rank 0 die?"));
  }
  fsdp::proto::ServerMessage reply;
  if (!reply.ParseFromString(*frame)) {
    return absl::DataLossError(absl::StrCat(
        me, ": garbage from ", store, "; is MASTER_PORT some other service's port?"));
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
  return rendezvous;
}

int Rendezvous::failure_detector_fd() const {
  return socket_ != nullptr ? socket_->fd() : -1;
}

std::vector<PeerEvent> Rendezvous::PollPeerEvents() {
  std::vector<PeerEvent> events;
  if (socket_ == nullptr || socket_->fd() < 0) return events;
  std::vector<std::string> frames;
  absl::StatusOr<bool> open = socket_->ReadAvailable(&frames);
  for (const std::string& frame : frames) {
    fsdp::proto::ServerMessage message;
    if (!message.ParseFromString(frame) || !message.has_peer_gone()) continue;
    const int rank = message.peer_gone().rank();
    if (rank < 0 || rank >= env_.world_size) continue;
    if (rank == 0 && message.peer_gone().clean()) rank0_left_ = true;
    events.push_back({rank, message.peer_gone().clean()});
  }
  if (!open.ok() || !*open) {
    // The store is gone. After rank 0's goodbye that is expected; otherwise
    // rank 0's process died (and took the store with it).
    socket_->Close();
    if (!rank0_left_ && !left_) events.push_back({0, false});
  }
  return events;
}

void Rendezvous::Leave(absl::Duration linger) {
  if (left_) return;
  left_ = true;
  if (socket_ != nullptr && socket_->fd() >= 0) {
    fsdp::proto::ClientMessage goodbye;
    goodbye.mutable_goodbye();
    (void)socket_->Write(goodbye, absl::Now() + absl::Seconds(1));
  }
  if (server_ != nullptr) {
    server_->WaitForOthersToLeave(linger);
    server_.reset();
  }
  if (socket_ != nullptr) socket_->Close();
}

Rendezvous::~Rendezvous() { Leave(); }

}  // namespace comm
