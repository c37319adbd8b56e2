// File: comm/rendezvous/job_env.cc
#include "comm/rendezvous/job_env.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "comm/rendezvous/engine_master.h"
#include "comm/rendezvous/job_secret.h"

namespace comm {
namespace {

// The variable names of one launcher convention.
struct Convention {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr Convention kTorchrun = {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                  "LOCAL_WORLD_SIZE"};
constexpr Convention kMpirun = {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr Convention kSlurm = {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                               "SLURM_NTASKS_PER_NODE"};

// Parses `name`'s value as an integer in [min_value, max_value].
absl::StatusOr<int> ParseIntVar(const std::string& name, const std::string& value,
                                int64_t min_value, int64_t max_value,
                                const std::string& meaning) {
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", value, "' is not an integer; set ", name, " to ",
                     meaning));
  }
  if (parsed < min_value || parsed > max_value) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", parsed, " is out of range [", min_value, ", ", max_value,
                     "]; set ", name, " to ", meaning));
  }
  return static_cast<int>(parsed);
}

absl::StatusOr<int> RequireIntVar(const EnvLookup& lookup, const std::string& name,
                                  int64_t min_value, int64_t max_value,
                                  const std::string& meaning, const char* source) {
  std::optional<std::string> value = lookup(name);
  if (!value.has_value() || value->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is not set but the environment looks like ", source,
        "'s; set ", name, " to ", meaning));
  }
  return ParseIntVar(name, *value, min_value, max_value, meaning);
}

// Slurm's SLURM_TASKS_PER_NODE is like "2(x3),1": 2 tasks on each of the first
// three nodes, 1 on the fourth. Returns the count for node `node_id`.
absl::StatusOr<int> TasksOnNode(const std::string& tasks_per_node, int node_id) {
  const std::string what =
      absl::StrCat("SLURM_TASKS_PER_NODE='", tasks_per_node, "'");
  int node = 0;
  for (absl::string_view group : absl::StrSplit(tasks_per_node, ',')) {
    int tasks = 0;
    int repeat = 1;
    size_t paren = group.find("(x");
    absl::string_view count_text = group.substr(0, paren);
    if (!absl::SimpleAtoi(count_text, &tasks) || tasks < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is not in Slurm's \"N(xM),K\" form; set "
                       "SLURM_NTASKS_PER_NODE to the number of tasks on this node"));
    }
    if (paren != absl::string_view::npos) {
      absl::string_view rest = group.substr(paren + 2);
      if (rest.empty() || rest.back() != ')' ||
          !absl::SimpleAtoi(rest.substr(0, rest.size() - 1), &repeat) || repeat < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " is not in Slurm's \"N(xM),K\" form; set "
                         "SLURM_NTASKS_PER_NODE to the number of tasks on this node"));
      }
    }
    if (node_id < node + repeat) return tasks;
    node += repeat;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, " lists ", node, " nodes but SLURM_NODEID=", node_id,
      "; set SLURM_NTASKS_PER_NODE to the number of tasks on this node"));
}

absl::StatusOr<int> SlurmLocalWorldSize(const EnvLookup& lookup) {
  std::optional<std::string> per_node = lookup("SLURM_NTASKS_PER_NODE");
  if (per_node.has_value() && !per_node->empty()) {
    return ParseIntVar("SLURM_NTASKS_PER_NODE", *per_node, 1, kMaxWorldSize,
                       "the number of tasks on this node");
  }
  std::optional<std::string> tasks = lookup("SLURM_TASKS_PER_NODE");
  std::optional<std::string> node_id = lookup("SLURM_NODEID");
  if (!tasks.has_value() || !node_id.has_value()) {
    return absl::InvalidArgumentError(
        "neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE+SLURM_NODEID is set; "
        "run under srun, or set SLURM_NTASKS_PER_NODE to the number of tasks on this "
        "node");
  }
  FSDP_ASSIGN_OR_RETURN(int node, ParseIntVar("SLURM_NODEID", *node_id, 0, kMaxWorldSize,
                                              "this node's index in the allocation"));
  return TasksOnNode(*tasks, node);
}

std::string NonEmpty(const EnvLookup& lookup, const char* name) {
  std::optional<std::string> value = lookup(name);
  return value.has_value() ? *value : std::string();
}

}  // namespace

absl::StatusOr<JobEnv> JobEnvFromLookup(const EnvLookup& lookup) {
  const Convention* convention = nullptr;
  for (const Convention* candidate : {&kTorchrun, &kMpirun, &kSlurm}) {
    if (lookup(candidate->rank).has_value()) {
      convention = candidate;
      break;
    }
  }
  if (convention == nullptr) {
    return absl::NotFoundError(
        "no launcher environment found (none of RANK, OMPI_COMM_WORLD_RANK, "
        "SLURM_PROCID is set); start the program with //comm/launcher:launch "
        "--nproc N -- <program>, torchrun, mpirun or srun, or set RANK, WORLD_SIZE, "
        "MASTER_ADDR and MASTER_PORT yourself");
  }
  const char* source = convention->source;
  JobEnv env;
  env.source = source;
  FSDP_ASSIGN_OR_RETURN(env.world_size,
                        RequireIntVar(lookup, convention->world_size, 1, kMaxWorldSize,
                                      "the number of ranks in the job", source));
  FSDP_ASSIGN_OR_RETURN(
      env.rank, RequireIntVar(lookup, convention->rank, 0, env.world_size - 1,
                              absl::StrCat("this process's rank, below ",
                                           convention->world_size, "=", env.world_size),
                              source));

  // A batch script (or an salloc shell) also sees SLURM_PROCID=0 and the
  // job's SLURM_NTASKS, but it is no task of a step: srun sets SLURM_STEP_ID.
  // Running the program there as rank 0 of N would wait out the rendezvous
  // timeout for ranks nobody starts.
  if (convention == &kSlurm && env.world_size > 1 && !lookup("SLURM_STEP_ID").has_value() &&
      lookup("SLURM_JOB_ID").has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SLURM_NTASKS=", env.world_size, " but this process is not a task of an srun step "
        "(SLURM_STEP_ID is not set: it runs in the batch script or salloc shell of job ",
        NonEmpty(lookup, "SLURM_JOB_ID"), "); start it with srun (e.g. `srun ",
        "<program> ...` in the batch script), or set WORLD_SIZE=1 RANK=0 to run one process"));
  }

  // Local rank/size only choose a device; without them the job is taken to be
  // on one host.
  if (convention == &kSlurm) {
    FSDP_ASSIGN_OR_RETURN(env.local_world_size, SlurmLocalWorldSize(lookup));
  } else if (lookup(convention->local_world_size).has_value()) {
    FSDP_ASSIGN_OR_RETURN(
        env.local_world_size,
        RequireIntVar(lookup, convention->local_world_size, 1, env.world_size,
                      "the number of ranks on this host", source));
  } else {
    env.local_world_size = env.world_size;
  }
  if (lookup(convention->local_rank).has_value()) {
    FSDP_ASSIGN_OR_RETURN(
        env.local_rank,
        RequireIntVar(lookup, convention->local_rank, 0, env.local_world_size - 1,
                      absl::StrCat("this process's rank on its host, below the local "
                                   "world size ",
                                   env.local_world_size),
                      source));
  } else if (convention == &kSlurm) {
    return absl::InvalidArgumentError(
        "SLURM_LOCALID is not set; run under srun, which sets it");
  } else {
    env.local_rank = env.rank;
    if (env.local_rank >= env.local_world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          convention->local_rank, " is not set and ", convention->rank, "=", env.rank,
          " is not below ", convention->local_world_size, "=", env.local_world_size,
          "; set ", convention->local_rank));
    }
  }

  // Where rank 0 hosts the rendezvous store: MASTER_ADDR/MASTER_PORT, else
  // derived from the engine (comm/rendezvous/engine_master.h).
  env.master_addr = NonEmpty(lookup, "MASTER_ADDR");
  std::string port = NonEmpty(lookup, "MASTER_PORT");
  const std::string slurm_job = NonEmpty(lookup, "SLURM_JOB_ID");
  std::string mpirun_job = NonEmpty(lookup, "OMPI_MCA_ess_base_jobid");
  if (mpirun_job.empty()) mpirun_job = NonEmpty(lookup, "PMIX_NAMESPACE");
  env.master_from_pmix = env.world_size > 1 && env.master_addr.empty() && port.empty() &&
                         !NonEmpty(lookup, "PMIX_RANK").empty() &&
                         !NonEmpty(lookup, "PMIX_NAMESPACE").empty();
  if (env.master_from_pmix) {
    // Nothing to derive: rank 0 publishes where its store listens.
  } else if (env.world_size > 1 && env.master_addr.empty()) {
    if (convention == &kSlurm) {
      std::string node_list = NonEmpty(lookup, "SLURM_STEP_NODELIST");
      if (node_list.empty()) node_list = NonEmpty(lookup, "SLURM_JOB_NODELIST");
      if (!node_list.empty()) {
        FSDP_ASSIGN_OR_RETURN(env.master_addr, FirstSlurmHost(node_list));
      }
    } else if (convention == &kMpirun && env.local_world_size == env.world_size) {
      env.master_addr = "127.0.0.1";  // every rank on this host
    }
  }
  if (env.world_size > 1 && port.empty() && !env.master_from_pmix) {
    if (convention == &kSlurm && !slurm_job.empty()) {
      port = absl::StrCat(
          DerivedPort(absl::StrCat(slurm_job, ".", NonEmpty(lookup, "SLURM_STEP_ID"))));
    } else if (convention == &kMpirun && !mpirun_job.empty()) {
      port = absl::StrCat(DerivedPort(mpirun_job));
    }
  }
  if (env.world_size > 1 && !env.master_from_pmix) {
    if (env.master_addr.empty()) {
      std::string hint = "export MASTER_ADDR=<host of rank 0>";
      if (convention == &kSlurm) {
        hint = "run under srun, which sets SLURM_STEP_NODELIST, or e.g. export "
               "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) "
               "in the batch script";
      } else if (convention == &kMpirun) {
        hint = absl::StrCat(
            "the ranks are on more than one host (OMPI_COMM_WORLD_LOCAL_SIZE=",
            env.local_world_size, " of OMPI_COMM_WORLD_SIZE=", env.world_size,
            "), so pass the first host of the hostfile: mpirun -x MASTER_ADDR=<host>");
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "MASTER_ADDR is not set; set it to the host name or address of rank 0 (", hint,
          ")"));
    }
    if (port.empty()) {
      return absl::InvalidArgumentError(
          "MASTER_PORT is not set; set it to a free TCP port on rank 0's host, the "
          "same on every rank (e.g. 29500)");
    }
  }
  if (env.master_addr.empty() && !env.master_from_pmix) env.master_addr = "127.0.0.1";
  if (!port.empty()) {
    FSDP_ASSIGN_OR_RETURN(
        env.master_port,
        ParseIntVar("MASTER_PORT", port, 1, 65535,
                    "a free TCP port on rank 0's host, the same on every rank"));
  }

  const std::string token_file = NonEmpty(lookup, "FSDP_JOB_TOKEN_FILE");
  env.job_token = NonEmpty(lookup, "FSDP_JOB_TOKEN");
  if (!env.job_token.empty()) {
    env.token_origin = "FSDP_JOB_TOKEN";
  } else if (!token_file.empty()) {
    FSDP_ASSIGN_OR_RETURN(env.job_token, ReadJobTokenFile(token_file));
    env.token_origin = absl::StrCat("FSDP_JOB_TOKEN_FILE=", token_file);
  } else if (env.master_from_pmix) {
    env.token_source = JobTokenSource::kFromPmix;
    env.token_origin = "made by rank 0 and published through PMIx";
  } else {
    env.token_source = JobTokenSource::kDerived;
    std::string pmix_namespace = NonEmpty(lookup, "PMIX_NAMESPACE");
    std::string ompi_job = NonEmpty(lookup, "OMPI_MCA_ess_base_jobid");
    if (convention == &kSlurm && !slurm_job.empty()) {
      env.job_token = absl::StrCat("slurm-", slurm_job, "-", NonEmpty(lookup, "SLURM_STEP_ID"));
      env.token_origin = "derived from SLURM_JOB_ID and SLURM_STEP_ID";
    } else if (convention == &kMpirun && !pmix_namespace.empty()) {
      env.job_token = absl::StrCat("mpirun-", pmix_namespace);
      env.token_origin = "derived from PMIX_NAMESPACE";
    } else if (convention == &kMpirun && !ompi_job.empty()) {
      env.job_token = absl::StrCat("mpirun-", ompi_job);
      env.token_origin = "derived from OMPI_MCA_ess_base_jobid";
    } else {
      env.job_token = absl::StrCat("master-", env.master_addr, ":", env.master_port);
      env.token_origin = "derived from MASTER_ADDR and MASTER_PORT";
    }
    if (env.world_size > env.local_world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the job spans hosts (", env.world_size, " ranks, ", env.local_world_size,
          " on this host) but has no secret: its job token would be ", env.token_origin,
          ", which anyone on the cluster can read, so anyone could join it, abort it or "
          "pose as its rendezvous store; ", kHowToGiveASecret));
    }
  }

  if (std::optional<std::string> hang = lookup("FSDP_HANG_TIMEOUT_S");
      hang.has_value() && !hang->empty()) {
    double seconds = 0;
    if (!absl::SimpleAtod(*hang, &seconds) || !(seconds >= 0) || seconds > 1e9) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FSDP_HANG_TIMEOUT_S='", *hang,
          "' is not a number of seconds >= 0; set it to the hang bound (e.g. 20), or 0 to "
          "turn hang detection off"));
    }
    env.hang_timeout = seconds == 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
  }
  if (std::optional<std::string> fd = lookup("FSDP_FAILURE_REPORT_FD");
      fd.has_value() && !fd->empty()) {
    FSDP_ASSIGN_OR_RETURN(
        env.failure_report_fd,
        ParseIntVar("FSDP_FAILURE_REPORT_FD", *fd, 0, 1 << 20,
                    "the launcher's report pipe (it sets this itself; unset it otherwise)"));
  }
  if (std::optional<std::string> bind = lookup("FSDP_STORE_BIND");
      bind.has_value() && !bind->empty()) {
    in_addr parsed = {};
    if (*bind != "all" && inet_pton(AF_INET, bind->c_str(), &parsed) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FSDP_STORE_BIND='", *bind,
          "' is neither 'all' nor an IPv4 address; unset it to listen on MASTER_ADDR's "
          "interface, or set it to 'all' or to one of rank 0's addresses"));
    }
    env.store_bind = *bind;
  }
  return env;
}

absl::StatusOr<JobEnv> JobEnvFromEnvironment() {
  return JobEnvFromLookup([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

std::string DescribeJobEnv(const JobEnv& env) {
  return absl::StrCat("rank ", env.rank, " of ", env.world_size, " (local ",
                      env.local_rank, " of ", env.local_world_size, ", from ",
                      env.source, "), master ",
                      env.master_from_pmix && env.master_port == 0
                          ? std::string("through PMIx")
                          : absl::StrCat(env.master_addr, ":", env.master_port));
}

}  // namespace comm
