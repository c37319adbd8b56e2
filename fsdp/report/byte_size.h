// File: fsdp/report/byte_size.h
//
// Byte counts as people write them on a command line, and back.
//
//   FSDP_ASSIGN_OR_RETURN(int64_t budget, ParseByteSize("2GiB"));  // 2147483648
//   ParseByteSize("500MB");   // 500000000 (SI: 1 MB = 1e6 bytes)
//   ParseByteSize("1.5e9");   // 1500000000
//   FormatGigabytes(1500000000);  // "1.50 GB" (GB = 1e9 bytes, as the ZeRO paper counts)
#ifndef FSDP_REPORT_BYTE_SIZE_H_
#define FSDP_REPORT_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {
namespace report {

// A non-negative number (integer, decimal or with an exponent) followed by an
// optional unit, case-insensitive, spaces allowed between: B; KB MB GB TB
// (powers of 1000); KiB MiB GiB TiB (powers of 1024); K M G T alone mean the
// binary ones. The result is rounded to whole bytes. InvalidArgument quoting
// the text and the accepted forms for anything else, including values above
// 2^62 bytes.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// "12.35 GB" with GB = 1e9 bytes.
std::string FormatGigabytes(int64_t num_bytes);

}  // namespace report
}  // namespace fsdp

#endif  // FSDP_REPORT_BYTE_SIZE_H_
