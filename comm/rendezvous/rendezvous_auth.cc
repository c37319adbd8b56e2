// File: comm/rendezvous/rendezvous_auth.cc
#include "comm/rendezvous/rendezvous_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/string_view.h"

namespace comm {
namespace {

// HMAC-SHA256(key, concatenation of `parts`).
std::string Hmac(const std::string& key, std::initializer_list<absl::string_view> parts) {
  std::string message;
  for (absl::string_view part : parts) message.append(part.data(), part.size());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
       &digest_size);
  return std::string(reinterpret_cast<const char*>(digest), digest_size);
}

// The label of one direction and one sequence number, MACed before a body.
std::string Header(SealedChannel::Side sender, uint64_t sequence) {
  std::string header = sender == SealedChannel::Side::kStore ? std::string("store->rank", 11)
                                                             : std::string("rank->store", 11);
  for (int byte = 0; byte < 8; ++byte) header.push_back(static_cast<char>(sequence >> (8 * byte)));
  return header;
}

constexpr absl::string_view kJoinLabel("fsdp-rendezvous join\0", 21);
constexpr absl::string_view kSessionLabel("fsdp-rendezvous session\0", 24);

}  // namespace

std::string JoinMac(const std::string& secret, const std::string& store_nonce,
                    const std::string& join_body) {
  return Hmac(secret, {kJoinLabel, store_nonce, join_body});
}

std::string SessionKey(const std::string& secret, const std::string& store_nonce,
                       const std::string& rank_nonce) {
  return Hmac(secret, {kSessionLabel, store_nonce, rank_nonce});
}

bool MacEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void SealedChannel::Seal(const google::protobuf::MessageLite& message,
                         fsdp::proto::Sealed* sealed) {
  SealBytes(message.SerializeAsString(), sealed);
}

void SealedChannel::SealBytes(std::string body, fsdp::proto::Sealed* sealed) {
  sealed->set_mac(Hmac(key_, {Header(side_, sent_++), body}));
  sealed->set_body(std::move(body));
}

bool SealedChannel::Open(const fsdp::proto::Sealed& sealed, std::string* body) {
  const Side sender = side_ == Side::kStore ? Side::kRank : Side::kStore;
  if (!MacEquals(Hmac(key_, {Header(sender, received_), sealed.body()}), sealed.mac())) {
    return false;
  }
  ++received_;
  *body = sealed.body();
  return true;
}

}  // namespace comm
