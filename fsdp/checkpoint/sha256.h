// File: fsdp/checkpoint/sha256.h
//
// Incremental SHA-256 (OpenSSL's EVP), for the checksums of checkpoint
// files: feed bytes in any pieces, then take the 32-byte digest.
//
//   Sha256 hash;
//   hash.Update(data, n);
//   std::string digest = hash.Finish();  // 32 raw bytes; Hex(digest) for people
#ifndef FSDP_CHECKPOINT_SHA256_H_
#define FSDP_CHECKPOINT_SHA256_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"

struct evp_md_ctx_st;

namespace fsdp {
namespace checkpoint {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t num_bytes);
  // The digest of everything fed since construction or the last Finish; the
  // hash starts over afterwards.
  std::string Finish();

 private:
  evp_md_ctx_st* ctx_;
};

// The digest of `bytes` in one call.
std::string Sha256Of(absl::string_view bytes);
// Lowercase hex of raw bytes.
std::string Hex(absl::string_view bytes);

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_SHA256_H_
