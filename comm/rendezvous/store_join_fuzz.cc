// File: comm/rendezvous/store_join_fuzz.cc
//
// libFuzzer target for the rendezvous store's join state machine and what it
// reads behind the sealed channel (store_server.h): a real StoreServer on
// loopback, and clients that know the job's secret, so that their joins pass
// the MAC check and their later messages are sealed. The input is a script:
//
//   first byte: world size 1 + b % 4; b & 0x10: a hang bound (heartbeats,
//               roster's hang_timeout_ms); b & 0x20: pending-connection caps
//               of 3 (the over-capacity path)
//   then records [op][client][length][length bytes], op % 7:
//     0  connect a new client (at most 8) and read its challenge (once the
//        roster is out the store no longer listens: the kernel refuses)
//     1  join: rank and world size from the bytes (in range or not), a blob;
//        flags pick a wrong MAC, a short nonce, or the raw bytes as the
//        JoinRequest body under a valid MAC. Waits for the store's answer.
//     2  the bytes sealed as a ClientMessage body (any bytes)
//     3  a sealed heartbeat with fields from the bytes
//     4  a sealed goodbye
//     5  the bytes as a frame, unsealed (forged, or before any join)
//     6  close the client (reset or orderly)
//
// Then the store is stopped and every client reads what it was sent. Checked:
// the store never crashes or hangs; every sealed message a client gets opens
// with its session key, in sequence; a client gets at most one roster or
// abort, never both; a roster has world-size blobs and hosts, and the blob of
// every rank the store accepted is the one that rank sent; a roster goes out
// only when world-size distinct ranks were accepted; peer-gone reports name
// ranks of the job.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "comm/rendezvous/framed_socket.h"
#include "comm/rendezvous/fuzz_wire.h"
#include "comm/rendezvous/rendezvous_auth.h"
#include "comm/rendezvous/store_server.h"
#include "proto/rendezvous.pb.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

constexpr char kSecret[] = "fuzz-job-secret";
constexpr int kMaxClients = 8;

#define Check(condition) FUZZ_CHECK(condition)

struct Client {
  std::unique_ptr<comm::FramedSocket> socket;
  std::string store_nonce;
  std::unique_ptr<comm::SealedChannel> channel;  // once welcomed
  std::string sent_blob;
  int sent_rank = -1;
  bool closed = false;
  // What it received that it could open, in order.
  std::vector<fsdp::proto::ServerMessage> received;
};

void SendRaw(int fd, const std::string& bytes) { fuzz::SendRawFrame(fd, bytes); }

// A connection to the store, or -1 if the kernel refused it (nobody listens
// any more, or the listener closed during the handshake). Non-blocking, so
// that libFuzzer's timer signals do not cut the connect short.
int ConnectOnce(int port, absl::Time deadline) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  Check(fd >= 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int error = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      Check(comm::WaitForFd(fd, POLLOUT, deadline));
      socklen_t size = sizeof(error);
      Check(getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0);
    }
  }
  if (error == 0) return fd;
  close(fd);
  if (error != ECONNREFUSED && error != ECONNRESET) {
    std::fprintf(stderr, "connect: %s\n", strerror(error));
    Check(false);
  }
  return -1;
}

// Reads one frame and, if sealed, opens it (it must open); false at the end
// of the connection, or at `deadline` when `may_time_out` (else reaching it
// fails the check: the store never stalls).
bool Receive(Client& client, absl::Time deadline, bool may_time_out = false) {
  absl::StatusOr<std::string> frame = client.socket->ReadFrame(deadline);
  if (!frame.ok()) {
    Check(may_time_out || !absl::IsDeadlineExceeded(frame.status()));
    return false;
  }
  fsdp::proto::ServerMessage outer;
  Check(outer.ParseFromString(*frame));
  if (!outer.has_sealed()) {
    // Only a challenge or a refusal travel unsealed.
    Check(outer.has_challenge() || outer.has_refused());
    client.received.push_back(outer);
    return true;
  }
  Check(client.channel != nullptr);
  std::string body;
  Check(client.channel->Open(outer.sealed(), &body));
  fsdp::proto::ServerMessage message;
  Check(message.ParseFromString(body));
  client.received.push_back(message);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 8192) return 0;
  comm::StoreServerOptions options;
  options.port = 0;
  options.world_size = 1 + data[0] % 4;
  options.job_token = kSecret;
  options.join_timeout = absl::Seconds(30);
  options.first_message_timeout = absl::Seconds(30);
  if (data[0] & 0x10) options.hang_timeout = absl::Seconds(30);
  if (data[0] & 0x20) {
    options.max_pending_connections = 3;
    options.max_pending_per_address = 3;
  }
  absl::StatusOr<std::unique_ptr<comm::StoreServer>> server = comm::StoreServer::Start(options);
  Check(server.ok());
  const int world_size = options.world_size;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);

  std::vector<Client> clients;
  clients.reserve(kMaxClients);
  for (size_t at = 1; at + 3 <= size;) {
    const int op = data[at] % 7;
    const size_t which = data[at + 1];
    const size_t length = std::min<size_t>(data[at + 2], size - at - 3);
    const std::string bytes(reinterpret_cast<const char*>(data) + at + 3, length);
    at += 3 + length;
    const uint8_t b0 = bytes.empty() ? 0 : static_cast<uint8_t>(bytes[0]);
    const uint8_t b1 = bytes.size() < 2 ? 0 : static_cast<uint8_t>(bytes[1]);

    if (op == 0) {
      if (clients.size() >= kMaxClients) continue;
      // One attempt: once the roster is out nobody listens (the kernel refuses).
      const int fd = ConnectOnce((*server)->port(), deadline);
      if (fd < 0) continue;
      Client client;
      client.socket = std::make_unique<comm::FramedSocket>(fd);
      // A connection that raced the roster (the store closed its listener
      // while the handshake was in flight) can be established on this side
      // with nothing on the other: no challenge and no reset ever come. So
      // the challenge gets a bound of its own, well inside libFuzzer's
      // per-input limit; a store that is merely slow only costs coverage
      // (the client is treated as refused and skipped from then on).
      const absl::Time challenge_deadline = std::min(deadline, absl::Now() + absl::Seconds(4));
      if (Receive(client, challenge_deadline, /*may_time_out=*/true) &&
          client.received.back().has_challenge()) {
        client.store_nonce = client.received.back().challenge().store_nonce();
        Check(client.store_nonce.size() == comm::kNonceBytes);
      } else {
        client.closed = true;  // over capacity (refused and closed), or the raced connection
      }
      clients.push_back(std::move(client));
      continue;
    }
    if (clients.empty()) continue;
    Client& client = clients[which % clients.size()];
    if (client.closed) continue;
    const int fd = client.socket->fd();

    switch (op) {
      case 1: {
        if (client.sent_rank >= 0 || client.channel != nullptr) break;
        fsdp::proto::JoinRequest join;
        join.set_rank(static_cast<int8_t>(b0) % 8);
        join.set_world_size((b1 & 0x0c) == 0x0c ? (b1 >> 4) : world_size);
        join.set_blob(bytes.size() > 2 ? bytes.substr(2) : "");
        join.set_host("fuzz-host");
        const std::string rank_nonce((b1 & 0x02) ? 7 : comm::kNonceBytes, 'r');
        join.set_rank_nonce(rank_nonce);
        std::string body = join.SerializeAsString();
        if (b1 & 0x10 && (b1 & 0x0c) != 0x0c) body = bytes;  // any bytes, MACed
        fsdp::proto::ClientMessage message;
        message.mutable_join()->set_body(body);
        message.mutable_join()->set_mac(
            (b1 & 0x01) ? std::string(32, 'x') : comm::JoinMac(kSecret, client.store_nonce, body));
        SendRaw(fd, message.SerializeAsString());
        fsdp::proto::JoinRequest sent;
        const bool valid = !(b1 & 0x01) && sent.ParseFromString(body) &&
                           sent.rank_nonce().size() == comm::kNonceBytes;
        if (valid) {
          client.channel = std::make_unique<comm::SealedChannel>(
              comm::SessionKey(kSecret, client.store_nonce, sent.rank_nonce()),
              comm::SealedChannel::Side::kRank);
          client.sent_rank = sent.rank();
          client.sent_blob = sent.blob();
        }
        // The store's answer: a welcome, a refusal, or the connection's end.
        if (!Receive(client, deadline)) {
          client.closed = true;
          break;
        }
        const fsdp::proto::ServerMessage& answer = client.received.back();
        Check(valid ? answer.has_welcome() : answer.has_refused());
        if (!valid) client.closed = true;
        break;
      }
      case 2:
      case 3:
      case 4: {
        if (client.channel == nullptr) break;
        fsdp::proto::ClientMessage outer;
        if (op == 2) {
          client.channel->SealBytes(bytes, outer.mutable_sealed());
        } else {
          fsdp::proto::ClientMessage inner;
          if (op == 3) {
            fsdp::proto::Heartbeat* beat = inner.mutable_heartbeat();
            beat->set_idle_ms(static_cast<int8_t>(b0) * 1000);
            beat->set_pending_ms(static_cast<int8_t>(b1) * 1000);
            beat->set_awaited_rank(static_cast<int8_t>(b0 ^ b1));
            // Text, as a rank sends it (comm/liveness.h).
            beat->set_awaited_what(absl::CHexEscape(bytes));
          } else {
            inner.mutable_goodbye();
          }
          client.channel->Seal(inner, outer.mutable_sealed());
        }
        SendRaw(fd, outer.SerializeAsString());
        break;
      }
      case 5:
        SendRaw(fd, bytes);
        break;
      case 6:
        if (b0 & 1) {
          linger reset = {1, 0};
          setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
        }
        client.socket->Close();
        client.closed = true;
        break;
    }
  }

  // The store goes; every client then reads to the end of its connection.
  server->reset();
  for (Client& client : clients) {
    if (client.closed) continue;
    while (Receive(client, deadline)) {
    }
  }

  // Per client: at most one roster or abort; rosters of the right shape.
  bool any_roster = false;
  for (const Client& client : clients) {
    int rosters = 0, aborts = 0;
    for (const fsdp::proto::ServerMessage& m : client.received) {
      if (m.has_aborted()) ++aborts;
      if (m.has_roster()) {
        ++rosters;
        Check(m.roster().blobs_size() == world_size && m.roster().hosts_size() == world_size);
      }
      if (m.has_peer_gone()) {
        Check(m.peer_gone().rank() >= 0 && m.peer_gone().rank() < world_size);
      }
    }
    Check(rosters <= 1 && aborts <= 1 && rosters + aborts <= 1);
    any_roster |= rosters == 1;
  }
  if (!any_roster) return 0;
  // Once a roster went out nobody was aborted, and the ranks the store
  // accepted are the welcomed clients it did not refuse next. Of those whose
  // connection was read to its end (the script did not close them), no two
  // share a rank, and each one's blob is in every roster at its rank.
  std::map<int, const Client*> accepted;
  for (const Client& client : clients) {
    bool welcomed = false, refused = false;
    for (const fsdp::proto::ServerMessage& m : client.received) {
      Check(!m.has_aborted());
      if (m.has_welcome()) welcomed = true;
      if (m.has_refused() && welcomed) refused = true;
    }
    if (!welcomed || refused || client.closed) continue;
    Check(client.sent_rank >= 0 && client.sent_rank < world_size);
    Check(accepted.emplace(client.sent_rank, &client).second);
  }
  for (const Client& client : clients) {
    for (const fsdp::proto::ServerMessage& m : client.received) {
      if (!m.has_roster()) continue;
      for (const auto& [rank, joined] : accepted) {
        Check(m.roster().blobs(rank) == joined->sent_blob);
      }
    }
  }
  return 0;
}
