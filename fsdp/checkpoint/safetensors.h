// File: fsdp/checkpoint/safetensors.h
//
// Reading and writing fp32 weights as .safetensors files (the Hugging Face
// format; layout and validation rules in fsdp/checkpoint/safetensors_format.h),
// streaming: neither side ever holds more than the caller's piece in memory,
// so a model larger than RAM goes through a buffer of any size.
//
// Writing. The tensor list (names and shapes, F32, in the order the data will
// come) fixes the header, so Create writes it at once; Append then takes the
// data in order, in pieces of any size, each piece belonging to the tensor
// being filled (a piece never spans two tensors: that keeps "tensor x got too
// many elements" an error at the Append that does it, not a silent shift of
// every later tensor). Empty tensors need no Append.
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
//                         SafetensorsWriter::Create("/ckpt/model.safetensors",
//                             {{"wte", {vocab, dim}}, {"ln_f.gain", {dim}}},
//                             {{"format", "pt"}}));
//   for (size_t i = 0; i < wte.size(); i += 4096)
//     FSDP_RETURN_IF_ERROR(writer->Append(wte.subspan(i, 4096)));
//   FSDP_RETURN_IF_ERROR(writer->Append(ln_f_gain));
//   FSDP_RETURN_IF_ERROR(writer->Finish());
// Atomicity: the bytes go to a temporary file beside the target (same
// directory, "<path>.tmp-<pid>-<n>"); Finish checks that every tensor is
// complete, fsyncs the file, renames it onto `path` (atomic: a reader sees the
// old file or the new one, never a mixture) and fsyncs the directory so the
// rename survives a power cut. Until Finish succeeds `path` is untouched; a
// writer that fails or is destroyed first removes its temporary file. (A
// process killed outright leaves the temporary file behind; `path` is still
// the old file.)
//
// Reading. Open reads and validates the header against the real file size;
// ReadF32 / ReadF32Range pread the requested elements straight into the
// caller's span, so a tensor can be streamed in pieces:
//   FSDP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsReader> reader,
//                         SafetensorsReader::Open(path));
//   const SafetensorsTensorInfo* wte = reader->Find("wte");   // nullptr if absent
//   std::vector<float> piece(1 << 20);
//   for (uint64_t i = 0; i < wte->numel; i += piece.size()) {
//     absl::Span<float> part =
//         absl::MakeSpan(piece).first(std::min<uint64_t>(piece.size(), wte->numel - i));
//     FSDP_RETURN_IF_ERROR(reader->ReadF32Range("wte", i, part));   // elements [i, i + size)
//     ...
//   }
// Reads are const and use pread only, so several threads may read one reader
// at once.
//
// Data is little-endian in the file whatever the host; both sides convert
// explicitly. Every error names the file (and the tensor, where there is one).
#ifndef FSDP_CHECKPOINT_SAFETENSORS_H_
#define FSDP_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/atomic_file.h"
#include "base/unique_fd.h"
#include "fsdp/checkpoint/safetensors_format.h"

namespace fsdp {
namespace checkpoint {

class SafetensorsReader {
 public:
  // Opens `path` and validates its header (safetensors_format.h). Errors:
  // NotFound / PermissionDenied from open(2); InvalidArgument for a malformed
  // file, "safetensors file <path>: <what is wrong>".
  static absl::StatusOr<std::unique_ptr<SafetensorsReader>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // Every tensor, in data order.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return header_.tensors; }
  // "__metadata__" (empty if the file has none).
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // The tensor called `name`, or nullptr.
  const SafetensorsTensorInfo* Find(absl::string_view name) const;
  // File offset of the data section (8 + N).
  uint64_t data_section_offset() const { return data_section_offset_; }

  // Reads the whole of F32 tensor `name` into `out`, which must hold exactly
  // its numel elements. NotFound for an unknown name, InvalidArgument for
  // another dtype or a size mismatch, DataLoss if the file has shrunk since
  // Open.
  absl::Status ReadF32(absl::string_view name, absl::Span<float> out) const;

  // Reads elements [element_begin, element_begin + out.size()) of F32 tensor
  // `name` (row-major flat index) into `out`. OutOfRange if that range is not
  // inside the tensor; otherwise as ReadF32.
  absl::Status ReadF32Range(absl::string_view name, uint64_t element_begin,
                            absl::Span<float> out) const;

 private:
  SafetensorsReader(std::string path, base::UniqueFd fd, SafetensorsHeader header,
                    uint64_t data_section_offset);

  std::string path_;
  base::UniqueFd fd_;
  SafetensorsHeader header_;
  uint64_t data_section_offset_;
  absl::flat_hash_map<std::string, size_t> index_;  // name -> position in header_.tensors
};

class SafetensorsWriter {
 public:
  // Lays out `tensors` (F32, data in this order) with `metadata`, creates the
  // temporary file beside `path` and writes the header. InvalidArgument for a
  // duplicate or invalid name or size (LayOutF32Tensors); the open(2) error
  // (NotFound for a missing directory, PermissionDenied, ...) naming `path`.
  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, absl::Span<const SafetensorsTensorSpec> tensors,
      const std::map<std::string, std::string>& metadata = {});

  // Removes the temporary file unless Finish succeeded.
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends `values` to the tensor being filled (the first one not yet
  // complete). InvalidArgument if they exceed what that tensor still needs, or
  // if every tensor is complete; the write(2) error (ResourceExhausted for a
  // full disk, ...) naming `path`. Any error fails the writer: the temporary
  // file is removed and later calls return FailedPrecondition.
  absl::Status Append(absl::Span<const float> values);

  // Completes the file as described above. FailedPrecondition naming the
  // first incomplete tensor and how many elements it got; the error of
  // write/fsync/close/rename naming `path`. After an error `path` is as it
  // was, except when only the final directory fsync fails (the new file is
  // then in place but its rename may not be durable; the error says so).
  absl::Status Finish();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  const SafetensorsHeader& header() const { return header_; }

 private:
  SafetensorsWriter(std::string path, base::PendingFile file, SafetensorsHeader header);

  // Skips complete (and empty) tensors so that tensor_ is the one to fill.
  void AdvanceToIncompleteTensor();
  absl::Status Flush();
  // Records the first error, removes the temporary file, returns the error.
  absl::Status Fail(absl::Status status);
  absl::Status CheckUsable() const;

  std::string path_;
  std::string temp_path_;   // file_'s, kept for temp_path() after a failure
  base::PendingFile file_;  // removed unless Finish publishes it
  SafetensorsHeader header_;
  size_t tensor_ = 0;            // the tensor being filled
  uint64_t tensor_written_ = 0;  // its elements appended so far
  std::vector<char> buffer_;     // little-endian bytes not yet written
  absl::Status failure_;         // the first error, after which the writer is dead
  bool finished_ = false;
};

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_SAFETENSORS_H_
