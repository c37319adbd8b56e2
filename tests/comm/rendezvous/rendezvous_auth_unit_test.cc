// File: tests/comm/rendezvous/rendezvous_auth_unit_test.cc
//
// The MACs of the rendezvous (comm/rendezvous/rendezvous_auth.h) without a
// network: HMAC-SHA256 of the label and parts against an independent
// implementation, and a sealed message opens only once, in order, on the
// other side, under the same key.
#include "comm/rendezvous/rendezvous_auth.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

TEST(RendezvousAuth, MacsAreHmacSha256OfTheLabelAndTheParts) {
  // Reference values from Python's hmac module (an independent
  // implementation): hmac.new(b"Jefe", b"fsdp-rendezvous session\0abcd",
  // hashlib.sha256), and the same with the join label.
  EXPECT_EQ(absl::BytesToHexString(SessionKey("Jefe", "ab", "cd")),
            "a069827afc1404466aa51c406b62559547f1ccb27ffdbd5eeb12f82d80964143");
  EXPECT_EQ(absl::BytesToHexString(JoinMac("Jefe", "ab", "cd")),
            "4743de6d98b0e34197f893d0f561dca2ad95a08f5f3617f31e413c9a18a55345");
  EXPECT_NE(SessionKey("Jefe", "ab", "cd"), SessionKey("Jeff", "ab", "cd"));
}

TEST(RendezvousAuth, MacEqualsIsExact) {
  const std::string mac = JoinMac("secret", "nonce", "body");
  EXPECT_TRUE(MacEquals(mac, JoinMac("secret", "nonce", "body")));
  std::string flipped = mac;
  flipped[31] ^= 1;
  EXPECT_FALSE(MacEquals(mac, flipped));
  EXPECT_FALSE(MacEquals(mac, mac.substr(0, 16)));
  EXPECT_FALSE(MacEquals("", ""));
}

fsdp::proto::ServerMessage PeerGone(int rank) {
  fsdp::proto::ServerMessage message;
  message.mutable_peer_gone()->set_rank(rank);
  return message;
}

TEST(RendezvousAuth, ASealedMessageOpensOnceInOrderOnTheOtherSide) {
  const std::string key = SessionKey("secret", "store nonce", "rank nonce");
  SealedChannel store(key, SealedChannel::Side::kStore);
  SealedChannel rank(key, SealedChannel::Side::kRank);
  fsdp::proto::Sealed first, second;
  store.Seal(PeerGone(1), &first);
  store.Seal(PeerGone(2), &second);
  std::string body;
  // Out of order: refused, and nothing consumed.
  EXPECT_FALSE(rank.Open(second, &body));
  ASSERT_TRUE(rank.Open(first, &body));
  fsdp::proto::ServerMessage opened;
  ASSERT_TRUE(opened.ParseFromString(body));
  EXPECT_EQ(opened.peer_gone().rank(), 1);
  // Replayed: refused.
  EXPECT_FALSE(rank.Open(first, &body));
  ASSERT_TRUE(rank.Open(second, &body));
  // Reflected back to its sender: refused (the direction is under the MAC).
  SealedChannel store_again(key, SealedChannel::Side::kStore);
  EXPECT_FALSE(store_again.Open(first, &body));
  // Another key, or a changed body: refused.
  SealedChannel stranger(SessionKey("guess", "store nonce", "rank nonce"),
                         SealedChannel::Side::kRank);
  EXPECT_FALSE(stranger.Open(first, &body));
  SealedChannel rank_again(key, SealedChannel::Side::kRank);
  fsdp::proto::Sealed changed = first;
  changed.set_body(PeerGone(0).SerializeAsString());
  EXPECT_FALSE(rank_again.Open(changed, &body));
  EXPECT_TRUE(rank_again.Open(first, &body));
}

}  // namespace
}  // namespace comm
