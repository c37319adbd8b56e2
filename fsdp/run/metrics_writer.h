// File: fsdp/run/metrics_writer.h
//
// The --metrics_out file: one JSON object per line. One line per step,
//
//   {"step":1,"loss":5.541234,"lr":0.0003,"tokens_per_s":18734.2,
//    "peak_bytes":1234567,"comm_wait_s":0.0123}
//
// plus, at a step where a straggler is named (fsdp/run/straggler_report.h),
// "straggler_rank", "straggler_phase", "straggler_vs_fastest" and
// "straggler_vs_own_best" (and "straggler_unit" for compute); a run
// resumed from a checkpoint (or restarted) appends, after a line
//
//   {"step":10,"resumed":true}
//
// and a last line with "final":true, the parameter digest and the run summary
//
//   {"final":true,"steps":20,"loss":2.01,"param_sha256":"ab12...",
//    "world_size":2,"strategy":"no_shard","tokens_per_s":...,"comm_wait_share":0.08,
//    "matmul_share":0.6,"matmul_gflops":180.5,"peak_bytes":...,
//    "matmul_backend":"onednn","matmul_kernels":"onednn 2.6.3: f32 brg:avx512_core, ..."}
//
// Floats are written with 9 significant digits, enough to round-trip a float
// exactly, so runs can be compared to the last bit.
#ifndef FSDP_RUN_METRICS_WRITER_H_
#define FSDP_RUN_METRICS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fsdp {

struct StepMetrics {
  int step = 0;             // 1-based
  double loss = 0;          // mean over the global batch's tokens
  double lr = 0;
  double tokens_per_s = 0;  // global tokens / step wall time
  int64_t peak_bytes = 0;   // this rank's tracked peak so far
  double comm_wait_s = 0;   // time this rank blocked in collectives this step
  double matmul_s = 0;      // time this rank spent in matrix products this step
  double matmul_flops = 0;  // their floating-point operations (2 m n k each)
  int64_t page_faults = 0;  // this rank's minor page faults during the step
  int64_t tokens = 0;       // global tokens trained on after this step
  bool has_val_loss = false;
  double val_loss = 0;      // --val_data: held-out loss after this step
  // The smoothed gradient noise scale (fsdp/optim/gradient_noise_scale.h),
  // in sequences, and the global batch it was measured at.
  bool has_noise_scale = false;
  double noise_scale = 0;
  int64_t noise_batch = 0;
  // A straggler named at this step (fsdp/run/straggler_report.h):
  //   "straggler_rank":2,"straggler_phase":"data","straggler_vs_fastest":1.45,
  //   "straggler_vs_own_best":1.3
  bool has_straggler = false;
  int straggler_rank = -1;
  std::string straggler_phase;
  double straggler_vs_fastest = 0;
  double straggler_vs_own_best = 0;
  // For a compute straggler whose units were timed: the plan unit it is
  // slowest in, "straggler_unit":"block2" ("" leaves the field out).
  std::string straggler_unit;
};

// A validation-only line (the evaluation before the first step):
//   {"step":0,"tokens":0,"val_loss":6.2}
std::string ValMetricsJson(int step, int64_t tokens, double val_loss);

struct FinalMetrics {
  int steps = 0;
  double loss = 0;  // last step's loss
  std::string param_sha256;
  int world_size = 1;
  std::string strategy;
  double tokens_per_s = 0;     // over all steps after the first
  double comm_wait_share = 0;  // comm wait / step time, same steps
  double matmul_share = 0;     // rank 0's matrix-product time / step time, same steps
  double matmul_gflops = 0;    // rank 0's matrix-product rate, same steps
  double optimizer_share = 0;  // rank 0's optimizer step / step time, same steps
  int compute_threads = 1;     // per rank (products and the kernels between them)
  int64_t peak_bytes = 0;
  std::string matmul_backend;  // "onednn" or "openblas": the bits depend on it
  std::string matmul_kernels;  // its kernels here, e.g. "onednn 2.6.3: f32 brg:avx512_core, ..."
  // The run's mean gradient noise scale with its standard error, over
  // noise_steps steps at global batch noise_batch.
  bool has_noise_scale = false;
  double noise_scale = 0;
  double noise_scale_stderr = 0;
  int64_t noise_steps = 0;
  int64_t noise_batch = 0;
  // The per-rank skew lines of the straggler report, "rank_skew":[...];
  // empty: none (one rank, or reports off).
  std::vector<std::string> rank_skew;
};

std::string StepMetricsJson(const StepMetrics& metrics);
std::string FinalMetricsJson(const FinalMetrics& metrics);
// The line a resumed or restarted run writes first: {"step":N,"resumed":true}.
// Readers drop what an earlier attempt wrote past step N (those steps are
// taken again); the lines stay in the file.
std::string ResumedMetricsJson(int step);

// Appends lines to a file, flushing each, so a crash keeps what was written.
class MetricsWriter {
 public:
  enum class Mode {
    kNewRun,    // create or truncate: a run from step 0
    kContinue,  // create or append: a resumed or restarted run keeps the history
  };
  // Never follows a symbolic link at `path` (someone else's file in a shared
  // directory). kInvalidArgument naming the path and the system error when it
  // cannot be opened.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(const std::string& path,
                                                             Mode mode);
  ~MetricsWriter();

  absl::Status WriteLine(absl::string_view json);

 private:
  MetricsWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  std::FILE* file_;
};

}  // namespace fsdp

#endif  // FSDP_RUN_METRICS_WRITER_H_
