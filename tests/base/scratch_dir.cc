// File: tests/base/scratch_dir.cc
#include "tests/base/scratch_dir.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace base_test {

std::string FreshTestDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      absl::StrCat(root ? root : "/tmp", "/", info->test_suite_name(), ".", info->name());
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  return dir;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

FileSizeLimit::FileSizeLimit(rlim_t max_file_bytes) {
  if (::getrlimit(RLIMIT_FSIZE, &saved_) != 0) {
    restored_ = true;  // nothing to put back
    return;
  }
  old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved_;
  small.rlim_cur = max_file_bytes;
  ok_ = ::setrlimit(RLIMIT_FSIZE, &small) == 0;
}

bool FileSizeLimit::Restore() {
  if (restored_) return true;
  restored_ = true;
  const bool restored = ::setrlimit(RLIMIT_FSIZE, &saved_) == 0;
  std::signal(SIGXFSZ, old_handler_);
  return restored;
}

}  // namespace base_test
