// File: examples/export_checkpoint.cc
//
// Turns a sharded checkpoint into one safetensors file, offline: no ranks,
// no plan, whatever world size and strategy wrote it. Tensor by tensor
// through a fixed buffer, so its memory stays near --piece_numel floats,
// not the model (fsdp/checkpoint/model_export.h):
//
//   bazel run -c opt //examples:export_checkpoint -- --checkpoint=/tmp/ckpt/step-00000020 --out=/tmp/model.safetensors
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/clock.h"
#include "fsdp/checkpoint/model_export.h"

ABSL_FLAG(std::string, checkpoint, "", "a complete checkpoint directory (DIR/step-00000020)");
ABSL_FLAG(std::string, out, "", "the .safetensors file to write (replaced atomically)");
ABSL_FLAG(int64_t, piece_numel, int64_t{1} << 20, "floats read and written at a time");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Writes a sharded checkpoint's fp32 parameters as one safetensors file.\n"
      "Example: export_checkpoint --checkpoint=/tmp/ckpt/step-00000020 --out=/tmp/m.safetensors");
  absl::ParseCommandLine(argc, argv);
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (checkpoint.empty() || out.empty()) {
    std::fprintf(stderr, "export_checkpoint: --checkpoint and --out are both required\n");
    return 2;
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<fsdp::checkpoint::ConvertStats> stats =
      fsdp::checkpoint::ConvertCheckpoint(checkpoint, out, absl::GetFlag(FLAGS_piece_numel));
  if (!stats.ok()) {
    std::fprintf(stderr, "export_checkpoint: %s\n", std::string(stats.status().message()).c_str());
    return 1;
  }
  rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf(
      "export_checkpoint: wrote %lld tensors, %lld bytes of fp32 data, to %s in %.2f s "
      "(buffer %lld floats; peak RSS %.1f MiB)\n",
      static_cast<long long>(stats->tensors), static_cast<long long>(stats->bytes), out.c_str(),
      absl::ToDoubleSeconds(absl::Now() - start), static_cast<long long>(stats->buffer_numel),
      usage.ru_maxrss / 1024.0);
  return 0;
}
