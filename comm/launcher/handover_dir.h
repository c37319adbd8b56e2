// File: comm/launcher/handover_dir.h
//
// A directory in memory that outlives a job's attempts: the launcher makes
// it before the first attempt, names it to every rank in FSDP_HANDOVER_DIR,
// and removes it when the job ends. A training program's survivors leave
// their copies of the state there after a failure, for the next attempt
// (fsdp/checkpoint/handover.h). In /dev/shm (memory) when it exists, else
// in $TMPDIR; private to the user (0700).
#ifndef COMM_LAUNCHER_HANDOVER_DIR_H_
#define COMM_LAUNCHER_HANDOVER_DIR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace comm {

inline constexpr char kHandoverDirEnv[] = "FSDP_HANDOVER_DIR";

class HandoverDir {
 public:
  static absl::StatusOr<std::unique_ptr<HandoverDir>> Create();
  ~HandoverDir();  // removes it and everything in it
  HandoverDir(const HandoverDir&) = delete;
  HandoverDir& operator=(const HandoverDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit HandoverDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace comm

#endif  // COMM_LAUNCHER_HANDOVER_DIR_H_
