// File: fsdp/checkpoint/safetensors.cc
#include "fsdp/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/posix_file.h"
#include "base/status_macros.h"

namespace fsdp {
namespace checkpoint {
namespace {

// The writer hands write(2) this much at a time: large enough that syscalls
// cost nothing next to the copy, small enough to be noise next to a model.
constexpr size_t kWriteBufferBytes = size_t{1} << 20;

std::string Quoted(absl::string_view name) {
  return absl::StrCat("\"", absl::CHexEscape(name), "\"");
}

// The same code, with `prefix` before the message.
absl::Status Prefixed(absl::string_view prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

void AppendLittleEndianF32(absl::Span<const float> values, std::vector<char>& out) {
  const size_t start = out.size();
  out.resize(start + values.size() * 4);
  char* p = out.data() + start;
  for (float value : values) {
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    p[0] = static_cast<char>(bits & 0xff);
    p[1] = static_cast<char>((bits >> 8) & 0xff);
    p[2] = static_cast<char>((bits >> 16) & 0xff);
    p[3] = static_cast<char>(bits >> 24);
    p += 4;
  }
}

// `values` holds little-endian bytes as read from the file; make them floats.
void DecodeLittleEndianF32InPlace(absl::Span<float> values) {
  for (float& value : values) {
    unsigned char b[4];
    std::memcpy(b, &value, 4);
    const uint32_t bits = static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
                          static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
    std::memcpy(&value, &bits, 4);
  }
}

}  // namespace

// --- SafetensorsReader ---

SafetensorsReader::SafetensorsReader(std::string path, base::UniqueFd fd, SafetensorsHeader header,
                                     uint64_t data_section_offset)
    : path_(std::move(path)),
      fd_(std::move(fd)),
      header_(std::move(header)),
      data_section_offset_(data_section_offset) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
}

absl::StatusOr<std::unique_ptr<SafetensorsReader>> SafetensorsReader::Open(
    const std::string& path) {
  const std::string context = absl::StrCat("safetensors file ", path, ": ");
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return base::PosixError(errno, absl::StrCat("cannot open safetensors file ", path));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return base::PosixError(errno, absl::StrCat("cannot stat safetensors file ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(context, "not a regular file"));
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);

  char prefix[kSafetensorsLengthBytes];
  FSDP_ASSIGN_OR_RETURN(size_t prefix_bytes, base::PreadFull(fd.get(), absl::MakeSpan(prefix), 0,
                                                       absl::StrCat("cannot read ", path)));
  absl::StatusOr<uint64_t> header_bytes =
      ParseSafetensorsHeaderLength(absl::string_view(prefix, prefix_bytes), file_bytes);
  if (!header_bytes.ok()) return Prefixed(context, header_bytes.status());

  std::string json(*header_bytes, '\0');
  FSDP_ASSIGN_OR_RETURN(size_t json_bytes,
                        base::PreadFull(fd.get(), absl::MakeSpan(json), kSafetensorsLengthBytes,
                                  absl::StrCat("cannot read ", path)));
  if (json_bytes != json.size()) {
    return absl::DataLossError(
        absl::StrCat(context, "the file ended inside its header (it shrank while opening)"));
  }
  const uint64_t data_section_offset = kSafetensorsLengthBytes + *header_bytes;
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(json, file_bytes - data_section_offset);
  if (!header.ok()) return Prefixed(context, header.status());
  return std::unique_ptr<SafetensorsReader>(
      new SafetensorsReader(path, std::move(fd), std::move(*header), data_section_offset));
}

const SafetensorsTensorInfo* SafetensorsReader::Find(absl::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

absl::Status SafetensorsReader::ReadF32(absl::string_view name, absl::Span<float> out) const {
  const SafetensorsTensorInfo* t = Find(name);
  if (t != nullptr && t->numel != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors file ", path_, ": tensor ",
                                                   Quoted(name), " has ", t->numel,
                                                   " elements, but the output holds ", out.size()));
  }
  return ReadF32Range(name, 0, out);
}

absl::Status SafetensorsReader::ReadF32Range(absl::string_view name, uint64_t element_begin,
                                             absl::Span<float> out) const {
  const std::string context = absl::StrCat("safetensors file ", path_, ": tensor ", Quoted(name));
  const SafetensorsTensorInfo* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("safetensors file ", path_, ": no tensor ",
                                            Quoted(name), " among its ", header_.tensors.size(),
                                            " tensors"));
  }
  if (t->dtype != SafetensorsDtype::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(context, " is ", SafetensorsDtypeName(t->dtype),
                                                   "; only F32 tensors can be read"));
  }
  if (element_begin > t->numel || out.size() > t->numel - element_begin) {
    return absl::OutOfRangeError(absl::StrCat(context, ": elements [", element_begin, ", ",
                                              element_begin, " + ", out.size(),
                                              ") are outside its ", t->numel, " elements"));
  }
  if (out.empty()) return absl::OkStatus();
  // Within the file (Open checked data_end against its size), so no overflow.
  const uint64_t offset = data_section_offset_ + t->data_begin + element_begin * 4;
  absl::Span<char> bytes(reinterpret_cast<char*>(out.data()), out.size() * 4);
  FSDP_ASSIGN_OR_RETURN(size_t got,
                        base::PreadFull(fd_.get(), bytes, offset, absl::StrCat("cannot read ", context)));
  if (got != bytes.size()) {
    return absl::DataLossError(absl::StrCat(context, ": the file ends at byte ", offset + got,
                                            ", before its data (truncated since Open?)"));
  }
  DecodeLittleEndianF32InPlace(out);
  return absl::OkStatus();
}

// --- SafetensorsWriter ---

SafetensorsWriter::SafetensorsWriter(std::string path, base::PendingFile file,
                                     SafetensorsHeader header)
    : path_(std::move(path)),
      temp_path_(file.temp_path()),
      file_(std::move(file)),
      header_(std::move(header)) {
  buffer_.reserve(kWriteBufferBytes);
  AdvanceToIncompleteTensor();
}

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, absl::Span<const SafetensorsTensorSpec> tensors,
    const std::map<std::string, std::string>& metadata) {
  const std::string context = absl::StrCat("safetensors file ", path, ": ");
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors file \"", path, "\": the path must name a file"));
  }
  absl::StatusOr<SafetensorsHeader> header = LayOutF32Tensors(tensors, metadata);
  if (!header.ok()) return Prefixed(context, header.status());
  absl::StatusOr<std::string> json = SerializeSafetensorsHeader(*header);
  if (!json.ok()) return Prefixed(context, json.status());

  FSDP_ASSIGN_OR_RETURN(base::PendingFile file, base::PendingFile::Create(path, "safetensors file"));
  std::unique_ptr<SafetensorsWriter> writer(
      new SafetensorsWriter(path, std::move(file), std::move(*header)));
  // The header goes out now, so that an unwritable file fails here, before the
  // caller produces any data.
  std::string prefix(kSafetensorsLengthBytes, '\0');
  for (size_t i = 0; i < kSafetensorsLengthBytes; ++i) {
    prefix[i] = static_cast<char>((json->size() >> (8 * i)) & 0xff);
  }
  writer->buffer_.insert(writer->buffer_.end(), prefix.begin(), prefix.end());
  writer->buffer_.insert(writer->buffer_.end(), json->begin(), json->end());
  FSDP_RETURN_IF_ERROR(writer->Flush());
  return writer;
}

// file_ removes the temporary file unless it was published.
SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::AdvanceToIncompleteTensor() {
  while (tensor_ < header_.tensors.size() && tensor_written_ == header_.tensors[tensor_].numel) {
    ++tensor_;
    tensor_written_ = 0;
  }
}

absl::Status SafetensorsWriter::CheckUsable() const {
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("safetensors file ", path_, ": the writer has already finished"));
  }
  if (!failure_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "safetensors file ", path_, ": the writer failed earlier: ", failure_.message()));
  }
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Fail(absl::Status status) {
  failure_ = status;
  file_.Discard();
  return status;
}

absl::Status SafetensorsWriter::Flush() {
  absl::Status status = file_.Write(absl::string_view(buffer_.data(), buffer_.size()));
  buffer_.clear();
  if (!status.ok()) return Fail(std::move(status));
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Append(absl::Span<const float> values) {
  FSDP_RETURN_IF_ERROR(CheckUsable());
  if (values.empty()) return absl::OkStatus();
  if (tensor_ == header_.tensors.size()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("safetensors file ", path_, ": Append of ", values.size(),
                     " elements after all ", header_.tensors.size(), " tensors are complete")));
  }
  const SafetensorsTensorInfo& t = header_.tensors[tensor_];
  if (values.size() > t.numel - tensor_written_) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "safetensors file ", path_, ": Append of ", values.size(), " elements to tensor ",
        Quoted(t.name), ", which has ", t.numel - tensor_written_, " of its ", t.numel,
        " elements left (a piece may not span two tensors)")));
  }
  tensor_written_ += values.size();
  while (!values.empty()) {
    const size_t room = (kWriteBufferBytes - buffer_.size()) / 4;
    const size_t n = std::min(room, values.size());
    AppendLittleEndianF32(values.first(n), buffer_);
    values.remove_prefix(n);
    if (buffer_.size() + 4 > kWriteBufferBytes) FSDP_RETURN_IF_ERROR(Flush());
  }
  AdvanceToIncompleteTensor();
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Finish() {
  FSDP_RETURN_IF_ERROR(CheckUsable());
  if (tensor_ < header_.tensors.size()) {
    const SafetensorsTensorInfo& t = header_.tensors[tensor_];
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "safetensors file ", path_, ": Finish with tensor ", Quoted(t.name), " at ",
        tensor_written_, " of its ", t.numel, " elements (", header_.tensors.size() - tensor_ - 1,
        " later tensors not started); nothing was written to ", path_)));
  }
  FSDP_RETURN_IF_ERROR(Flush());
  // fsync, rename onto path_, fsync of the directory (base/atomic_file.h).
  absl::Status published = file_.Publish();
  finished_ = file_.published();
  if (!published.ok() && !finished_) return Fail(std::move(published));
  return published;
}

}  // namespace checkpoint
}  // namespace fsdp
