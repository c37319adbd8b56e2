// File: tests/base/atomic_file_test.cc
//
// Publishing a file: the target is the new contents after success, and after
// any failure it is as it was and no temporary file is left in its
// directory. A full disk is simulated with RLIMIT_FSIZE
// (base_test::FileSizeLimit).
#include "base/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/posix_file.h"
#include "gtest/gtest.h"
#include "tests/base/scratch_dir.h"

namespace base {
namespace {

using base_test::ListDir;

std::string TestDir() { return base_test::FreshTestDir(); }

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

TEST(AtomicFileTest, ReplacesTheWholeFileAndLeavesNoTemporary) {
  const std::string dir = TestDir();
  const std::string path = dir + "/atomic.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "first version, longer").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(*ReadWholeFile(path), "second");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"atomic.txt"});
  const absl::Status missing = WriteFileAtomically(dir + "/no/such/dir/f.txt", "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing, "no/such/dir")) << missing;
  EXPECT_EQ(ReadWholeFile(dir + "/absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"atomic.txt"});
}

TEST(AtomicFileTest, StreamedWritesAppearOnlyWhenPublished) {
  const std::string dir = TestDir();
  const std::string path = dir + "/streamed.bin";
  absl::StatusOr<PendingFile> file = PendingFile::Create(path, "test file");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(file->Write("abc").ok());
  ASSERT_TRUE(file->Write(std::string(100000, 'x')).ok());
  // Not visible yet: only the temporary file, beside the target.
  EXPECT_EQ(ListDir(dir).size(), 1u);
  EXPECT_EQ(file->temp_path().rfind(path + ".tmp-", 0), 0u) << file->temp_path();
  EXPECT_EQ(ReadWholeFile(path).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(file->Publish().ok());
  EXPECT_EQ(*ReadWholeFile(path), "abc" + std::string(100000, 'x'));
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"streamed.bin"});
  // A second Publish or a late Write is a programming error, reported.
  EXPECT_EQ(file->Publish().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(file->Write("late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*ReadWholeFile(path), "abc" + std::string(100000, 'x'));
}

TEST(AtomicFileTest, AFileDroppedBeforePublishLeavesNothing) {
  const std::string dir = TestDir();
  {
    absl::StatusOr<PendingFile> file = PendingFile::Create(dir + "/dropped");
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE(file->Write("half").ok());
    // Moved into another owner: still one temporary file, removed once.
    PendingFile owner = std::move(*file);
    EXPECT_EQ(ListDir(dir).size(), 1u);
  }
  EXPECT_TRUE(ListDir(dir).empty());
  absl::StatusOr<PendingFile> discarded = PendingFile::Create(dir + "/discarded");
  ASSERT_TRUE(discarded.ok());
  discarded->Discard();
  EXPECT_TRUE(ListDir(dir).empty());
  EXPECT_FALSE(discarded->Publish().ok());
  EXPECT_TRUE(ListDir(dir).empty());
}

TEST(AtomicFileTest, AFailingWriteLeavesNoTemporaryAndNoTarget) {
  const std::string dir = TestDir();
  const std::string fresh = dir + "/fresh.bin";
  const std::string existing = dir + "/existing.bin";
  ASSERT_TRUE(WriteFileAtomically(existing, "previous contents").ok());

  base_test::FileSizeLimit limit(64 * 1024);
  ASSERT_TRUE(limit.ok());
  const std::string big(256 * 1024, 'z');
  const absl::Status fresh_status = WriteFileAtomically(fresh, big);
  const absl::Status existing_status = WriteFileAtomically(existing, big);
  // Streaming: the write that crosses the limit fails, mid-file.
  std::string temp_path;
  absl::Status streamed;
  {
    absl::StatusOr<PendingFile> file = PendingFile::Create(fresh, "stream");
    ASSERT_TRUE(file.ok());
    temp_path = file->temp_path();
    for (int i = 0; i < 10 && streamed.ok(); ++i) streamed = file->Write(big.substr(0, 10000));
    EXPECT_FALSE(streamed.ok());
    EXPECT_EQ(ListDir(dir), std::vector<std::string>{"existing.bin"});  // gone at once
    EXPECT_FALSE(file->Publish().ok());
  }
  ASSERT_TRUE(limit.Restore());

  for (const absl::Status& status : {fresh_status, existing_status, streamed}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;  // EFBIG
    EXPECT_TRUE(Contains(status, "File too large")) << status;
    EXPECT_TRUE(Contains(status, "temporary file")) << status;
  }
  EXPECT_TRUE(Contains(fresh_status, "cannot write file " + fresh)) << fresh_status;
  EXPECT_TRUE(Contains(existing_status, existing)) << existing_status;
  EXPECT_TRUE(Contains(streamed, "cannot write stream " + fresh)) << streamed;
  EXPECT_TRUE(Contains(streamed, temp_path)) << streamed;
  EXPECT_EQ(*ReadWholeFile(existing), "previous contents");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"existing.bin"});
}

TEST(AtomicFileTest, AFailedRenameLeavesTheTargetAndNoTemporary) {
  const std::string dir = TestDir();
  ASSERT_EQ(::mkdir((dir + "/taken").c_str(), 0755), 0);
  const absl::Status status = WriteFileAtomically(dir + "/taken", "x");
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(Contains(status, "cannot rename")) << status;
  EXPECT_TRUE(Contains(status, "onto " + dir + "/taken")) << status;
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"taken"});
  EXPECT_TRUE(ListDir(dir + "/taken").empty());
}

TEST(AtomicFileTest, CreateNamesWhatIsWrongWithThePath) {
  const std::string dir = TestDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/file", "").ok());
  const absl::Status not_a_dir = WriteFileAtomically(dir + "/file/x", "x");
  EXPECT_EQ(not_a_dir.code(), absl::StatusCode::kFailedPrecondition) << not_a_dir;
  EXPECT_TRUE(Contains(not_a_dir, "cannot create file " + dir + "/file/x")) << not_a_dir;
  EXPECT_TRUE(Contains(not_a_dir, "Not a directory")) << not_a_dir;
  for (const std::string& bad : {std::string(), dir + "/"}) {
    const absl::Status status = WriteFileAtomically(bad, "x");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(Contains(status, "must name a file")) << status;
  }
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"file"});
}

// The directory fsynced after the rename is the target's own: "." for a bare
// name, "/" for a file at the root, the prefix otherwise.
TEST(AtomicFileTest, TheDirectorySyncedIsTheTargets) {
  EXPECT_EQ(DirectoryOf("name"), ".");
  EXPECT_EQ(DirectoryOf("/name"), "/");
  EXPECT_EQ(DirectoryOf("a/b/name"), "a/b");
  EXPECT_EQ(DirectoryOf("/a/name"), "/a");

  const std::string dir = TestDir();
  EXPECT_TRUE(SyncDirectory(dir).ok());
  const absl::Status missing = SyncDirectory(dir + "/absent");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_TRUE(Contains(missing, "cannot open directory " + dir + "/absent")) << missing;
  ASSERT_TRUE(WriteFileAtomically(dir + "/plain", "").ok());
  EXPECT_FALSE(SyncDirectory(dir + "/plain").ok());  // a file is not a directory

  // A bare name publishes through the working directory.
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(dir.c_str()), 0);
  const absl::Status bare = WriteFileAtomically("bare.txt", "in the working directory");
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(bare.ok()) << bare;
  EXPECT_EQ(*ReadWholeFile(dir + "/bare.txt"), "in the working directory");
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"bare.txt", "plain"}));
}

}  // namespace
}  // namespace base
