// File: tests/fsdp/checkpoint/manifest_file_test.cc
//
// The manifest file's header and ValidateManifest, table-driven: a valid
// two-rank manifest round-trips, and each corruption is refused with a
// message naming it.
#include "fsdp/checkpoint/manifest_file.h"

#include <functional>
#include <string>

#include "absl/strings/match.h"
#include "fsdp/checkpoint/sha256.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace checkpoint {
namespace {

// Two tensors of 6 and 4 elements; two files, each holding half of param
// and exp_avg.
proto::CheckpointManifest ValidManifest() {
  proto::CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_step(10);
  m.set_model_numel(10);
  proto::TensorEntry* a = m.add_tensors();
  a->set_name("a");
  a->add_shape(2);
  a->add_shape(3);
  a->set_model_offset(0);
  a->set_numel(6);
  proto::TensorEntry* b = m.add_tensors();
  b->set_name("b");
  b->add_shape(4);
  b->set_model_offset(6);
  b->set_numel(4);
  m.mutable_optimizer()->set_kind("adamw");
  m.mutable_optimizer()->add_state_names("exp_avg");
  for (int rank = 0; rank < 2; ++rank) {
    proto::ShardFile* f = m.add_files();
    f->set_name(rank == 0 ? "rank-00000.bin" : "rank-00001.bin");
    f->set_rank(rank);
    f->set_size_bytes(40);
    f->set_chunk_bytes(16);
    for (int c = 0; c < 3; ++c) f->add_chunk_sha256(std::string(32, 'x'));
    int64_t offset = 0;
    for (const char* state : {"param", "exp_avg"}) {
      proto::Extent* e = f->add_extents();
      e->set_state(state);
      e->set_model_offset(rank * 5);
      e->set_numel(5);
      e->set_file_offset_bytes(offset);
      offset += 20;
    }
  }
  return m;
}

TEST(ManifestFile, ValidManifestRoundTrips) {
  const proto::CheckpointManifest m = ValidManifest();
  ASSERT_TRUE(ValidateManifest(m).ok()) << ValidateManifest(m);
  absl::StatusOr<proto::CheckpointManifest> decoded =
      DecodeManifestFile(EncodeManifestFile(m), "m.pb");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->SerializeAsString(), m.SerializeAsString());
}

TEST(ManifestFile, DamagedBytesAreDataLossNamingTheFile) {
  const std::string good = EncodeManifestFile(ValidManifest());
  const struct {
    const char* name;
    std::string bytes;
    const char* expected;
  } cases[] = {
      {"empty", "", "not a checkpoint manifest"},
      {"wrong magic", "XSDPCKPT" + good.substr(8), "not a checkpoint manifest"},
      {"truncated", good.substr(0, good.size() - 3), "truncated or damaged"},
      {"flipped payload byte",
       good.substr(0, good.size() - 1) + static_cast<char>(good.back() ^ 1), "SHA-256"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<proto::CheckpointManifest> decoded = DecodeManifestFile(c.bytes, "DIR/m.pb");
    ASSERT_FALSE(decoded.ok()) << c.name;
    EXPECT_TRUE(absl::IsDataLoss(decoded.status())) << c.name << ": " << decoded.status();
    EXPECT_TRUE(absl::StrContains(decoded.status().message(), "DIR/m.pb")) << c.name;
    EXPECT_TRUE(absl::StrContains(decoded.status().message(), c.expected))
        << c.name << ": " << decoded.status();
  }
}

TEST(ManifestFile, AnotherFormatVersionIsRefused) {
  proto::CheckpointManifest m = ValidManifest();
  m.set_format_version(kCheckpointFormatVersion + 1);
  absl::StatusOr<proto::CheckpointManifest> decoded =
      DecodeManifestFile(EncodeManifestFile(m), "m.pb");
  EXPECT_TRUE(absl::IsFailedPrecondition(decoded.status())) << decoded.status();
  EXPECT_TRUE(absl::StrContains(decoded.status().message(), "format version"));
}

TEST(ValidateManifest, EachInconsistencyIsNamed) {
  const struct {
    const char* name;
    std::function<void(proto::CheckpointManifest&)> corrupt;
    const char* expected;
  } cases[] = {
      {"shape and numel disagree", [](auto& m) { m.mutable_tensors(0)->set_numel(5); },
       "its shape holds"},
      {"tensor gap", [](auto& m) { m.mutable_tensors(1)->set_model_offset(7); },
       "starts at 7"},
      {"duplicate tensor", [](auto& m) { m.mutable_tensors(1)->set_name("a"); }, "twice"},
      {"negative dim", [](auto& m) { m.mutable_tensors(0)->set_shape(0, -2); }, "negative"},
      {"path in file name", [](auto& m) { m.mutable_files(0)->set_name("../x"); },
       "not a plain file name"},
      {"chunk digests miscounted", [](auto& m) { m.mutable_files(0)->add_chunk_sha256("y"); },
       "chunk digests"},
      {"unknown state", [](auto& m) { m.mutable_files(0)->mutable_extents(1)->set_state("v"); },
       "unknown state"},
      {"extent outside the model",
       [](auto& m) { m.mutable_files(1)->mutable_extents(0)->set_model_offset(8); },
       "outside the model"},
      {"extents not back to back",
       [](auto& m) { m.mutable_files(0)->mutable_extents(1)->set_file_offset_bytes(24); },
       "back to back"},
      {"file size disagrees", [](auto& m) { m.mutable_files(0)->set_size_bytes(44); },
       "extents hold"},
      {"elements stored twice",
       [](auto& m) { m.mutable_files(1)->mutable_extents(0)->set_model_offset(4); },
       "stored twice"},
      {"plan fingerprint", [](auto& m) { m.set_plan_fingerprint(7); }, "fingerprint"},
  };
  for (const auto& c : cases) {
    proto::CheckpointManifest m = ValidManifest();
    c.corrupt(m);
    const absl::Status status = ValidateManifest(m);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << c.name << ": " << status;
    EXPECT_TRUE(absl::StrContains(status.message(), c.expected)) << c.name << ": " << status;
  }
}

}  // namespace
}  // namespace checkpoint
}  // namespace fsdp
