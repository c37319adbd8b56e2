// File: tests/comm/rendezvous/store_peer.h
//
// Test helper: either side of the rendezvous's challenge-response
// (comm/rendezvous/rendezvous_auth.h) over a raw FramedSocket, so that a test
// can play a rank against the real store, or a store (real or fake) against
// a real rank process.
#ifndef TESTS_COMM_RENDEZVOUS_STORE_PEER_H_
#define TESTS_COMM_RENDEZVOUS_STORE_PEER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/rendezvous/framed_socket.h"
#include "comm/rendezvous/rendezvous_auth.h"
#include "proto/rendezvous.pb.h"

namespace comm::testing {

// A rank's side: reads the store's challenge, sends `join` (a fresh nonce
// added) with its MAC under `secret`; returns the connection's channel.
absl::StatusOr<std::unique_ptr<SealedChannel>> JoinAsRank(FramedSocket& socket,
                                                          const std::string& secret,
                                                          fsdp::proto::JoinRequest join,
                                                          absl::Time deadline);

// The store's next message, opened with `channel`; kDataLoss if it is not
// sealed or its MAC does not verify.
absl::StatusOr<fsdp::proto::ServerMessage> ReadSealed(FramedSocket& socket,
                                                      SealedChannel& channel,
                                                      absl::Time deadline);

// A store's side: what a rank sent after the challenge.
struct ReceivedJoin {
  std::string store_nonce;
  std::string frame;            // the join's bytes as they travelled
  fsdp::proto::Sealed sealed;   // its body and MAC
  fsdp::proto::JoinRequest request;
};

// Sends a challenge with a fresh nonce and reads the rank's join.
absl::StatusOr<ReceivedJoin> ChallengeAndReadJoin(FramedSocket& socket, absl::Time deadline);

// Writes `message` sealed with `channel`.
absl::Status WriteSealed(FramedSocket& socket, SealedChannel& channel,
                         const fsdp::proto::ServerMessage& message, absl::Time deadline);

}  // namespace comm::testing

#endif  // TESTS_COMM_RENDEZVOUS_STORE_PEER_H_
