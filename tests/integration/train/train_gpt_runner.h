// File: tests/integration/train/train_gpt_runner.h
//
// testonly: runs the train_gpt example binary (a Bazel data dependency) as a
// child process and reads its --metrics_out file back.
#ifndef TESTS_INTEGRATION_TRAIN_TRAIN_GPT_RUNNER_H_
#define TESTS_INTEGRATION_TRAIN_TRAIN_GPT_RUNNER_H_

#include <string>
#include <vector>

namespace fsdp_test {

struct TrainGptRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
  std::vector<double> losses;  // per step, from the metrics file
  std::vector<double> lrs;
  std::string param_sha256;    // from the final line
  bool has_final_line = false;
};

// The path of //examples:train_gpt inside the test's runfiles.
std::string TrainGptPath();

// Runs train_gpt with `flags` (each "--name=value") plus --metrics_out in
// $TEST_TMPDIR under `run_name`, and parses the metrics file.
TrainGptRun RunTrainGpt(const std::string& run_name, const std::vector<std::string>& flags);

}  // namespace fsdp_test

#endif  // TESTS_INTEGRATION_TRAIN_TRAIN_GPT_RUNNER_H_
