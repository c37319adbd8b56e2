// File: fsdp/checkpoint/manifest_file.cc
#include "fsdp/checkpoint/manifest_file.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fsdp/checkpoint/sha256.h"

namespace fsdp {
namespace checkpoint {
namespace {

constexpr char kMagic[] = "FSDPCKPT";  // 8 bytes without the NUL
constexpr size_t kHeaderBytes = 8 + 8 + 32;

void PutU64(uint64_t value, std::string& out) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((value >> (8 * b)) & 0xff));
}

uint64_t GetU64(const char* bytes) {
  uint64_t value = 0;
  for (int b = 7; b >= 0; --b) value = (value << 8) | static_cast<unsigned char>(bytes[b]);
  return value;
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("inconsistent checkpoint manifest: ", what));
}

// a * b, or false on overflow / negative.
bool CheckedProduct(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > INT64_MAX / a) return false;
  *out = a * b;
  return true;
}

}  // namespace

std::string EncodeManifestFile(const proto::CheckpointManifest& manifest) {
  std::string payload;
  manifest.SerializeToString(&payload);
  std::string out(kMagic, 8);
  PutU64(payload.size(), out);
  out += Sha256Of(payload);
  out += payload;
  return out;
}

absl::StatusOr<proto::CheckpointManifest> DecodeManifestFile(absl::string_view bytes,
                                                             absl::string_view path) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::DataLossError(absl::StrCat(
        path, " is not a checkpoint manifest (it does not start with the ", kHeaderBytes,
        "-byte FSDPCKPT header)"));
  }
  const uint64_t length = GetU64(bytes.data() + 8);
  if (length > kMaxManifestBytes || length != bytes.size() - kHeaderBytes) {
    return absl::DataLossError(absl::StrCat(path, " is truncated or damaged: its header says ",
                                            length, " payload bytes, the file has ",
                                            bytes.size() - kHeaderBytes));
  }
  const absl::string_view payload = bytes.substr(kHeaderBytes);
  if (Sha256Of(payload) != bytes.substr(16, 32)) {
    return absl::DataLossError(
        absl::StrCat(path, " is damaged: its SHA-256 does not match its contents"));
  }
  proto::CheckpointManifest manifest;
  if (!manifest.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(absl::StrCat(path, " does not parse as a CheckpointManifest"));
  }
  if (manifest.format_version() != kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has checkpoint format version ", manifest.format_version(),
        "; this build reads version ", kCheckpointFormatVersion));
  }
  absl::Status valid = ValidateManifest(manifest);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
  return manifest;
}

absl::Status ValidateManifest(const proto::CheckpointManifest& m) {
  if (m.step() < 0) return Invalid(absl::StrCat("step ", m.step(), " is negative"));
  if (m.model_numel() < 0) return Invalid("model_numel is negative");

  // Tensors tile [0, model_numel) in order.
  int64_t next = 0;
  std::set<std::string> names;
  for (const proto::TensorEntry& t : m.tensors()) {
    if (t.name().empty()) return Invalid("a tensor has an empty name");
    if (!names.insert(t.name()).second) return Invalid(absl::StrCat("tensor ", t.name(), " twice"));
    int64_t numel = 1;
    for (int64_t d : t.shape()) {
      if (!CheckedProduct(numel, d, &numel)) {
        return Invalid(absl::StrCat("tensor ", t.name(), " has a negative or huge shape"));
      }
    }
    if (numel != t.numel()) {
      return Invalid(absl::StrCat("tensor ", t.name(), " has numel ", t.numel(),
                                  " but its shape holds ", numel));
    }
    if (t.model_offset() != next) {
      return Invalid(absl::StrCat("tensor ", t.name(), " starts at ", t.model_offset(),
                                  " but the previous one ends at ", next));
    }
    next += t.numel();
    if (next < 0) return Invalid("tensor sizes overflow");
  }
  if (next != m.model_numel()) {
    return Invalid(absl::StrCat("tensors hold ", next, " elements, model_numel is ",
                                m.model_numel()));
  }

  std::set<std::string> states = {"param"};
  for (const std::string& s : m.optimizer().state_names()) {
    if (s.empty() || !states.insert(s).second) {
      return Invalid(absl::StrCat("optimizer state name '", s, "' is empty or repeated"));
    }
  }

  // Files: extents back to back; digests per chunk.
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> coverage;  // state -> runs
  std::set<std::string> file_names;
  for (const proto::ShardFile& f : m.files()) {
    if (f.name().empty() || absl::StrContains(f.name(), "/") || f.name() == "." ||
        f.name() == ".." || !file_names.insert(f.name()).second) {
      return Invalid(absl::StrCat("shard file name '", f.name(),
                                  "' is empty, repeated or not a plain file name"));
    }
    if (f.size_bytes() < 0 || f.chunk_bytes() <= 0 || f.chunk_bytes() > (int64_t{1} << 30)) {
      return Invalid(absl::StrCat(f.name(), ": size ", f.size_bytes(), " or chunk size ",
                                  f.chunk_bytes(), " out of range"));
    }
    const int64_t chunks = (f.size_bytes() + f.chunk_bytes() - 1) / f.chunk_bytes();
    if (f.chunk_sha256_size() != chunks) {
      return Invalid(absl::StrCat(f.name(), ": ", f.chunk_sha256_size(), " chunk digests for ",
                                  chunks, " chunks"));
    }
    for (const std::string& digest : f.chunk_sha256()) {
      if (digest.size() != 32) return Invalid(absl::StrCat(f.name(), ": a chunk digest is not 32 bytes"));
    }
    int64_t offset = 0;
    for (const proto::Extent& e : f.extents()) {
      if (states.count(e.state()) == 0) {
        return Invalid(absl::StrCat(f.name(), ": extent of unknown state '", e.state(), "'"));
      }
      int64_t bytes = 0;
      if (e.model_offset() < 0 || e.numel() < 0 || e.model_offset() > m.model_numel() ||
          e.numel() > m.model_numel() - e.model_offset() ||
          !CheckedProduct(e.numel(), kBytesPerElement, &bytes)) {
        return Invalid(absl::StrCat(f.name(), ": extent of ", e.state(), " [", e.model_offset(),
                                    ", +", e.numel(), ") lies outside the model's ",
                                    m.model_numel(), " elements"));
      }
      if (e.file_offset_bytes() != offset) {
        return Invalid(absl::StrCat(f.name(), ": extents are not back to back at byte ", offset));
      }
      offset += bytes;
      if (e.numel() > 0) coverage[e.state()].push_back({e.model_offset(), e.numel()});
    }
    if (offset != f.size_bytes()) {
      return Invalid(absl::StrCat(f.name(), ": extents hold ", offset, " bytes, the file ",
                                  f.size_bytes()));
    }
  }
  // Every state covers the model vector exactly once.
  for (const std::string& state : states) {
    std::vector<std::pair<int64_t, int64_t>>& runs = coverage[state];
    std::sort(runs.begin(), runs.end());
    int64_t covered = 0;
    for (const auto& [begin, numel] : runs) {
      if (begin != covered) {
        return Invalid(absl::StrCat("state ", state, ": elements from ", std::min(begin, covered),
                                    begin > covered ? " are missing" : " are stored twice"));
      }
      covered += numel;
    }
    if (covered != m.model_numel()) {
      return Invalid(absl::StrCat("state ", state, " covers ", covered, " of ", m.model_numel(),
                                  " elements"));
    }
  }
  if (m.plan().fingerprint() != m.plan_fingerprint()) {
    return Invalid("plan_fingerprint differs from the plan's own fingerprint");
  }
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace fsdp
