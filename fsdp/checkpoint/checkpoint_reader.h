// File: fsdp/checkpoint/checkpoint_reader.h
//
// Reads any run of any state of a complete checkpoint by model-vector
// address, whatever plan wrote it: the loader of every rank (which reads
// only the regions its own plan needs), the exporter and the converter.
//
// Every byte handed out was verified: the reader reads whole chunks of a
// shard file into one bounce buffer (chunk_bytes, tracked as kWorkspace when
// a tracker is given), checks each chunk's SHA-256 against the manifest, and
// copies out the part asked for. So memory stays at one chunk whatever is
// read, and a flipped byte anywhere a reader looks is an error naming the
// file, never a silently different model.
//
//   FSDP_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open("DIR/step-00000010"));
//   FSDP_RETURN_IF_ERROR(reader->Read("exp_avg", /*model_offset=*/4096, span));
#ifndef FSDP_CHECKPOINT_CHECKPOINT_READER_H_
#define FSDP_CHECKPOINT_CHECKPOINT_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fsdp/memory/memory_tracker.h"
#include "proto/checkpoint.pb.h"

namespace fsdp {
namespace checkpoint {

// Reads and validates path/manifest.pb (DecodeManifestFile). NotFound when
// `path` is not a checkpoint directory (the message says what it holds).
absl::StatusOr<proto::CheckpointManifest> ReadManifest(const std::string& path);

class CheckpointReader {
 public:
  // Reads the manifest and checks that every shard file exists with the
  // size the manifest records (NotFound / DataLoss naming the file).
  // `tracker`, if given, counts the bounce buffer and must outlive the reader.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& path,
                                                                MemoryTracker* tracker = nullptr);
  ~CheckpointReader();

  const proto::CheckpointManifest& manifest() const { return manifest_; }
  const std::string& path() const { return path_; }

  // Fills `out` with elements [model_offset, model_offset + out.size()) of
  // `state` ("param" or an optimizer state of the manifest). InvalidArgument
  // for an unknown state or a range outside the model; DataLoss naming the
  // file and chunk when a digest does not match; Internal for I/O errors.
  absl::Status Read(absl::string_view state, int64_t model_offset, absl::Span<float> out);

  // Many reads at once, in file order: each chunk is read and verified at
  // most once however the requests interleave (a resharding load asks for
  // small runs of several states from several files). Same errors as Read.
  struct Request {
    std::string state;
    int64_t model_offset = 0;
    absl::Span<float> out;
  };
  absl::Status ReadAll(absl::Span<const Request> requests);

  // Called after every chunk read: a long load is not a hang
  // (Communicator::KeepAlive).
  void set_keep_alive(std::function<void()> keep_alive) { keep_alive_ = std::move(keep_alive); }

  // Bytes read from shard files so far (whole chunks).
  int64_t bytes_read() const { return bytes_read_; }

 private:
  struct Piece {
    int64_t model_offset;
    int64_t numel;
    int file;                  // index into manifest_.files()
    int64_t file_offset_bytes;
  };

  CheckpointReader(std::string path, proto::CheckpointManifest manifest)
      : path_(std::move(path)), manifest_(std::move(manifest)) {}
  // One contiguous copy from a file into memory.
  struct Copy {
    int file;
    int64_t file_offset_bytes;
    int64_t num_bytes;
    char* dest;
  };
  // The copies that serve one request (checks its range and state).
  absl::Status PlanCopies(absl::string_view state, int64_t model_offset, absl::Span<float> out,
                          std::vector<Copy>& copies) const;
  absl::Status RunCopies(std::vector<Copy>& copies);
  // Makes chunk `chunk` of file `file` the bounce buffer's verified content.
  absl::Status LoadChunk(int file, int64_t chunk);

  std::string path_;
  proto::CheckpointManifest manifest_;
  std::map<std::string, std::vector<Piece>, std::less<>> pieces_;  // by state, sorted
  std::vector<int> fds_;
  std::unique_ptr<MemoryTracker> own_tracker_;
  TrackedBuffer<char> chunk_;
  int chunk_file_ = -1;
  int64_t chunk_index_ = -1;
  int64_t chunk_size_ = 0;  // valid bytes in chunk_
  int64_t bytes_read_ = 0;
  std::function<void()> keep_alive_;
};

}  // namespace checkpoint
}  // namespace fsdp

#endif  // FSDP_CHECKPOINT_CHECKPOINT_READER_H_
