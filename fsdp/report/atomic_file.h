// File: fsdp/report/atomic_file.h
//
// Writes a whole file so that readers see the old contents or the new ones,
// never a half-written file: write "<path>.tmp.<pid>", flush and fsync it,
// then rename it over <path> (atomic within one file system).
//
//   FSDP_RETURN_IF_ERROR(WriteFileAtomically("docs/memory-report/memory.csv", csv));
#ifndef FSDP_REPORT_ATOMIC_FILE_H_
#define FSDP_REPORT_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {
namespace report {

// Errors (kInternal / kNotFound with the path and errno text) leave <path>
// untouched and remove the temporary file.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// The whole file; kNotFound naming the path if it cannot be opened.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_ATOMIC_FILE_H_
