// File: comm/launcher/launch_main.cc
//
// Runs N ranks of a program on this host, like `torchrun --standalone`:
//
//   launch --nproc 4 [--master_port 29500] [--grace_seconds 3] [--bind_cores 1]
//          [--max_restarts N] [--min_nproc M] [--max_nproc X] -- program args...
//
// --bind_cores 1 pins each rank to its share of the CPUs
// (LaunchOptions::bind_to_cores).
//
// --max_restarts N runs the whole job again, up to N times, when a rank fails
// (comm/launcher/restarts.h; the ranks see FSDP_RESTART_COUNT).
//
// --min_nproc M (< N) makes the job elastic (comm/launcher/elastic.h): after
// a rank's failure the job goes on with the survivors, down to M ranks;
// `kill -USR1 <launcher>` says a lost slot is back, up to --max_nproc X
// (default N). --max_restarts then counts restarts at M ranks.
//
// Exits 0 if every rank exits 0; otherwise stops the other ranks and exits
// with the first failed rank's exit code (128+signal if it was killed).
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "comm/launcher/elastic.h"
#include "comm/launcher/launcher.h"
#include "comm/launcher/restarts.h"

namespace {

int Usage(const char* problem) {
  std::fprintf(stderr,
               "launch: %s\nusage: launch --nproc N [--master_port P] "
               "[--grace_seconds S] [--bind_cores 0|1] [--max_restarts N] [--min_nproc M] "
               "[--max_nproc X] -- program [args...]\n",
               problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  comm::LaunchOptions options;
  options.nproc = 0;
  int max_restarts = 0;
  int min_nproc = 0;  // 0 = not elastic
  int max_nproc = 0;  // 0 = --nproc
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    std::string value;
    std::string name = arg;
    size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(("missing value for " + arg).c_str());
    }
    int number = 0;
    if (!absl::SimpleAtoi(value, &number)) {
      return Usage((name + " needs an integer, got '" + value + "'").c_str());
    }
    if (name == "--nproc") {
      options.nproc = number;
    } else if (name == "--master_port") {
      options.master_port = number;
    } else if (name == "--grace_seconds") {
      options.grace = absl::Seconds(number);
    } else if (name == "--max_restarts") {
      if (number < 0) return Usage("--max_restarts needs N >= 0");
      max_restarts = number;
    } else if (name == "--min_nproc") {
      if (number < 1) return Usage("--min_nproc needs M >= 1");
      min_nproc = number;
    } else if (name == "--max_nproc") {
      if (number < 1) return Usage("--max_nproc needs X >= 1");
      max_nproc = number;
    } else if (name == "--bind_cores") {
      if (number != 0 && number != 1) return Usage("--bind_cores needs 0 or 1");
      options.bind_to_cores = number == 1;
    } else {
      return Usage(("unknown flag " + name).c_str());
    }
  }
  for (; i < argc; ++i) options.argv.push_back(argv[i]);
  if (options.nproc < 1) return Usage("--nproc N (N >= 1) is required");
  if (options.argv.empty()) return Usage("no program given after --");

  absl::StatusOr<int> result;
  if (min_nproc > 0 || max_nproc > 0) {
    comm::ElasticOptions elastic;
    elastic.min_nproc = min_nproc > 0 ? min_nproc : options.nproc;
    elastic.max_nproc = max_nproc > 0 ? max_nproc : options.nproc;
    elastic.max_restarts = max_restarts;
    result = comm::LaunchElastic(options, elastic, stderr);
  } else {
    result = comm::LaunchWithRestarts(options, max_restarts, stderr);
  }
  if (!result.ok()) {
    std::fprintf(stderr, "launch: %s\n", std::string(result.status().message()).c_str());
  }
  return comm::JobExitCode(result);
}
