// File: tests/base/scratch_dir.h
//
// Files for tests that check what a directory holds afterwards (no
// temporary file left behind, the target untouched).
//
//   const std::string dir = base_test::FreshTestDir();   // empty, per test
//   ... write into dir ...
//   EXPECT_EQ(base_test::ListDir(dir), std::vector<std::string>{"model.safetensors"});
#ifndef TESTS_BASE_SCRATCH_DIR_H_
#define TESTS_BASE_SCRATCH_DIR_H_

#include <sys/resource.h>

#include <csignal>
#include <string>
#include <vector>

namespace base_test {

// $TEST_TMPDIR/<suite>.<test>, removed and created empty.
std::string FreshTestDir();

// The names in `dir` (without "." and ".."), sorted; empty if it cannot be read.
std::vector<std::string> ListDir(const std::string& dir);

// A full disk, simulated: while one is alive, a write past `max_file_bytes`
// in any file fails with EFBIG (RLIMIT_FSIZE), as it fails with ENOSPC on a
// full file system; SIGXFSZ, which would kill the process, is ignored.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t max_file_bytes);
  ~FileSizeLimit() { Restore(); }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  bool ok() const { return ok_; }  // the limit is in force
  // Puts the old limit and SIGXFSZ handler back; false if that failed.
  bool Restore();

 private:
  struct rlimit saved_ = {};
  void (*old_handler_)(int) = SIG_DFL;
  bool ok_ = false;
  bool restored_ = false;
};

}  // namespace base_test

#endif  // TESTS_BASE_SCRATCH_DIR_H_
