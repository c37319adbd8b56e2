// File: tests/integration/train/train_gpt_runner.h
//
// testonly: runs the train_gpt example binary (a Bazel data dependency) as a
// child process and reads its --metrics_out file back.
#ifndef TESTS_INTEGRATION_TRAIN_TRAIN_GPT_RUNNER_H_
#define TESTS_INTEGRATION_TRAIN_TRAIN_GPT_RUNNER_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace fsdp_test {

struct TrainGptRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
  std::vector<double> losses;  // per step, from the metrics file
  std::vector<double> lrs;
  std::vector<double> val_losses;  // every val_loss in the metrics file, in order
  std::string param_sha256;    // from the final line
  std::string matmul_backend;  // from the final line: "onednn" or "openblas"
  bool has_final_line = false;
  // From the final line: the run's gradient noise scale and its standard
  // error (has_noise_scale false when the run has none).
  bool has_noise_scale = false;
  double noise_scale = 0;
  double noise_scale_stderr = 0;
};

// The path of //examples:train_gpt inside the test's runfiles.
std::string TrainGptPath();

// Runs train_gpt with `flags` (each "--name=value") plus --metrics_out in
// $TEST_TMPDIR under `run_name`, and parses the metrics file. The product
// backend is train_gpt's default unless `flags` name one: the default is a
// rule of the machine, so jobs compare bit for bit.
TrainGptRun RunTrainGpt(const std::string& run_name, const std::vector<std::string>& flags);
// The same with another build of train_gpt, e.g.
// ExamplePath("train_gpt_test_hooks").
TrainGptRun RunTrainGptBinary(const std::string& binary, const std::string& run_name,
                              const std::vector<std::string>& flags);

// RunTrainGpt with `base` then `extra` flags, expecting a clean exit, `steps`
// losses and a parameter digest (each a test failure otherwise, naming the
// run and showing its output).
TrainGptRun RunTrainGptJob(const std::string& run_name, std::vector<std::string> base,
                           const std::vector<std::string>& extra, int steps);

// The flags of the elastic and soak tests' job: the 2-layer GPT at 4
// ranks, full_shard, 24 sequences a step (2 x 3 x 4 ranks, 2 x 4 x 3, 2 x 6
// x 2: it splits over every size down to 2), `steps` steps.
std::vector<std::string> ElasticJobFlags(int steps);

// The path of another example binary beside train_gpt (a data dependency of
// the test too), e.g. ExamplePath("tokenize").
std::string ExamplePath(const std::string& name);

// Runs a shell command, returning its exit code; stdout and stderr into
// `output`.
int RunCommand(const std::string& command, std::string* output);

// Tokenizes Debian's fortunes file once per test process with
// //examples:tokenize at `vocab` tokens; returns the prefix of its
// <prefix>_train.bin and <prefix>_val.bin. A failure is a test failure
// (tools/setup.sh installs fortunes).
const std::string& TokenizedFortunes(int vocab);

// Starts train_gpt with `flags` in the background, stdout and stderr to the
// file `log`; returns its pid (the launcher's, for --nproc > 1).
pid_t StartTrainGpt(const std::vector<std::string>& flags, const std::string& log);

// The children of `pid` (/proc/<pid>/task/<pid>/children).
std::vector<pid_t> ChildPids(pid_t pid);

// The process among `pids` launched with RANK=`rank`, or -1.
pid_t RankPid(const std::vector<pid_t>& pids, int rank);

// The whole file ("" if it cannot be read).
std::string ReadWholeFile(const std::string& path);

// The lines of `output` in which UCX warns or reports an error ("UCX  WARN",
// "UCX  ERROR"): after a rank failed there must be none (issue 37,
// comm/ucx/ucx_log_filter.h).
std::vector<std::string> UcxWarningLines(const std::string& output);
// The text between the last sample's marker lines, without the launcher's
// "[rank 0] " prefixes, ending with a newline (as generate prints it).
std::string SampleText(const std::string& output);

// Lines in the file (0 if it cannot be read): e.g. steps in a metrics file.
int CountLines(const std::string& path);

}  // namespace fsdp_test

#endif  // TESTS_INTEGRATION_TRAIN_TRAIN_GPT_RUNNER_H_
