// File: fsdp/run/param_digest.cc
#include "fsdp/run/param_digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "base/status_macros.h"

namespace fsdp {

ParamDigest::ParamDigest() : ctx_(EVP_MD_CTX_new()) {
  FSDP_CHECK(ctx_ != nullptr);
  FSDP_CHECK(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1);
}

ParamDigest::~ParamDigest() { EVP_MD_CTX_free(ctx_); }

void ParamDigest::Update(absl::Span<const float> params) {
  // Serialize in chunks so the digest is of little-endian bytes on any host.
  constexpr size_t kChunkFloats = 4096;
  unsigned char bytes[kChunkFloats * 4];
  for (size_t begin = 0; begin < params.size(); begin += kChunkFloats) {
    const size_t count = std::min(kChunkFloats, params.size() - begin);
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &params[begin + i], sizeof(bits));
      for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<unsigned char>(bits >> (8 * b));
    }
    FSDP_CHECK(EVP_DigestUpdate(ctx_, bytes, 4 * count) == 1);
  }
}

std::string ParamDigest::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  FSDP_CHECK(EVP_DigestFinal_ex(ctx_, digest, &digest_len) == 1);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest_len);
  for (unsigned int i = 0; i < digest_len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

std::string ParamSha256Hex(const std::vector<absl::Span<const float>>& units_in_order) {
  ParamDigest digest;
  for (absl::Span<const float> unit : units_in_order) digest.Update(unit);
  return digest.HexDigest();
}

}  // namespace fsdp
