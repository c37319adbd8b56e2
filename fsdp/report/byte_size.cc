// File: fsdp/report/byte_size.cc
#include "fsdp/report/byte_size.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace fsdp {
namespace report {
namespace {

absl::Status BadSize(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot read '", text, "' as a byte count (", why,
      "); write a number with an optional unit, e.g. 2GiB, 500MB, 1.5e9, 64KiB "
      "(KB/MB/GB/TB = powers of 1000, KiB/MiB/GiB/TiB or K/M/G/T = powers of 1024)"));
}

// The multiplier for a unit spelled in lower case, or 0 if unknown.
double UnitMultiplier(const std::string& unit) {
  if (unit.empty() || unit == "b") return 1.0;
  if (unit == "kb") return 1e3;
  if (unit == "mb") return 1e6;
  if (unit == "gb") return 1e9;
  if (unit == "tb") return 1e12;
  if (unit == "k" || unit == "kib") return 1024.0;
  if (unit == "m" || unit == "mib") return 1024.0 * 1024.0;
  if (unit == "g" || unit == "gib") return 1024.0 * 1024.0 * 1024.0;
  if (unit == "t" || unit == "tib") return 1024.0 * 1024.0 * 1024.0 * 1024.0;
  return 0.0;
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  if (trimmed.empty()) return BadSize(text, "it is empty");
  if (trimmed[0] == '-') return BadSize(text, "it is negative");
  // The number is the longest prefix strtod accepts; it must not read an
  // "inf"/"nan" word, so require a leading digit or '.'.
  if (!absl::ascii_isdigit(static_cast<unsigned char>(trimmed[0])) && trimmed[0] != '.') {
    return BadSize(text, "it does not start with a number");
  }
  char* end = nullptr;
  const double value = std::strtod(trimmed.c_str(), &end);
  if (end == trimmed.c_str()) return BadSize(text, "it does not start with a number");
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(end));
  const double multiplier = UnitMultiplier(unit);
  if (multiplier == 0.0) return BadSize(text, absl::StrCat("unknown unit '", unit, "'"));
  const double bytes = std::round(value * multiplier);
  if (!std::isfinite(bytes) || bytes > 4.6e18) return BadSize(text, "it is too large");
  return static_cast<int64_t>(bytes);
}

std::string FormatGigabytes(int64_t num_bytes) {
  return absl::StrFormat("%.2f GB", static_cast<double>(num_bytes) / 1e9);
}

}  // namespace report
}  // namespace fsdp
