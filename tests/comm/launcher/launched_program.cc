// File: tests/comm/launcher/launched_program.cc
//
// What the launcher tests launch. Usage: launched_program <mode> [args]:
//   print              prints its environment summary, 200 long lines on
//                      stdout, a line on stderr, and an unterminated "tail"
//   fail RANK CODE     rank RANK exits CODE after 300 ms; the others print
//                      READY and sleep 60 s
//   signal RANK        rank RANK kills itself with SIGKILL after 300 ms;
//                      the others sleep
//   stubborn RANK CODE like fail, but the others ignore SIGTERM
//   sleep              prints "READY <pid>" and sleeps 60 s
//   report RANK CODE   rank 0 reports (FSDP_FAILURE_REPORT_FD) that rank RANK
//                      is hung, then exits CODE after 300 ms; the others sleep
//   stop RANK CODE     rank RANK stops itself (SIGSTOP); rank 0 exits CODE
//                      after 500 ms without a report; the others sleep
//   elastic            for an elastic launch, by FSDP_RESTART_COUNT: in
//                      attempt 0 the last rank kills itself (SIGKILL) after
//                      300 ms; in attempt 1 rank 0 says a slot came back
//                      (SIGUSR1 to the launcher) and every rank exits 75 on
//                      the launcher's SIGUSR1; attempt 2 exits 0. Each
//                      prints "attempt A world W"
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/launcher/failure_report.h"

namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "<unset>";
}

void SleepForever() {
  for (int i = 0; i < 600; ++i) usleep(100 * 1000);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const int rank = std::atoi(Env("RANK").c_str());
  if (mode == "print") {
    std::printf("env rank=%s world=%s local_rank=%s local_world=%s addr=%s port=%s token=%s\n",
                Env("RANK").c_str(), Env("WORLD_SIZE").c_str(), Env("LOCAL_RANK").c_str(),
                Env("LOCAL_WORLD_SIZE").c_str(), Env("MASTER_ADDR").c_str(),
                Env("MASTER_PORT").c_str(), Env("FSDP_JOB_TOKEN").c_str());
    const std::string filler(300, 'x');
    for (int i = 0; i < 200; ++i) {
      // Written in pieces, so lines can only stay whole if the launcher
      // reassembles them.
      std::printf("rank %d line %d ", rank, i);
      std::fflush(stdout);
      std::printf("%s\n", filler.c_str());
      std::fflush(stdout);
    }
    std::fprintf(stderr, "rank %d says this on stderr\n", rank);
    std::printf("tail of rank %d", rank);
    return 0;
  }
  if (mode == "sleep") {
    std::printf("READY %d\n", getpid());
    std::fflush(stdout);
    SleepForever();
    return 0;
  }
  if (mode == "elastic") {
    const int attempt = std::atoi(Env("FSDP_RESTART_COUNT").c_str());
    const int world = std::atoi(Env("WORLD_SIZE").c_str());
    std::printf("attempt %d world %d\n", attempt, world);
    std::fflush(stdout);
    if (attempt == 0) {
      if (rank == world - 1) {
        usleep(300 * 1000);
        raise(SIGKILL);
      }
      SleepForever();
    } else if (attempt == 1) {
      signal(SIGUSR1, [](int) { _exit(75); });
      if (rank == 0) {
        usleep(200 * 1000);
        kill(getppid(), SIGUSR1);
      }
      SleepForever();
    }
    return 0;
  }
  if (argc < 3) return 2;
  if (mode == "fail_until") {
    // Rank 1 fails until the launcher's restart count reaches argv[2].
    const int attempt = std::atoi(Env("FSDP_RESTART_COUNT").c_str());
    std::printf("attempt %d\n", attempt);
    std::fflush(stdout);
    return rank == 1 && attempt < std::atoi(argv[2]) ? 1 : 0;
  }
  const int chosen = std::atoi(argv[2]);
  const int code = argc > 3 ? std::atoi(argv[3]) : 1;
  if (mode == "report" || mode == "stop") {
    if (mode == "stop" && rank == chosen) {
      std::printf("STOPPING %d\n", getpid());
      std::fflush(stdout);
      raise(SIGSTOP);
      SleepForever();
      return 0;
    }
    if (rank == 0) {
      usleep((mode == "stop" ? 500 : 300) * 1000);
      if (mode == "report") {
        const char* fd = std::getenv("FSDP_FAILURE_REPORT_FD");
        comm::WriteFailureReport(fd != nullptr ? std::atoi(fd) : -1,
                                 comm::FailureReport{chosen, "hung", 0,
                                                     "rank " + std::to_string(chosen) +
                                                         " is hung: test report"});
      }
      return code;
    }
    std::printf("READY %d\n", getpid());
    std::fflush(stdout);
    SleepForever();
    return 0;
  }
  if (mode == "stubborn" && rank != chosen) signal(SIGTERM, SIG_IGN);
  if (rank == chosen) {
    usleep(300 * 1000);
    if (mode == "signal") raise(SIGKILL);
    return argc > 3 ? std::atoi(argv[3]) : 1;
  }
  std::printf("READY %d\n", getpid());
  std::fflush(stdout);
  SleepForever();
  return 0;
}
