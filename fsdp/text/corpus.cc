// File: fsdp/text/corpus.cc
#include "fsdp/text/corpus.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fsdp {
namespace text {
namespace {

absl::Status ErrnoStatus(int error, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  return absl::InvalidArgumentError(message);
}

absl::Status AppendFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, absl::StrCat("cannot read corpus file ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return ErrnoStatus(errno, absl::StrCat("error reading corpus file ", path));
  out += contents.str();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Corpus> ReadCorpus(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot read --input=", path));
  }
  Corpus corpus;
  if (S_ISDIR(st.st_mode)) {
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return ErrnoStatus(errno, absl::StrCat("cannot list directory ", path));
    std::vector<std::string> names;
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name == "." || name == ".." || absl::EndsWith(name, ".dat")) continue;
      struct stat file_st;
      const std::string full = absl::StrCat(path, "/", name);
      if (lstat(full.c_str(), &file_st) == 0 && S_ISREG(file_st.st_mode)) names.push_back(name);
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) corpus.files.push_back(absl::StrCat(path, "/", name));
    if (corpus.files.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "directory ", path, " holds no regular files (symbolic links and *.dat are skipped); "
          "name a text file or a directory of text files"));
    }
  } else {
    corpus.files.push_back(path);
  }
  for (const std::string& file : corpus.files) {
    absl::Status read = AppendFile(file, corpus.text);
    if (!read.ok()) return read;
  }
  if (corpus.text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the corpus at ", path, " is empty (", corpus.files.size(),
        " file(s), 0 bytes); give it some text"));
  }
  return corpus;
}

}  // namespace text
}  // namespace fsdp
