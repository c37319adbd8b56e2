// File: examples/training_job.cc
#include "examples/training_job.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace training_job {

int RunAsLaunchedRank(const char* program,
                      const std::function<absl::Status(const std::string&)>& run,
                      const std::string& config) {
  const absl::Status status = run(config);
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s rank: %s\n", program, std::string(status.message()).c_str());
  return 1;
}

std::string ReadFinalMetricsLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, final_line;
  while (std::getline(in, line)) {
    if (line.find("\"final\":true") != std::string::npos) final_line = line;
  }
  std::remove(path.c_str());
  return final_line;
}

double JsonNumberField(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? -1.0 : std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

}  // namespace training_job
