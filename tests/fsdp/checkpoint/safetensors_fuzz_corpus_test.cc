// File: tests/fsdp/checkpoint/safetensors_fuzz_corpus_test.cc
//
// The fuzz test's seeds are what their names say: every valid_* file opens
// with SafetensorsReader, every invalid_* file is rejected. (A seed that
// silently turned valid would stop steering the fuzzer towards error paths.)
#include <dirent.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fsdp/checkpoint/safetensors.h"
#include "gtest/gtest.h"

namespace fsdp {
namespace checkpoint {
namespace {

TEST(SafetensorsFuzzCorpusTest, ValidSeedsOpenAndInvalidSeedsAreRejected) {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  ASSERT_NE(runfiles, nullptr) << "run under bazel test";
  const std::string dir =
      std::string(runfiles) + "/fsdp_cpp/fsdp/checkpoint/safetensors_header_fuzz_corpus";
  DIR* d = ::opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int valid = 0, invalid = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    auto reader = SafetensorsReader::Open(dir + "/" + name);
    if (absl::StartsWith(name, "valid_")) {
      EXPECT_TRUE(reader.ok()) << name << ": " << reader.status();
      ++valid;
    } else {
      ASSERT_TRUE(absl::StartsWith(name, "invalid_")) << name << ": name seeds valid_ or invalid_";
      EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument)
          << name << ": " << reader.status();
      ++invalid;
    }
  }
  ::closedir(d);
  EXPECT_GE(valid, 3);
  EXPECT_GE(invalid, 3);
}

}  // namespace
}  // namespace checkpoint
}  // namespace fsdp
