// File: tests/fsdp/run/param_digest_test.cc
#include "fsdp/run/param_digest.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace fsdp {
namespace {

constexpr int kSha256Bytes = 32;

std::string Hex(const unsigned char* digest) {
  std::string out;
  char buf[3];
  for (int i = 0; i < kSha256Bytes; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", digest[i]);
    out += buf;
  }
  return out;
}

// The reference: OpenSSL's one-shot digest of a byte array built by hand.
std::string Sha256Hex(const unsigned char* bytes, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes, size, digest, &length, EVP_sha256(), nullptr);
  return Hex(digest);
}

TEST(ParamDigestTest, EmptyIsTheSha256OfNothing) {
  // FIPS 180-2 test vector for the empty message.
  EXPECT_EQ(ParamSha256Hex({}),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ParamDigestTest, IsTheDigestOfLittleEndianBytesAcrossUnits) {
  // 1.0f = 0x3f800000 -> bytes 00 00 80 3f; -2.0f = 0xc0000000 -> 00 00 00 c0.
  const unsigned char bytes[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,
                                 0x00, 0x00, 0x80, 0x3f};
  const std::string expected = Sha256Hex(bytes, sizeof(bytes));
  std::vector<float> unit0 = {1.0f, -2.0f};
  std::vector<float> unit1 = {1.0f};
  EXPECT_EQ(ParamSha256Hex({absl::MakeConstSpan(unit0), absl::MakeConstSpan(unit1)}),
            expected);
  // Order matters; the unit boundary does not.
  std::vector<float> joined = {1.0f, -2.0f, 1.0f};
  EXPECT_EQ(ParamSha256Hex({absl::MakeConstSpan(joined)}), expected);
  EXPECT_NE(ParamSha256Hex({absl::MakeConstSpan(unit1), absl::MakeConstSpan(unit0)}),
            expected);
}

TEST(ParamDigestTest, LongerThanOneChunk) {
  std::vector<float> values(10000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  std::vector<unsigned char> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());  // x86 is little-endian
  const std::string expected = Sha256Hex(bytes.data(), bytes.size());
  EXPECT_EQ(ParamSha256Hex({absl::MakeConstSpan(values)}), expected);
}

}  // namespace
}  // namespace fsdp
