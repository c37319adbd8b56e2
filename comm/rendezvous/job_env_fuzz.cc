// File: comm/rendezvous/job_env_fuzz.cc
//
// libFuzzer target for the job-environment parser (job_env.h) and the Slurm
// host-list reader it uses (engine_master.h): the input is an environment,
// one NAME=VALUE per line. Whatever is accepted must be a consistent job:
// rank below world size, local rank below local world size, a port in range
// (or 0 for a world of one), a master and a token.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_split.h"
#include "comm/rendezvous/engine_master.h"
#include "comm/rendezvous/job_env.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  absl::StatusOr<comm::JobEnv> job =
      comm::JobEnvFromLookup([&env](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      });
  if (job.ok()) {
    Check(job->world_size >= 1 && job->world_size <= comm::kMaxWorldSize);
    Check(job->rank >= 0 && job->rank < job->world_size);
    Check(job->local_world_size >= 1);
    Check(job->local_rank >= 0 && job->local_rank < job->local_world_size);
    Check(job->master_port >= 0 && job->master_port <= 65535);
    Check(job->world_size == 1 || job->master_port >= 1);
    Check(!job->master_addr.empty());
    Check(!job->job_token.empty());
    Check(!comm::DescribeJobEnv(*job).empty());
  } else {
    Check(!job.status().message().empty());
  }
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}) {
    auto it = env.find(name);
    if (it == env.end()) continue;
    absl::StatusOr<std::string> host = comm::FirstSlurmHost(it->second);
    Check(!host.ok() || (!host->empty() && host->size() <= it->second.size()));
  }
  const int port = comm::DerivedPort(text);
  Check(port >= comm::kDerivedPortMin && port < comm::kDerivedPortEnd);
  return 0;
}
