// File: examples/training_job.cc
#include "examples/training_job.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

std::string CpuLine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU", flags;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") {
      model = line.substr(line.find(':') + 2);
    }
    if (line.rfind("flags", 0) == 0 && flags.empty()) flags = line;
  }
  std::vector<std::string> present;
  for (const char* f : {"avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"}) {
    if (flags.find(absl::StrCat(" ", f, " ")) != std::string::npos ||
        (flags.size() > strlen(f) && flags.compare(flags.size() - strlen(f), strlen(f), f) == 0)) {
      present.push_back(f);
    }
  }
  return absl::StrCat(model, " [", absl::StrJoin(present, " "), "]");
}

}  // namespace training_job
