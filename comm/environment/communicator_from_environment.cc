// File: comm/environment/communicator_from_environment.cc
//
// Communicator::CreateFromEnvironment: job environment (launcher variables,
// comm/rendezvous/job_env.h) -> UCX transport with rendezvous
// (comm/ucx/ucx_transport.h) -> world communicator owning that transport.
// Kept apart from communicator.cc so that code which only needs
// CreateOverTransport (unit tests over the loopback fake) does not link UCX.
// World size 1 needs no network: the UCX transport handles a world of one
// without UCX or MASTER_ADDR/MASTER_PORT.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/communicator_impl.h"
#include "comm/fault_injection.h"
#include "comm/launcher/failure_report.h"
#include "comm/progress_engine.h"
#include "comm/rendezvous/job_env.h"
#include "comm/ucx/ucx_transport.h"

namespace comm {

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::CreateFromEnvironment(
    const CommunicatorOptions& options) {
  absl::StatusOr<JobEnv> env = JobEnvFromEnvironment();
  if (!env.ok()) {
    return absl::Status(env.status().code(),
                        absl::StrCat("CreateFromEnvironment: reading the job environment: ",
                                     env.status().message(),
                                     " (to run a single process alone, set RANK=0 "
                                     "WORLD_SIZE=1)"));
  }
  if (options.hang_timeout.has_value() && *options.hang_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateFromEnvironment: hang_timeout is ", absl::FormatDuration(*options.hang_timeout),
        "; it must be positive (absl::InfiniteDuration() turns hang detection off)"));
  }
  UcxTransportOptions transport_options;
  transport_options.rendezvous_timeout = options.rendezvous_timeout;
  // The program's choice, else the environment's, else the default.
  transport_options.hang_timeout = options.hang_timeout.has_value() ? *options.hang_timeout
                                   : env->hang_timeout.has_value()  ? *env->hang_timeout
                                                                    : kDefaultHangTimeout;
  // The launcher learns the root cause from the ranks that found it
  // (comm/launcher/failure_report.h); the transport only says who failed.
  if (env->failure_report_fd >= 0) {
    transport_options.on_peer_failure = [fd = env->failure_report_fd,
                                         rank = env->rank](const PeerFailure& failure) {
      WriteFailureReport(fd, FailureReport{failure.culprit, failure.kind, rank, failure.message});
    };
  }
  absl::StatusOr<std::unique_ptr<Transport>> transport =
      CreateUcxTransport(*env, transport_options);
  if (!transport.ok()) {
    return absl::Status(transport.status().code(),
                        absl::StrCat("CreateFromEnvironment: ", DescribeJobEnv(*env), ": ",
                                     transport.status().message()));
  }
  // FSDP_FAULTS: seeded faults around the transport (comm/fault_injection.h).
  if (const char* spec = std::getenv(kFaultsEnv); spec != nullptr && *spec != '\0') {
    absl::StatusOr<FaultPlan> plan = ParseFaultPlan(spec);
    if (!plan.ok()) return plan.status();
    int attempt = 0;
    if (const char* count = std::getenv("FSDP_RESTART_COUNT"); count != nullptr) {
      (void)absl::SimpleAtoi(count, &attempt);
    }
    if (FaultsApply(*plan, attempt)) {
      if (env->rank == 0) {
        std::fprintf(stderr, "fault injection (%s): %s\n", kFaultsEnv,
                     DescribeFaultPlan(*plan).c_str());
      }
      transport = WithInjectedFaults(std::move(*transport), *plan);
      if (!transport.ok()) return transport.status();
    }
  }
  absl::Status valid = CheckTransportAndOptions(transport->get(), options);
  if (!valid.ok()) {
    return absl::Status(valid.code(), absl::StrCat("CreateFromEnvironment: ", valid.message()));
  }
  return CreateWorldCommunicator(ProgressEngine::CreateOwning(std::move(*transport), options.wait_spin), options);
}

}  // namespace comm
