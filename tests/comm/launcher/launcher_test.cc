// File: tests/comm/launcher/launcher_test.cc
//
// The launch binary as a user runs it (a real process whose output is
// captured), plus the library's small helpers.
#include "comm/launcher/launcher.h"

#include "comm/launcher/failure_report.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/comm/rendezvous/rank_processes.h"

namespace comm::testing {
namespace {

const char kLaunch[] = "comm/launcher/launch";
const char kProgram[] = "tests/comm/launcher/launched_program";

std::vector<std::string> LaunchArgs(int nproc, std::vector<std::string> program_args,
                                    int grace_seconds = 3) {
  std::vector<std::string> args = {"--nproc", std::to_string(nproc), "--grace_seconds",
                                   std::to_string(grace_seconds), "--",
                                   RunfilePath(kProgram)};
  args.insert(args.end(), program_args.begin(), program_args.end());
  return args;
}

std::string Describe(const ProcessResult& result) {
  return absl::StrCat("exit=", result.exit_code, " signal=", result.signal,
                      " timed_out=", result.timed_out, "\nstdout: ", result.out.substr(0, 2000),
                      "\nstderr: ", result.err);
}

TEST(Launch, PrefixesWholeLinesAndSetsTheEnvironment) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), LaunchArgs(3, {"print"}), {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  ASSERT_EQ(result.exit_code, 0) << Describe(result);

  const std::regex line_pattern(R"(\[rank (\d)\] rank (\d) line (\d+) x{300})");
  const std::regex env_pattern(
      R"(\[rank (\d)\] env rank=(\d) world=3 local_rank=(\d) local_world=3 addr=127\.0\.0\.1 port=(\d+) token=(\S+))");
  std::set<std::string> ports, tokens;
  std::vector<int> lines_per_rank(3, 0);
  int env_lines = 0;
  for (absl::string_view line : absl::StrSplit(result.out, '\n', absl::SkipEmpty())) {
    const std::string text(line);
    std::smatch match;
    if (std::regex_match(text, match, line_pattern)) {
      EXPECT_EQ(match[1], match[2]) << "a line under the wrong prefix: " << text;
      ++lines_per_rank[std::stoi(match[1])];
    } else if (std::regex_match(text, match, env_pattern)) {
      EXPECT_EQ(match[1], match[2]);
      EXPECT_EQ(match[2], match[3]);
      ports.insert(match[4]);
      tokens.insert(match[5]);
      ++env_lines;
    } else {
      EXPECT_TRUE(std::regex_match(text, std::regex(R"(\[rank (\d)\] tail of rank \1)")))
          << "unexpected (mixed or unprefixed?) line: " << text;
    }
  }
  EXPECT_EQ(lines_per_rank, std::vector<int>({200, 200, 200}));
  EXPECT_EQ(env_lines, 3);
  EXPECT_EQ(ports.size(), 1u);  // one MASTER_PORT for the job
  EXPECT_EQ(tokens.size(), 1u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(Contains(result.err, absl::StrCat("[rank ", r, "] rank ", r,
                                                  " says this on stderr\n")));
    EXPECT_TRUE(Contains(result.out, absl::StrCat("[rank ", r, "] tail of rank ", r, "\n")));
  }
}

TEST(Launch, FailingRankStopsTheOthersAndIsNamed) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), LaunchArgs(3, {"fail", "1", "3"}), {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 3) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "rank 1 exited with code 3"));
  EXPECT_LT(result.elapsed, absl::Seconds(10));  // the sleepers did not run out their 60 s
}

TEST(Launch, MaxRestartsRunsTheJobAgainAfterAFailure) {
  RankProcesses processes;
  std::vector<std::string> args = {"--max_restarts", "2"};
  for (const std::string& a : LaunchArgs(2, {"fail_until", "2"})) args.push_back(a);
  processes.Start(RunfilePath(kLaunch), args, {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  for (int attempt = 0; attempt <= 2; ++attempt) {
    EXPECT_TRUE(Contains(result.out, absl::StrCat("[rank 1] attempt ", attempt))) << Describe(result);
  }
  EXPECT_TRUE(Contains(result.err, "rank 1 exited with code 1")) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "restarting every rank (restart 2 of 2)")) << Describe(result);
}

TEST(Launch, UsedUpRestartsNameTheRankAndTheCause) {
  RankProcesses processes;
  std::vector<std::string> args = {"--max_restarts", "1"};
  for (const std::string& a : LaunchArgs(2, {"fail_until", "5"})) args.push_back(a);
  processes.Start(RunfilePath(kLaunch), args, {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 1) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "restart 1 of 1")) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "launch: rank 1 exited with code 1")) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "(after 1 restart)")) << Describe(result);
  EXPECT_FALSE(Contains(result.out, "attempt 2")) << Describe(result);
}

TEST(Launch, AnElasticJobGoesOnWithoutAFailedRankAndGrowsBack) {
  RankProcesses processes;
  std::vector<std::string> args = {"--min_nproc", "2"};
  for (const std::string& a : LaunchArgs(3, {"elastic"})) args.push_back(a);
  processes.Start(RunfilePath(kLaunch), args, {});
  ProcessResult result = processes.Wait(0, absl::Seconds(60));
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  for (const char* line :
       {"[rank 2] attempt 0 world 3", "[rank 1] attempt 1 world 2", "[rank 2] attempt 2 world 3"}) {
    EXPECT_TRUE(Contains(result.out, line)) << line << "\n" << Describe(result);
  }
  EXPECT_FALSE(Contains(result.out, "[rank 2] attempt 1")) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "going on without rank 2's slot: 2 ranks (--min_nproc=2)"))
      << Describe(result);
  EXPECT_TRUE(Contains(result.err, "for 1 slot that came back; going on with 3 ranks (from 2)"))
      << Describe(result);
}

TEST(Launch, AnElasticJobAtItsMinimumStopsAndSaysWhy) {
  RankProcesses processes;
  std::vector<std::string> args = {"--min_nproc", "2"};
  for (const std::string& a : LaunchArgs(2, {"signal", "1"})) args.push_back(a);
  processes.Start(RunfilePath(kLaunch), args, {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "rank 1 was killed by signal 9")) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "(the job ran 2 ranks, --min_nproc=2: no rank to spare)"))
      << Describe(result);

  RankProcesses bad;
  std::vector<std::string> bad_args = {"--min_nproc", "3"};
  for (const std::string& a : LaunchArgs(2, {"print"})) bad_args.push_back(a);
  bad.Start(RunfilePath(kLaunch), bad_args, {});
  ProcessResult refused = bad.Wait(0, absl::Seconds(30));
  EXPECT_NE(refused.exit_code, 0) << Describe(refused);
  EXPECT_TRUE(Contains(refused.err, "--min_nproc=3 must be between 1 and --nproc=2"))
      << Describe(refused);
}

TEST(Launch, RankKilledBySignalIsNamed) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), LaunchArgs(2, {"signal", "0"}), {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "rank 0 was killed by signal 9"));
  EXPECT_LT(result.elapsed, absl::Seconds(10));
}

// A survivor reports the rank it found hung before it exits: the launcher
// names that rank as the root cause, not the survivor that exited first.
TEST(Launch, ReportedRootCauseIsNamedRatherThanTheFirstRankToExit) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), LaunchArgs(4, {"report", "3", "4"}), {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 4) << Describe(result);  // still the first failure's code
  EXPECT_TRUE(Contains(result.err,
                       "[launcher] rank 0 exited with code 4; root cause: rank 3 is hung: "
                       "test report (reported by rank 0); stopping the other ranks"));
  EXPECT_TRUE(Contains(result.err,
                       "launch: rank 3 is hung: test report (reported by rank 0): the root "
                       "cause; rank 0 exited with code 4 (the first rank to exit)"));
  EXPECT_LT(result.elapsed, absl::Seconds(10));
}

// Without any report (hang detection off), a stopped rank is the suspect; and
// the launcher still ends it (SIGKILL: stopped, it cannot act on SIGTERM).
TEST(Launch, StoppedRankIsNamedAndStillEndedWhenAnotherFails) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), LaunchArgs(3, {"stop", "2", "6"}), {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 6) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "[launcher] rank 2 was stopped by signal 19"));
  EXPECT_TRUE(Contains(result.err, "launch: rank 2 was stopped (signal 19"));
  EXPECT_TRUE(Contains(result.err, "when rank 0 exited with code 6: the stopped rank is the "
                                   "likely root cause"));
  EXPECT_FALSE(result.timed_out) << "the launcher waited on its stopped rank";
  EXPECT_LT(result.elapsed, absl::Seconds(10));
}

TEST(Launch, RanksIgnoringSigtermAreKilledAfterTheGrace) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), LaunchArgs(3, {"stubborn", "2", "5"}, 1), {});
  ProcessResult result = processes.Wait(0, absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 5) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "rank 2 exited with code 5"));
  EXPECT_LT(result.elapsed, absl::Seconds(10));
}

bool ProcessGone(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return true;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close_paren = text.rfind(')');
  return close_paren != std::string::npos && text.substr(close_paren + 2, 1) == "Z";
}

TEST(Launch, SigtermToTheLauncherStopsAllRanks) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), LaunchArgs(2, {"sleep"}), {});
  ASSERT_TRUE(processes.WaitForStdout(0, "[rank 0] READY", absl::Seconds(20)));
  ASSERT_TRUE(processes.WaitForStdout(0, "[rank 1] READY", absl::Seconds(20)));
  std::vector<int> pids;
  const std::string out = processes.StdoutSoFar(0);
  const std::regex ready(R"(READY (\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), ready), end;
       it != end; ++it) {
    pids.push_back(std::stoi((*it)[1]));
  }
  ASSERT_EQ(pids.size(), 2u);
  processes.Kill(0, SIGTERM);
  ProcessResult result = processes.Wait(0, absl::Seconds(20));
  EXPECT_EQ(result.exit_code, 130) << Describe(result);
  EXPECT_TRUE(Contains(result.err, "stopping all ranks"));
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (int pid : pids) {
    while (!ProcessGone(pid) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    EXPECT_TRUE(ProcessGone(pid)) << "rank process " << pid << " outlived the launcher";
  }
}

TEST(Launch, BadCommandLineIsExplained) {
  RankProcesses processes;
  processes.Start(RunfilePath(kLaunch), {"--nproc", "0", "--", "true"}, {});
  ProcessResult result = processes.Wait(0, absl::Seconds(10));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(Contains(result.err, "--nproc N (N >= 1) is required"));
}

TEST(LauncherLibrary, FailureReportsRoundTripInOneShortLine) {
  FailureReport report{3, "hung", 1, "rank 3 is hung: no heartbeat\nfor 3s"};
  const std::string line = FormatFailureReport(report);
  EXPECT_EQ(line, "fsdp-failure culprit=3 kind=hung reporter=1 rank 3 is hung: no heartbeat "
                  "for 3s\n");
  std::optional<FailureReport> parsed = ParseFailureReport(line);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->culprit, 3);
  EXPECT_EQ(parsed->kind, "hung");
  EXPECT_EQ(parsed->reporter, 1);
  EXPECT_EQ(parsed->message, "rank 3 is hung: no heartbeat for 3s");

  report.message = std::string(10000, 'x');
  EXPECT_EQ(FormatFailureReport(report).size(), kMaxReportBytes);
  EXPECT_FALSE(ParseFailureReport("[rank 2] some output").has_value());
  EXPECT_FALSE(ParseFailureReport("fsdp-failure culprit=x kind=hung reporter=1 m").has_value());
  // Found by //comm/launcher:failure_report_fuzz_test: a kind that is not one
  // (here with a newline in it) and a second line inside are refused.
  EXPECT_FALSE(ParseFailureReport("fsdp-failure culprit=3 kind=hu\nng reporter=1 m").has_value());
  EXPECT_FALSE(ParseFailureReport("fsdp-failure culprit=3 kind=lost reporter=1 m").has_value());
  EXPECT_FALSE(
      ParseFailureReport("fsdp-failure culprit=3 kind=hung reporter=1 m\nfsdp-failure x\n")
          .has_value());
}

// Ports come from below the ephemeral range (no other process's port-0
// socket can take them between the pick and rank 0's bind), vary, and are
// free.
TEST(LauncherLibrary, PickFreePortAvoidsTheEphemeralRange) {
  int ephemeral_start = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> ephemeral_start;
  std::set<int> ports;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<int> port = PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, 1024);
    EXPECT_LT(*port, ephemeral_start);
    ports.insert(*port);
  }
  EXPECT_GT(ports.size(), 1u);
}

TEST(LauncherLibrary, Helpers) {
  LaunchOptions bad;
  bad.nproc = 2;
  EXPECT_EQ(LaunchLocalRanks(bad).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> self = SelfExecutablePath();
  ASSERT_TRUE(self.ok());
  EXPECT_TRUE(Contains(*self, "launcher_test"));
  char arg0[] = "prog";
  char arg1[] = "--flag";
  char* argv[] = {arg0, arg1};
  LaunchOptions options = SelfLaunchOptions(4, 2, argv);
  EXPECT_EQ(options.nproc, 4);
  EXPECT_EQ(options.argv, std::vector<std::string>({*self, "--flag"}));
  EXPECT_EQ(JobExitCode(absl::StatusOr<int>(0)), 0);
  EXPECT_EQ(JobExitCode(absl::StatusOr<int>(absl::CancelledError("x"))), 130);
}

TEST(LauncherLibrary, LaunchLocalRanksReturnsTheJobResult) {
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {"/bin/sh", "-c", "test \"$EXTRA\" = yes && exit $((RANK * 4))"};
  options.extra_env = {{"EXTRA", "yes"}};
  absl::StatusOr<int> result = LaunchLocalRanks(options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(Contains(std::string(result.status().message()), "rank 1 exited with code 4"));
  EXPECT_EQ(JobExitCode(result), 4);
  options.argv = {"/bin/sh", "-c", "test \"$EXTRA\" = yes"};
  result = LaunchLocalRanks(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, 0);
}


// The descriptors open in this process, by number.
std::set<int> OpenDescriptors() {
  std::set<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (absl::SimpleAtoi(entry->d_name, &fd) && fd != own) fds.insert(fd);
  }
  closedir(dir);
  return fds;
}

// Every way LaunchLocalRanks ends closes what it opened: a job that runs, one
// that fails, and one whose second pipe for a rank cannot be created (the
// descriptor limit leaves room for exactly the signal pipe, the report pipe
// and the rank's stdout pipe; its stdout pipe used to leak there).
TEST(LauncherLibrary, LaunchLocalRanksLeavesNoDescriptorOpen) {
  LaunchOptions options;
  options.nproc = 2;
  options.master_port = 29999;  // no port probe: only the launcher's own pipes
  options.argv = {"/bin/sh", "-c", "exit $RANK"};
  const std::set<int> before = OpenDescriptors();
  EXPECT_FALSE(LaunchLocalRanks(options).ok());
  EXPECT_EQ(OpenDescriptors(), before);
  options.argv = {"/bin/true"};
  EXPECT_TRUE(LaunchLocalRanks(options).ok());
  EXPECT_EQ(OpenDescriptors(), before);

  // RLIMIT_NOFILE bounds descriptor numbers; new ones take the lowest free.
  int free_seen = 0, limit = 0;
  for (int fd = 0; free_seen < 6; ++fd) {
    if (before.count(fd) == 0) ++free_seen;
    limit = fd + 1;
  }
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  struct rlimit small = saved;
  small.rlim_cur = static_cast<rlim_t>(limit);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &small), 0);
  const absl::StatusOr<int> starved = LaunchLocalRanks(options);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_FALSE(starved.ok());
  EXPECT_TRUE(Contains(std::string(starved.status().message()), "pipe: Too many open files"))
      << starved.status();
  EXPECT_EQ(OpenDescriptors(), before);
}

TEST(LauncherLibrary, CoresForRankSharesTheCpus) {
  const std::vector<int> four = {0, 1, 2, 3};
  EXPECT_EQ(CoresForRank(four, 0, 2), std::vector<int>({0, 1}));
  EXPECT_EQ(CoresForRank(four, 1, 2), std::vector<int>({2, 3}));
  EXPECT_EQ(CoresForRank(four, 2, 3), std::vector<int>({2, 3}));  // 4/3: 1, 1, 2 CPUs
  EXPECT_EQ(CoresForRank(four, 0, 3), std::vector<int>({0}));
  const std::vector<int> two = {4, 6};  // not numbered from 0
  EXPECT_EQ(CoresForRank(two, 0, 4), std::vector<int>({4}));  // oversubscribed: round robin
  EXPECT_EQ(CoresForRank(two, 3, 4), std::vector<int>({6}));
  EXPECT_TRUE(CoresForRank({}, 0, 2).empty());
  // Every CPU goes to exactly one rank when nproc <= CPUs.
  const std::vector<int> seven = {0, 1, 2, 3, 4, 5, 6};
  for (int n = 1; n <= 7; ++n) {
    std::vector<int> all;
    for (int r = 0; r < n; ++r) {
      std::vector<int> share = CoresForRank(seven, r, n);
      EXPECT_FALSE(share.empty()) << "n=" << n << " r=" << r;
      all.insert(all.end(), share.begin(), share.end());
    }
    EXPECT_EQ(all, seven) << "n=" << n;
  }
}

// Each bound rank sees exactly its share: `nproc` (coreutils) counts the
// CPUs a process may run on.
TEST(LauncherLibrary, BindToCoresPinsEachRank) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  absl::StatusOr<std::vector<int>> listed = AllowedCpus();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, cpus);
  for (int nproc : {2, 3}) {
    LaunchOptions options;
    options.nproc = nproc;
    options.bind_to_cores = true;
    for (int r = 0; r < nproc; ++r) {
      options.extra_env[absl::StrCat("EXPECTED_", r)] =
          std::to_string(CoresForRank(cpus, r, nproc).size());
    }
    options.argv = {"/bin/sh", "-c", "test \"$(nproc)\" = \"$(eval echo \\$EXPECTED_$RANK)\""};
    absl::StatusOr<int> result = LaunchLocalRanks(options);
    ASSERT_TRUE(result.ok()) << "nproc " << nproc << ": " << result.status();
    EXPECT_EQ(*result, 0);
  }
}

}  // namespace
}  // namespace comm::testing
