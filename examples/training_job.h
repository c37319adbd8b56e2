// File: examples/training_job.h
//
// What the training benchmarks (train_bench, speed_bench) share: each
// measurement is a separate job of ranks that re-run the benchmark binary
// with an internal --bench_rank_config flag; rank 0 writes RunTraining's
// metrics file, whose last line (`"final":true`) the parent reads.
//
//   if (!rank_config.empty()) return RunAsLaunchedRank("speed_bench", RunRank, rank_config);
//   ...
//   std::string final_line = ReadFinalMetricsLine(path);   // "" if the job wrote none
//   double rate = JsonNumberField(final_line, "tokens_per_s");
#ifndef EXAMPLES_TRAINING_JOB_H_
#define EXAMPLES_TRAINING_JOB_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace training_job {

// Runs `run(config)` as one launched rank; prints its error as
// "<program> rank: ..." and returns the process exit code (0 or 1).
int RunAsLaunchedRank(const char* program,
                      const std::function<absl::Status(const std::string&)>& run,
                      const std::string& config);

// The "final":true line of a metrics file, then removes the file; "" when
// the file is missing or has no such line.
std::string ReadFinalMetricsLine(const std::string& path);

// The number after "key": in a flat JSON line, or -1 when absent.
double JsonNumberField(const std::string& line, const std::string& key);

// The CPU's model name and the instruction sets the kernels care about, from
// /proc/cpuinfo: "Intel(R) Xeon(R) Processor [avx2 avx512f ... amx_tile]".
std::string CpuLine();

}  // namespace training_job

#endif  // EXAMPLES_TRAINING_JOB_H_
