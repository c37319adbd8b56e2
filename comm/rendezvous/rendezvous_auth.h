// File: comm/rendezvous/rendezvous_auth.h
//
// The rendezvous's mutual challenge-response and message MACs (issue 39), with
// HMAC-SHA256 from OpenSSL's libcrypto. The job's secret
// (comm/rendezvous/job_secret.h) is the key; it never travels.
//
//   store -> rank   Challenge{store_nonce}                 (on connect)
//   rank -> store   join = Sealed{body = JoinRequest incl. rank_nonce,
//                         mac = JoinMac(secret, store_nonce, body)}
//   both sides      session key K = SessionKey(secret, store_nonce, rank_nonce)
//   store -> rank   Sealed{Welcome}, then every message sealed with K
//   rank -> store   every message after the join sealed with K
//
// The store accepts a join only with a MAC it recomputes from the secret and
// its own fresh nonce (a stranger without the secret cannot make one; a
// recorded join does not fit a new nonce). The rank trusts the store only once
// it opened the welcome: only who knows the secret can derive K from the
// rank's fresh nonce. A sealed message's MAC covers its direction and its
// sequence number on the connection, so a message cannot be reflected back,
// replayed or reordered. Comparisons are constant-time (CRYPTO_memcmp).
//
// Example (the store, on a join):
//   if (!MacEquals(JoinMac(secret, nonce, join.body()), join.mac())) refuse();
//   SealedChannel channel(SessionKey(secret, nonce, request.rank_nonce()),
//                         SealedChannel::Side::kStore);
#ifndef COMM_RENDEZVOUS_RENDEZVOUS_AUTH_H_
#define COMM_RENDEZVOUS_RENDEZVOUS_AUTH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/rendezvous.pb.h"

namespace comm {

// Bytes of each side's nonce (fresh per connection, from getrandom).
inline constexpr size_t kNonceBytes = 32;

// HMAC-SHA256(key, "fsdp-rendezvous join" NUL store_nonce body): the rank's
// proof that it knows the secret, bound to this connection's challenge.
std::string JoinMac(const std::string& secret, const std::string& store_nonce,
                    const std::string& join_body);

// HMAC-SHA256(secret, "fsdp-rendezvous session" NUL store_nonce rank_nonce):
// the key of one connection's sealed messages.
std::string SessionKey(const std::string& secret, const std::string& store_nonce,
                       const std::string& rank_nonce);

// Constant-time equality of two MACs (CRYPTO_memcmp); false if sizes differ.
bool MacEquals(const std::string& a, const std::string& b);

// One connection's sealed messages, for one side. Seal and Open each keep
// their own sequence number: the caller serializes its Seal calls, and its
// Open calls, per channel.
class SealedChannel {
 public:
  enum class Side { kStore, kRank };
  SealedChannel(std::string session_key, Side side)
      : key_(std::move(session_key)), side_(side) {}

  // `message` serialized into `sealed`, its MAC over this side's direction and
  // next sequence number.
  void Seal(const google::protobuf::MessageLite& message, fsdp::proto::Sealed* sealed);
  // The same for a body already serialized (the fuzz targets seal bytes that
  // need not parse, as a buggy peer that knows the secret might).
  void SealBytes(std::string body, fsdp::proto::Sealed* sealed);

  // The body of a message sealed by the other side, if its MAC verifies for
  // the next expected sequence number (which it then consumes); false
  // otherwise (forged, replayed or out of order), consuming nothing.
  bool Open(const fsdp::proto::Sealed& sealed, std::string* body);

 private:
  std::string key_;
  Side side_;
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
};

}  // namespace comm

#endif  // COMM_RENDEZVOUS_RENDEZVOUS_AUTH_H_
