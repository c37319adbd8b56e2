// File: fsdp/text/corpus.h
//
// The text a tokenizer trains on and a model learns: one file, or every
// regular file of a directory (not recursive, symbolic links skipped, sorted
// by name, fortune's "*.dat" index files skipped), concatenated in that order.
//
//   FSDP_ASSIGN_OR_RETURN(Corpus corpus, ReadCorpus("/usr/share/games/fortunes"));
#ifndef FSDP_TEXT_CORPUS_H_
#define FSDP_TEXT_CORPUS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fsdp {
namespace text {

struct Corpus {
  std::string text;
  std::vector<std::string> files;  // what was read, in order
};

// NotFound / PermissionDenied naming the path for a file or directory that
// cannot be read; InvalidArgument for a corpus with no bytes (an empty file,
// a directory without regular files), saying what was looked at.
absl::StatusOr<Corpus> ReadCorpus(const std::string& path);

}  // namespace text
}  // namespace fsdp

#endif  // FSDP_TEXT_CORPUS_H_
