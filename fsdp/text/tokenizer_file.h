// File: fsdp/text/tokenizer_file.h
//
// Loads a tokenizer file (the format of fsdp/text/byte_bpe.h) without
// trusting it: a file larger than kMaxTokenizerFileBytes is refused from its
// size before it is read, and at most that many bytes are ever read (a file
// that grows, or a device such as /dev/zero, stops there), so a bad file
// costs at most about 1 MB of reading and the token table's bounded size
// ([Note: tokenizer limits]).
//
//   FSDP_ASSIGN_OR_RETURN(text::ByteBpe bpe, text::LoadByteBpe("/data/fortunes.tokenizer"));
#ifndef FSDP_TEXT_TOKENIZER_FILE_H_
#define FSDP_TEXT_TOKENIZER_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "fsdp/text/byte_bpe.h"

namespace fsdp {
namespace text {

// NotFound / PermissionDenied from open(2), InvalidArgument for a file that
// is too large or does not parse (ByteBpe::Parse's message), DataLoss for a
// read error; every message names `path`.
absl::StatusOr<ByteBpe> LoadByteBpe(const std::string& path);

}  // namespace text
}  // namespace fsdp

#endif  // FSDP_TEXT_TOKENIZER_FILE_H_
