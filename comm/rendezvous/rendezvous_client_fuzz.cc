// File: comm/rendezvous/rendezvous_client_fuzz.cc
//
// libFuzzer target for what a rank does with its store's messages once the
// store proved it knows the secret: the roster (Rendezvous::Join) and the
// peer-gone and hung reports (Rendezvous::PollPeerEvents). The fuzzer plays a
// store that knows the secret, on loopback: it sends a correct challenge,
// checks the rank's join and derives the session key as the store does, then
// sends the frames the input describes and closes the connection:
//
//   input = world-size byte, then records [kind][length][length bytes]
//     kind % 6 == 0  the bytes sealed as a ServerMessage body (any bytes)
//                 1  the bytes as a frame, unsealed (a forgery)
//                 2  a sealed Welcome
//                 3  a sealed Roster: world size (+/- one by the first byte)
//                    blobs cut from the bytes, hang bound from them
//                 4  a sealed PeerGone: rank, clean, hung, reason from the bytes
//                 5  a sealed Refused or Aborted with the bytes as reason
//
// Checked against a model of the protocol (proto/rendezvous.proto) computed
// here from the same records: Join's outcome (its status code, the roster it
// keeps), then every event PollPeerEvents returns until the connection's end:
// the sealed peer-gone reports with a rank in the job, in order, then rank 0
// dead unless it left. A rank may also judge rank 0 hung by itself when the
// roster set a short hang bound (timing): those events are allowed on top.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "comm/rendezvous/framed_socket.h"
#include "comm/rendezvous/fuzz_wire.h"
#include "comm/rendezvous/job_env.h"
#include "comm/rendezvous/rendezvous.h"
#include "comm/rendezvous/rendezvous_auth.h"
#include "proto/rendezvous.pb.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

constexpr char kSecret[] = "fuzz-job-secret";
constexpr int kRank = 1;

#define Check(condition) FUZZ_CHECK(condition)

// One listener for the whole run: a fresh port per input would churn
// through the ephemeral range.
int Listener(int* port) {
  static int fd = -1;
  static int listen_port = 0;
  if (fd < 0) {
    absl::StatusOr<int> listening = comm::ListenOnPort("127.0.0.1", 0);
    Check(listening.ok());
    fd = *listening;
    sockaddr_in address = {};
    socklen_t size = sizeof(address);
    Check(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    listen_port = ntohs(address.sin_port);
  }
  *port = listen_port;
  return fd;
}

void SendRaw(int fd, const std::string& bytes) { fuzz::SendRawFrame(fd, bytes); }

struct Record {
  int kind;
  std::string bytes;
};

// What the model expects of one frame, once sealed and opened by the rank.
struct Expected {
  bool sealed_by_store;        // opens (a forgery does not)
  fsdp::proto::ServerMessage message;  // its body, if it parses
  bool parses;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 16384) return 0;  // everything fits one socket buffer
  const int world_size = 2 + data[0] % 3;
  std::vector<Record> records;
  for (size_t at = 1; at + 2 <= size;) {
    const int kind = data[at] % 6;
    const size_t length = std::min<size_t>(data[at + 1], size - at - 2);
    records.push_back({kind, std::string(reinterpret_cast<const char*>(data) + at + 2, length)});
    at += 2 + length;
  }

  int port = 0;
  const int listen_fd = Listener(&port);
  comm::JobEnv env;
  env.rank = kRank;
  env.world_size = world_size;
  env.local_rank = kRank;
  env.local_world_size = world_size;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.job_token = kSecret;
  env.token_source = comm::JobTokenSource::kGiven;
  env.token_origin = "FSDP_JOB_TOKEN";
  env.source = "torchrun";

  absl::StatusOr<std::unique_ptr<comm::Rendezvous>> joined = absl::UnknownError("not run");
  std::thread rank([&] { joined = comm::Rendezvous::Join(env, "blob-of-rank-1", absl::Seconds(5)); });

  // The store's side: challenge, the rank's join, then the records.
  Check(comm::WaitForFd(listen_fd, POLLIN, absl::Now() + absl::Seconds(10)));
  const int fd = accept(listen_fd, nullptr, nullptr);
  Check(fd >= 0);
  const std::string store_nonce(comm::kNonceBytes, 's');
  fsdp::proto::ServerMessage challenge;
  challenge.mutable_challenge()->set_store_nonce(store_nonce);
  SendRaw(fd, challenge.SerializeAsString());
  std::string join_frame;
  {
    comm::FramedSocket reader(dup(fd));
    absl::StatusOr<std::string> frame = reader.ReadFrame(absl::Now() + absl::Seconds(10));
    Check(frame.ok());
    join_frame = *frame;
  }
  fsdp::proto::ClientMessage join_message;
  Check(join_message.ParseFromString(join_frame) && join_message.has_join());
  Check(comm::MacEquals(comm::JoinMac(kSecret, store_nonce, join_message.join().body()),
                        join_message.join().mac()));
  fsdp::proto::JoinRequest join;
  Check(join.ParseFromString(join_message.join().body()));
  Check(join.rank() == kRank && join.world_size() == world_size);
  comm::SealedChannel channel(comm::SessionKey(kSecret, store_nonce, join.rank_nonce()),
                              comm::SealedChannel::Side::kStore);

  std::vector<Expected> expected;
  for (const Record& record : records) {
    fsdp::proto::ServerMessage body;
    std::string raw;  // set for frames that are not a message we build
    bool seal = true;
    const uint8_t b0 = record.bytes.empty() ? 0 : static_cast<uint8_t>(record.bytes[0]);
    const uint8_t b1 = record.bytes.size() < 2 ? 0 : static_cast<uint8_t>(record.bytes[1]);
    switch (record.kind) {
      case 0: raw = record.bytes; break;
      case 1: raw = record.bytes; seal = false; break;
      case 2: body.mutable_welcome(); break;
      case 3: {
        fsdp::proto::Roster* roster = body.mutable_roster();
        const int blobs = world_size + (b0 % 3) - 1;
        for (int r = 0; r < blobs; ++r) {
          roster->add_blobs(record.bytes.substr(std::min(record.bytes.size(), size_t(r) * 4), 4));
        }
        const int hosts = world_size + (b0 % 5 == 4 ? 1 : 0);
        for (int r = 0; r < hosts; ++r) roster->add_hosts("host");
        int64_t hang_ms = 0;
        for (size_t i = 1; i < record.bytes.size() && i < 9; ++i) {
          hang_ms = static_cast<int64_t>((static_cast<uint64_t>(hang_ms) << 8) |
                                         static_cast<uint8_t>(record.bytes[i]));
        }
        roster->set_hang_timeout_ms(hang_ms);
        break;
      }
      case 4: {
        fsdp::proto::PeerGone* gone = body.mutable_peer_gone();
        gone->set_rank(static_cast<int8_t>(b0));
        gone->set_clean(b1 & 1);
        gone->set_hung(b1 & 2);
        gone->set_reason(record.bytes.size() > 2 ? record.bytes.substr(2) : "");
        break;
      }
      case 5:
        if (b0 & 1) {
          body.mutable_refused()->set_reason(record.bytes);
        } else {
          body.mutable_aborted()->set_reason(record.bytes);
        }
        break;
    }
    if (record.kind != 0 && record.kind != 1) raw = body.SerializeAsString();
    Expected e;
    e.sealed_by_store = seal;
    e.parses = e.message.ParseFromString(raw);
    if (seal) {
      // Sealed as they are: a body that does not parse is the store's
      // mistake, not a forgery, and must not crash the rank.
      fsdp::proto::ServerMessage outer;
      channel.SealBytes(raw, outer.mutable_sealed());
      SendRaw(fd, outer.SerializeAsString());
    } else {
      SendRaw(fd, raw);
    }
    expected.push_back(std::move(e));
  }
  shutdown(fd, SHUT_WR);  // the store is gone after the last record

  rank.join();

  // The model of Join: welcomes are skipped; the first other frame decides.
  enum class Outcome { kOk, kPermissionDenied, kUnauthenticated, kAborted, kDataLoss,
                       kUnavailable };
  Outcome outcome = Outcome::kUnavailable;
  size_t next = 0;
  int64_t hang_ms = 0;
  for (; next < expected.size(); ++next) {
    const Expected& e = expected[next];
    if (!e.sealed_by_store) {
      fsdp::proto::ServerMessage outer;
      if (!outer.ParseFromString(records[next].bytes)) { outcome = Outcome::kDataLoss; break; }
      if (outer.has_refused()) { outcome = Outcome::kPermissionDenied; break; }
      // A forged seal does not open (its MAC would have to be guessed).
      outcome = Outcome::kUnauthenticated;
      break;
    }
    if (!e.parses) { outcome = Outcome::kUnauthenticated; break; }
    if (e.message.has_welcome()) continue;
    const fsdp::proto::ServerMessage& m = e.message;
    if (m.has_refused()) outcome = Outcome::kPermissionDenied;
    else if (m.has_aborted()) outcome = Outcome::kAborted;
    else if (m.has_roster() && m.roster().blobs_size() == world_size &&
             m.roster().hosts_size() == world_size) {
      outcome = Outcome::kOk;
      hang_ms = m.roster().hang_timeout_ms();
    } else outcome = Outcome::kDataLoss;
    break;
  }
  switch (outcome) {
    case Outcome::kOk: Check(joined.ok()); break;
    case Outcome::kPermissionDenied: Check(absl::IsPermissionDenied(joined.status())); break;
    case Outcome::kUnauthenticated: Check(absl::IsUnauthenticated(joined.status())); break;
    case Outcome::kAborted: Check(absl::IsAborted(joined.status())); break;
    case Outcome::kDataLoss: Check(absl::IsDataLoss(joined.status())); break;
    case Outcome::kUnavailable: Check(absl::IsUnavailable(joined.status())); break;
  }
  if (!joined.ok()) {
    Check(absl::StartsWith(joined.status().message(), "rank 1: "));
    close(fd);
    return 0;
  }
  comm::Rendezvous& rendezvous = **joined;
  Check(rendezvous.blobs().size() == static_cast<size_t>(world_size));
  Check(rendezvous.hosts().size() == static_cast<size_t>(world_size));

  // The model of PollPeerEvents: the sealed reports after the roster.
  std::vector<comm::PeerEvent> want;
  bool rank0_left = false;
  for (++next; next < expected.size(); ++next) {
    const Expected& e = expected[next];
    if (!e.sealed_by_store || !e.parses || !e.message.has_peer_gone()) continue;
    const fsdp::proto::PeerGone& gone = e.message.peer_gone();
    if (gone.rank() < 0 || gone.rank() >= world_size) continue;
    if (gone.rank() == 0 && gone.clean()) rank0_left = true;
    if (gone.hung()) {
      want.push_back({gone.rank(), comm::PeerEvent::Kind::kHung, gone.reason()});
    } else {
      want.push_back({gone.rank(),
                      gone.clean() ? comm::PeerEvent::Kind::kLeft : comm::PeerEvent::Kind::kDied,
                      ""});
    }
  }
  if (!rank0_left) want.push_back({0, comm::PeerEvent::Kind::kDied, ""});

  std::vector<comm::PeerEvent> got;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (rendezvous.failure_detector_fd() >= 0) {
    Check(absl::Now() < deadline);  // the connection's end must be seen
    comm::WaitForFd(rendezvous.failure_detector_fd(), POLLIN, absl::Now() + absl::Milliseconds(20));
    for (comm::PeerEvent& event : rendezvous.PollPeerEvents()) {
      Check(event.rank >= 0 && event.rank < world_size);
      const bool self_judged = hang_ms > 0 && event.rank == 0 &&
                               event.kind == comm::PeerEvent::Kind::kHung &&
                               absl::StartsWith(event.reason, "rank 0 is hung: no heartbeat");
      if (!self_judged) got.push_back(std::move(event));
    }
  }
  Check(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Check(got[i].rank == want[i].rank && got[i].kind == want[i].kind &&
          got[i].reason == want[i].reason);
  }
  joined->reset();
  close(fd);
  return 0;
}
