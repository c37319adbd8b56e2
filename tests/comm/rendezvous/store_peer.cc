// File: tests/comm/rendezvous/store_peer.cc
#include "tests/comm/rendezvous/store_peer.h"

#include "absl/strings/str_cat.h"
#include "comm/rendezvous/job_secret.h"

namespace comm::testing {

absl::StatusOr<std::unique_ptr<SealedChannel>> JoinAsRank(FramedSocket& socket,
                                                          const std::string& secret,
                                                          fsdp::proto::JoinRequest join,
                                                          absl::Time deadline) {
  absl::StatusOr<std::string> frame = socket.ReadFrame(deadline);
  if (!frame.ok()) return frame.status();
  fsdp::proto::ServerMessage challenge;
  if (!challenge.ParseFromString(*frame) || !challenge.has_challenge()) {
    return absl::DataLossError("the store did not open with a challenge");
  }
  absl::StatusOr<std::string> nonce = RandomBytes(kNonceBytes);
  if (!nonce.ok()) return nonce.status();
  join.set_rank_nonce(*nonce);
  fsdp::proto::ClientMessage message;
  message.mutable_join()->set_body(join.SerializeAsString());
  message.mutable_join()->set_mac(
      JoinMac(secret, challenge.challenge().store_nonce(), message.join().body()));
  absl::Status sent = socket.Write(message, deadline);
  if (!sent.ok()) return sent;
  return std::make_unique<SealedChannel>(
      SessionKey(secret, challenge.challenge().store_nonce(), *nonce),
      SealedChannel::Side::kRank);
}

absl::StatusOr<fsdp::proto::ServerMessage> ReadSealed(FramedSocket& socket,
                                                      SealedChannel& channel,
                                                      absl::Time deadline) {
  absl::StatusOr<std::string> frame = socket.ReadFrame(deadline);
  if (!frame.ok()) return frame.status();
  fsdp::proto::ServerMessage outer, inner;
  std::string body;
  if (!outer.ParseFromString(*frame) || !outer.has_sealed() ||
      !channel.Open(outer.sealed(), &body) || !inner.ParseFromString(body)) {
    return absl::DataLossError(absl::StrCat("not a sealed message of this channel: ",
                                            outer.ShortDebugString()));
  }
  return inner;
}

absl::StatusOr<ReceivedJoin> ChallengeAndReadJoin(FramedSocket& socket, absl::Time deadline) {
  ReceivedJoin received;
  absl::StatusOr<std::string> nonce = RandomBytes(kNonceBytes);
  if (!nonce.ok()) return nonce.status();
  received.store_nonce = *nonce;
  fsdp::proto::ServerMessage challenge;
  challenge.mutable_challenge()->set_store_nonce(received.store_nonce);
  absl::Status sent = socket.Write(challenge, deadline);
  if (!sent.ok()) return sent;
  absl::StatusOr<std::string> frame = socket.ReadFrame(deadline);
  if (!frame.ok()) return frame.status();
  received.frame = *frame;
  fsdp::proto::ClientMessage message;
  if (!message.ParseFromString(*frame) || !message.has_join() ||
      !received.request.ParseFromString(message.join().body())) {
    return absl::DataLossError("the rank did not answer with a join");
  }
  received.sealed = message.join();
  return received;
}

absl::Status WriteSealed(FramedSocket& socket, SealedChannel& channel,
                         const fsdp::proto::ServerMessage& message, absl::Time deadline) {
  fsdp::proto::ServerMessage outer;
  channel.Seal(message, outer.mutable_sealed());
  return socket.Write(outer, deadline);
}

}  // namespace comm::testing
