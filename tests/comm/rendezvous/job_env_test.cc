// File: tests/comm/rendezvous/job_env_test.cc
//
// Table-driven parsing of the launcher conventions and their errors.
#include "comm/rendezvous/job_env.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/rendezvous/engine_master.h"
#include "gtest/gtest.h"

namespace comm {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup LookupIn(const Env& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

struct GoodCase {
  std::string name;
  Env env;
  JobEnv expected;
};

class JobEnvGood : public ::testing::TestWithParam<GoodCase> {};

TEST_P(JobEnvGood, Parses) {
  const GoodCase& c = GetParam();
  absl::StatusOr<JobEnv> env = JobEnvFromLookup(LookupIn(c.env));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, c.expected.rank);
  EXPECT_EQ(env->world_size, c.expected.world_size);
  EXPECT_EQ(env->local_rank, c.expected.local_rank);
  EXPECT_EQ(env->local_world_size, c.expected.local_world_size);
  EXPECT_EQ(env->master_addr, c.expected.master_addr);
  EXPECT_EQ(env->master_port, c.expected.master_port);
  EXPECT_EQ(env->job_token, c.expected.job_token);
  EXPECT_EQ(env->source, c.expected.source);
}

JobEnv Expect(int rank, int world, int local_rank, int local_world, std::string addr, int port,
              std::string token, std::string source) {
  JobEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = local_rank;
  env.local_world_size = local_world;
  env.master_addr = addr;
  env.master_port = port;
  env.job_token = token;
  env.source = source;
  return env;
}

INSTANTIATE_TEST_SUITE_P(
    Conventions, JobEnvGood,
    ::testing::Values(
        GoodCase{"torchrun",
                 {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                  {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"},
                  {"MASTER_PORT", "29500"}, {"FSDP_JOB_TOKEN", "tok"}},
                 Expect(3, 8, 1, 2, "node0", 29500, "tok", "torchrun")},
        GoodCase{"torchrun_token_from_master",
                 {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.1.2.3"},
                  {"MASTER_PORT", "1234"}},
                 Expect(0, 2, 0, 2, "10.1.2.3", 1234, "master-10.1.2.3:1234", "torchrun")},
        GoodCase{"world_of_one_needs_no_master",
                 {{"RANK", "0"}, {"WORLD_SIZE", "1"}},
                 Expect(0, 1, 0, 1, "127.0.0.1", 0, "master-127.0.0.1:0", "torchrun")},
        GoodCase{"mpirun",
                 {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                  {"MASTER_ADDR", "h1"}, {"MASTER_PORT", "4000"},
                  {"PMIX_NAMESPACE", "prterun-h1-123@1"}, {"FSDP_JOB_TOKEN", "s3cret"}},
                 Expect(5, 6, 2, 3, "h1", 4000, "s3cret", "mpirun")},
        GoodCase{"slurm_ntasks_per_node",
                 {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"},
                  {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_JOB_ID", "777"},
                  {"SLURM_STEP_ID", "0"}, {"MASTER_ADDR", "n0"}, {"MASTER_PORT", "29501"},
                  {"FSDP_JOB_TOKEN", "s3cret"}},
                 Expect(4, 8, 0, 4, "n0", 29501, "s3cret", "slurm")},
        GoodCase{"slurm_tasks_per_node_list",
                 {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"},
                  {"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"},
                  {"SLURM_JOB_ID", "9"}, {"SLURM_STEP_ID", "0"}, {"MASTER_ADDR", "n0"},
                  {"MASTER_PORT", "29501"},
                  {"FSDP_JOB_TOKEN", "explicit"}},
                 Expect(6, 7, 0, 1, "n0", 29501, "explicit", "slurm")},
        GoodCase{"slurm_master_from_step_node_list",
                 {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"},
                  {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_JOB_ID", "42"},
                  {"SLURM_STEP_ID", "3"}, {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                  {"SLURM_JOB_NODELIST", "gpu[01-08]"}, {"FSDP_JOB_TOKEN", "s3cret"}},
                 Expect(1, 4, 1, 2, "gpu07", DerivedPort("42.3"), "s3cret", "slurm")},
        GoodCase{"slurm_master_from_job_node_list",
                 {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                  {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_JOB_ID", "42"},
                  {"SLURM_STEP_ID", "1"}, {"SLURM_JOB_NODELIST", "a,b"},
                  {"MASTER_PORT", "29400"}},
                 Expect(0, 2, 0, 2, "a", 29400, "slurm-42-1", "slurm")},
        GoodCase{"slurm_master_addr_wins_over_node_list",
                 {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                  {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_JOB_ID", "42"},
                  {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NODELIST", "n1"},
                  {"MASTER_ADDR", "10.0.0.9"}},
                 Expect(0, 2, 0, 2, "10.0.0.9", DerivedPort("42.0"), "slurm-42-0", "slurm")},
        GoodCase{"mpirun_one_host_derives_master",
                 {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                  {"OMPI_MCA_ess_base_jobid", "440926209"},
                  {"PMIX_NAMESPACE", "440926209"}},
                 Expect(3, 4, 3, 4, "127.0.0.1", DerivedPort("440926209"),
                        "mpirun-440926209", "mpirun")},
        GoodCase{"torchrun_wins_over_slurm",
                 {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"},
                  {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}, {"FSDP_JOB_TOKEN", "t"}},
                 Expect(1, 2, 1, 2, "a", 1, "t", "torchrun")}),
    [](const ::testing::TestParamInfo<GoodCase>& info) { return info.param.name; });

struct BadCase {
  std::string name;
  Env env;
  absl::StatusCode code;
  std::vector<std::string> message_parts;  // each must appear in the error
};

class JobEnvBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(JobEnvBad, ExplainsWhatToSet) {
  const BadCase& c = GetParam();
  absl::StatusOr<JobEnv> env = JobEnvFromLookup(LookupIn(c.env));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), c.code) << env.status();
  for (const std::string& part : c.message_parts) {
    EXPECT_NE(env.status().message().find(part), absl::string_view::npos)
        << "missing '" << part << "' in: " << env.status();
  }
}

const Env kGoodTorchrun = {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"},
                           {"MASTER_PORT", "29500"}};

Env With(Env env, const std::string& key, const std::string& value) {
  env[key] = value;
  return env;
}

Env Without(Env env, const std::string& key) {
  env.erase(key);
  return env;
}

INSTANTIATE_TEST_SUITE_P(
    Errors, JobEnvBad,
    ::testing::Values(
        BadCase{"nothing", {}, absl::StatusCode::kNotFound, {"RANK", "launch"}},
        BadCase{"garbage_hang_timeout", With(kGoodTorchrun, "FSDP_HANG_TIMEOUT_S", "soon"),
                absl::StatusCode::kInvalidArgument,
                {"FSDP_HANG_TIMEOUT_S='soon'", "0 to turn hang detection off"}},
        BadCase{"negative_hang_timeout", With(kGoodTorchrun, "FSDP_HANG_TIMEOUT_S", "-3"),
                absl::StatusCode::kInvalidArgument, {"FSDP_HANG_TIMEOUT_S='-3'"}},
        BadCase{"store_bind_host_name", With(kGoodTorchrun, "FSDP_STORE_BIND", "eth0"),
                absl::StatusCode::kInvalidArgument,
                {"FSDP_STORE_BIND='eth0'", "neither 'all' nor an IPv4 address"}},
        BadCase{"store_bind_short_address", With(kGoodTorchrun, "FSDP_STORE_BIND", "10.1"),
                absl::StatusCode::kInvalidArgument, {"FSDP_STORE_BIND='10.1'"}},
        BadCase{"garbage_report_fd", With(kGoodTorchrun, "FSDP_FAILURE_REPORT_FD", "x"),
                absl::StatusCode::kInvalidArgument, {"FSDP_FAILURE_REPORT_FD='x'"}},
        BadCase{"garbage_rank", With(kGoodTorchrun, "RANK", "one"),
                absl::StatusCode::kInvalidArgument, {"RANK='one' is not an integer"}},
        BadCase{"rank_out_of_range", With(kGoodTorchrun, "RANK", "4"),
                absl::StatusCode::kInvalidArgument, {"RANK=4 is out of range [0, 3]"}},
        BadCase{"negative_rank", With(kGoodTorchrun, "RANK", "-1"),
                absl::StatusCode::kInvalidArgument, {"RANK=-1 is out of range"}},
        BadCase{"missing_world_size", Without(kGoodTorchrun, "WORLD_SIZE"),
                absl::StatusCode::kInvalidArgument, {"WORLD_SIZE is not set", "torchrun"}},
        BadCase{"zero_world_size", With(kGoodTorchrun, "WORLD_SIZE", "0"),
                absl::StatusCode::kInvalidArgument, {"WORLD_SIZE=0 is out of range"}},
        BadCase{"huge_world_size", With(kGoodTorchrun, "WORLD_SIZE", "99999999999"),
                absl::StatusCode::kInvalidArgument, {"WORLD_SIZE=99999999999"}},
        BadCase{"missing_master_addr", Without(kGoodTorchrun, "MASTER_ADDR"),
                absl::StatusCode::kInvalidArgument, {"MASTER_ADDR is not set"}},
        BadCase{"missing_master_port", Without(kGoodTorchrun, "MASTER_PORT"),
                absl::StatusCode::kInvalidArgument, {"MASTER_PORT is not set"}},
        BadCase{"port_out_of_range", With(kGoodTorchrun, "MASTER_PORT", "70000"),
                absl::StatusCode::kInvalidArgument, {"MASTER_PORT=70000 is out of range"}},
        BadCase{"port_garbage", With(kGoodTorchrun, "MASTER_PORT", "29500x"),
                absl::StatusCode::kInvalidArgument, {"MASTER_PORT='29500x'"}},
        BadCase{"local_rank_too_big",
                With(With(kGoodTorchrun, "LOCAL_WORLD_SIZE", "2"), "LOCAL_RANK", "2"),
                absl::StatusCode::kInvalidArgument, {"LOCAL_RANK=2 is out of range [0, 1]"}},
        BadCase{"mpirun_missing_size",
                {{"OMPI_COMM_WORLD_RANK", "0"}},
                absl::StatusCode::kInvalidArgument, {"OMPI_COMM_WORLD_SIZE is not set", "mpirun"}},
        BadCase{"slurm_missing_local_size",
                {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                 {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
                absl::StatusCode::kInvalidArgument, {"SLURM_NTASKS_PER_NODE"}},
        BadCase{"slurm_missing_master_addr",
                {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                 {"SLURM_NTASKS_PER_NODE", "2"}, {"MASTER_PORT", "1"}},
                absl::StatusCode::kInvalidArgument,
                {"MASTER_ADDR is not set", "scontrol show hostnames"}},
        BadCase{"mpirun_two_hosts_needs_master_addr",
                {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                 {"OMPI_MCA_ess_base_jobid", "5"}},
                absl::StatusCode::kInvalidArgument,
                {"MASTER_ADDR is not set", "more than one host", "-x MASTER_ADDR"}},
        BadCase{"slurm_no_job_id_needs_master_port",
                {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                 {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_STEP_NODELIST", "n1"}},
                absl::StatusCode::kInvalidArgument, {"MASTER_PORT is not set"}},
        BadCase{"slurm_bad_node_list",
                {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                 {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_STEP_NODELIST", "n[1-2"},
                 {"SLURM_JOB_ID", "1"}, {"SLURM_STEP_ID", "0"}},
                absl::StatusCode::kInvalidArgument, {"'n[1-2'", "without ']'", "MASTER_ADDR"}},
        // What a batch script sees (sbatch --ntasks=2, measured on Slurm 22.05):
        // no SLURM_STEP_ID, no SLURM_STEP_NODELIST.
        BadCase{"slurm_batch_script_without_srun",
                {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "0"}, {"SLURM_JOB_ID", "17"}, {"SLURM_JOB_NODELIST", "vm"},
                 {"SLURM_NODELIST", "vm"}},
                absl::StatusCode::kFailedPrecondition,
                {"SLURM_NTASKS=2", "not a task of an srun step", "job 17", "srun"}},
        BadCase{"slurm_bad_tasks_per_node",
                {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                 {"SLURM_TASKS_PER_NODE", "2(y3)"}, {"SLURM_NODEID", "0"},
                 {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
                absl::StatusCode::kInvalidArgument, {"SLURM_TASKS_PER_NODE='2(y3)'"}}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(JobEnvHangTimeout, UnsetSecondsOrOff) {
  absl::StatusOr<JobEnv> unset = JobEnvFromLookup(LookupIn(kGoodTorchrun));
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_FALSE(unset->hang_timeout.has_value());
  EXPECT_EQ(unset->failure_report_fd, -1);

  absl::StatusOr<JobEnv> set =
      JobEnvFromLookup(LookupIn(With(With(kGoodTorchrun, "FSDP_HANG_TIMEOUT_S", "2.5"),
                                     "FSDP_FAILURE_REPORT_FD", "7")));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->hang_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(set->failure_report_fd, 7);

  absl::StatusOr<JobEnv> off =
      JobEnvFromLookup(LookupIn(With(kGoodTorchrun, "FSDP_HANG_TIMEOUT_S", "0")));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->hang_timeout, absl::InfiniteDuration());
}

TEST(JobEnvStoreBind, UnsetAllOrAnAddress) {
  for (const char* value : {"", "all", "10.0.0.7", "127.0.1.1"}) {
    absl::StatusOr<JobEnv> env =
        JobEnvFromLookup(LookupIn(With(kGoodTorchrun, "FSDP_STORE_BIND", value)));
    ASSERT_TRUE(env.ok()) << value << ": " << env.status();
    EXPECT_EQ(env->store_bind, value);
  }
  absl::StatusOr<JobEnv> unset = JobEnvFromLookup(LookupIn(kGoodTorchrun));
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->store_bind, "");
}

struct HostCase {
  std::string list;
  std::string first;
};

// Under an engine serving PMIx (PMIX_RANK and PMIX_NAMESPACE) with no
// MASTER_* set, the store's address comes through PMIx: nothing is derived,
// and mpirun across hosts is no longer refused.
TEST(JobEnvPmix, StoreAddressThroughPmixUnlessMasterIsSet) {
  const Env mpirun_two_hosts = {{"OMPI_COMM_WORLD_RANK", "1"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                {"PMIX_RANK", "1"},                  {"PMIX_NAMESPACE", "prterun-h1-9@1"}};
  absl::StatusOr<JobEnv> env = JobEnvFromLookup(LookupIn(mpirun_two_hosts));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->master_from_pmix);
  EXPECT_EQ(env->master_addr, "");
  EXPECT_EQ(env->master_port, 0);
  // No secret given: rank 0 makes one during the rendezvous.
  EXPECT_EQ(env->token_source, JobTokenSource::kFromPmix);
  EXPECT_EQ(env->job_token, "");
  EXPECT_NE(DescribeJobEnv(*env).find("master through PMIx"), std::string::npos)
      << DescribeJobEnv(*env);

  // MASTER_ADDR and MASTER_PORT win over PMIx.
  absl::StatusOr<JobEnv> explicit_master = JobEnvFromLookup(LookupIn(With(
      With(With(mpirun_two_hosts, "MASTER_ADDR", "h1"), "MASTER_PORT", "29500"),
      "FSDP_JOB_TOKEN", "s3cret")));
  ASSERT_TRUE(explicit_master.ok()) << explicit_master.status();
  EXPECT_FALSE(explicit_master->master_from_pmix);
  EXPECT_EQ(explicit_master->master_addr, "h1");
  EXPECT_EQ(explicit_master->master_port, 29500);

  // srun without --mpi=pmix sets no PMIX_*: the derived store, as before.
  const Env slurm = {{"SLURM_PROCID", "0"},           {"SLURM_NTASKS", "2"},
                     {"SLURM_LOCALID", "0"},          {"SLURM_NTASKS_PER_NODE", "2"},
                     {"SLURM_STEP_NODELIST", "n1"},   {"SLURM_JOB_ID", "7"},
                     {"SLURM_STEP_ID", "0"}};
  absl::StatusOr<JobEnv> derived = JobEnvFromLookup(LookupIn(slurm));
  ASSERT_TRUE(derived.ok()) << derived.status();
  EXPECT_FALSE(derived->master_from_pmix);
  EXPECT_EQ(derived->master_addr, "n1");
  EXPECT_EQ(derived->master_port, DerivedPort("7.0"));
  absl::StatusOr<JobEnv> with_pmix = JobEnvFromLookup(
      LookupIn(With(With(slurm, "PMIX_RANK", "0"), "PMIX_NAMESPACE", "slurm.pmix.7.0")));
  ASSERT_TRUE(with_pmix.ok()) << with_pmix.status();
  EXPECT_TRUE(with_pmix->master_from_pmix);
  EXPECT_EQ(with_pmix->token_source, JobTokenSource::kFromPmix);

  // One rank needs no store at all.
  absl::StatusOr<JobEnv> alone = JobEnvFromLookup(LookupIn(
      With(With(With(With(mpirun_two_hosts, "OMPI_COMM_WORLD_SIZE", "1"), "OMPI_COMM_WORLD_RANK",
                     "0"),
                "OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
           "OMPI_COMM_WORLD_LOCAL_RANK", "0")));
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_FALSE(alone->master_from_pmix);
}

// Issue 39: a job across hosts needs a secret; one derived from public ids
// (the Slurm step, Open MPI's namespace, MASTER_ADDR) is refused, saying how
// to give one. On one host a derived token stays (the rendezvous then checks
// that the store listens on loopback).
TEST(JobEnvSecret, AJobAcrossHostsWithoutASecretIsRefused) {
  const Env slurm_two_nodes = {{"SLURM_PROCID", "1"},         {"SLURM_NTASKS", "2"},
                               {"SLURM_LOCALID", "0"},        {"SLURM_NTASKS_PER_NODE", "1"},
                               {"SLURM_STEP_NODELIST", "n[1-2]"}, {"SLURM_JOB_ID", "7"},
                               {"SLURM_STEP_ID", "0"}};
  absl::StatusOr<JobEnv> refused = JobEnvFromLookup(LookupIn(slurm_two_nodes));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  for (const char* needle : {"spans hosts", "derived from SLURM_JOB_ID and SLURM_STEP_ID",
                             "FSDP_JOB_TOKEN=$(openssl rand -hex 32)", "FSDP_JOB_TOKEN_FILE",
                             "srun --mpi=pmix"}) {
    EXPECT_NE(refused.status().message().find(needle), std::string::npos)
        << needle << " in " << refused.status().message();
  }
  const Env torchrun_two_hosts = {{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"},
                                  {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
  absl::StatusOr<JobEnv> by_hand = JobEnvFromLookup(LookupIn(torchrun_two_hosts));
  ASSERT_EQ(by_hand.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(by_hand.status().message().find("derived from MASTER_ADDR and MASTER_PORT"),
            std::string::npos)
      << by_hand.status().message();

  absl::StatusOr<JobEnv> given =
      JobEnvFromLookup(LookupIn(With(slurm_two_nodes, "FSDP_JOB_TOKEN", "s3cret")));
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->token_source, JobTokenSource::kGiven);
  EXPECT_EQ(given->job_token, "s3cret");

  absl::StatusOr<JobEnv> one_host = JobEnvFromLookup(
      LookupIn({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(one_host.ok()) << one_host.status();
  EXPECT_EQ(one_host->token_source, JobTokenSource::kDerived);
}

std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::FILE* file = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), file);
  std::fclose(file);
  chmod(path.c_str(), mode);
  return path;
}

TEST(JobEnvSecret, ATokenFileMustBeReadableOnlyByItsOwner) {
  const Env two_hosts = {{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
  const std::string private_file = WriteFile("private_token", "0123abcd\n", 0600);
  absl::StatusOr<JobEnv> env =
      JobEnvFromLookup(LookupIn(With(two_hosts, "FSDP_JOB_TOKEN_FILE", private_file)));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_token, "0123abcd");
  EXPECT_EQ(env->token_origin, absl::StrCat("FSDP_JOB_TOKEN_FILE=", private_file));

  for (mode_t mode : {0640, 0604, 0644}) {
    const std::string shared = WriteFile("shared_token", "0123abcd", mode);
    absl::StatusOr<JobEnv> refused =
        JobEnvFromLookup(LookupIn(With(two_hosts, "FSDP_JOB_TOKEN_FILE", shared)));
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
    EXPECT_NE(refused.status().message().find(absl::StrCat("chmod 600 ", shared)),
              std::string::npos)
        << refused.status().message();
  }
  const std::string empty = WriteFile("empty_token", "\n", 0600);
  EXPECT_EQ(JobEnvFromLookup(LookupIn(With(two_hosts, "FSDP_JOB_TOKEN_FILE", empty)))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JobEnvFromLookup(LookupIn(With(two_hosts, "FSDP_JOB_TOKEN_FILE", "/nonexistent")))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // FSDP_JOB_TOKEN (the launcher's) wins over a file.
  absl::StatusOr<JobEnv> both = JobEnvFromLookup(LookupIn(
      With(With(two_hosts, "FSDP_JOB_TOKEN_FILE", empty), "FSDP_JOB_TOKEN", "launcher")));
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->job_token, "launcher");
}

TEST(FirstSlurmHost, SlurmHostListForms) {
  for (const HostCase& c : std::vector<HostCase>{{"vm", "vm"},
                                                 {"a,b", "a"},
                                                 {"n[01-04,7]", "n01"},
                                                 {"n[7,1-3],m", "n7"},
                                                 {"r[1-2]-n[03-04]", "r1-n03"},
                                                 {"n[2-3]x", "n2x"},
                                                 {"node-a,node[1-2]", "node-a"}}) {
    absl::StatusOr<std::string> host = FirstSlurmHost(c.list);
    ASSERT_TRUE(host.ok()) << c.list << ": " << host.status();
    EXPECT_EQ(*host, c.first) << c.list;
  }
  for (const char* bad : {"", ",a", "n[1-2", "n]", "n[]", "n[a-b]"}) {
    absl::StatusOr<std::string> host = FirstSlurmHost(bad);
    EXPECT_EQ(host.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

TEST(DerivedPort, InRangeAndSpread) {
  std::set<int> ports;
  for (int job = 0; job < 1000; ++job) {
    const int port = DerivedPort(absl::StrCat(job, ".0"));
    EXPECT_GE(port, kDerivedPortMin);
    EXPECT_LT(port, kDerivedPortEnd);
    ports.insert(port);
  }
  EXPECT_EQ(DerivedPort("17.2"), DerivedPort("17.2"));
  EXPECT_NE(DerivedPort("17.2"), DerivedPort("17.3"));
  // 1000 jobs into 21000 ports: a uniform hash leaves about 977 distinct.
  EXPECT_GT(ports.size(), 950u);
}

}  // namespace
}  // namespace comm
