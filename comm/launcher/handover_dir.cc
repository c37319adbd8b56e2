// File: comm/launcher/handover_dir.cc
#include "comm/launcher/handover_dir.h"

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace comm {
namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  remove(path);
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HandoverDir>> HandoverDir::Create() {
  struct stat st;
  std::string parent = "/dev/shm";
  if (stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(parent.c_str(), W_OK) != 0) {
    const char* tmp = std::getenv("TMPDIR");
    parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string templ = absl::StrCat(parent, "/fsdp-handover-XXXXXX");
  std::vector<char> buffer(templ.begin(), templ.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create the handover directory ", templ, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<HandoverDir>(new HandoverDir(buffer.data()));
}

HandoverDir::~HandoverDir() { nftw(path_.c_str(), &RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

}  // namespace comm
