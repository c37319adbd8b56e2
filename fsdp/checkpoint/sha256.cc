// File: fsdp/checkpoint/sha256.cc
#include "fsdp/checkpoint/sha256.h"

#include <openssl/evp.h>

#include "base/status_macros.h"

namespace fsdp {
namespace checkpoint {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  FSDP_CHECK(ctx_ != nullptr);
  FSDP_CHECK(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(const void* data, size_t num_bytes) {
  if (num_bytes > 0) FSDP_CHECK(EVP_DigestUpdate(ctx_, data, num_bytes) == 1);
}

std::string Sha256::Finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  FSDP_CHECK(EVP_DigestFinal_ex(ctx_, digest, &length) == 1);
  FSDP_CHECK(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string Sha256Of(absl::string_view bytes) {
  Sha256 hash;
  hash.Update(bytes.data(), bytes.size());
  return hash.Finish();
}

std::string Hex(absl::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 0xf]);
  }
  return hex;
}

}  // namespace checkpoint
}  // namespace fsdp
