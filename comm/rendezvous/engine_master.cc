// File: comm/rendezvous/engine_master.cc
#include "comm/rendezvous/engine_master.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace comm {

absl::StatusOr<std::string> FirstSlurmHost(absl::string_view node_list) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Slurm node list '", node_list, "' ", why,
        "; set MASTER_ADDR to the host of task 0 (e.g. export MASTER_ADDR=$(scontrol show "
        "hostnames \"$SLURM_JOB_NODELIST\" | head -n 1))"));
  };
  std::string host;
  size_t i = 0;
  while (i < node_list.size() && node_list[i] != ',') {
    const char c = node_list[i];
    if (c == ']') return invalid("has a ']' without '['");
    if (c != '[') {
      host.push_back(c);
      ++i;
      continue;
    }
    // "[03-05,9]": the first range's first value, as written (zero padding kept).
    const size_t close = node_list.find(']', i);
    if (close == absl::string_view::npos) return invalid("has a '[' without ']'");
    absl::string_view inside = node_list.substr(i + 1, close - i - 1);
    const size_t end = inside.find_first_of(",-");
    absl::string_view first = inside.substr(0, end);
    if (first.empty()) return invalid("has an empty range in brackets");
    for (char d : first) {
      if (d < '0' || d > '9') return invalid("has a non-numeric range in brackets");
    }
    absl::StrAppend(&host, first);
    i = close + 1;
  }
  if (host.empty()) return invalid("names no host");
  return host;
}

int DerivedPort(absl::string_view job_id) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (char c : job_id) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return kDerivedPortMin + static_cast<int>(hash % (kDerivedPortEnd - kDerivedPortMin));
}

}  // namespace comm
