// File: comm/rendezvous/store_address.h
//
// Where rank 0's rendezvous store listens (issue 13): on the interface of
// MASTER_ADDR only, so that the job's one network-facing server is not
// reachable on interfaces nobody asked for (a management network, a
// container bridge). FSDP_STORE_BIND (JobEnv::store_bind) overrides it:
//
//   FSDP_STORE_BIND   store listens on                    rank 0 connects to
//   (unset)           the address MASTER_ADDR resolves     that address
//                     to on rank 0's host (see below)
//   all               every interface (0.0.0.0)            127.0.0.1
//   <IPv4 address>    that address (one of this host's)    that address
//
// [Note: MASTER_ADDR resolving to loopback] Debian's installer maps a host's
// own name to 127.0.1.1 in /etc/hosts, so under Slurm (MASTER_ADDR = the
// step's first node name) rank 0 may resolve its own name to loopback while
// ranks on other hosts resolve it, through DNS or their own /etc/hosts, to
// its real address. Listening on 127.0.1.1 would then lock them out. So when
// MASTER_ADDR resolves only to loopback addresses and the job spans hosts
// (world size > local world size), the store listens on this host's one
// non-loopback address, and rank 0 says so and why on stderr; with none, or
// several (the store does not guess which network the others use), rank 0
// refuses to form the job and says what to set. It listens on every
// interface only when asked (FSDP_STORE_BIND=all). On one host (every
// launcher's single-host case) it listens on that loopback address.
//
// Example:
//   FSDP_ASSIGN_OR_RETURN(StoreListenAddress where, StoreListenAddressOnThisHost(env));
//   options.bind_ip = where.bind_ip;
#ifndef COMM_RENDEZVOUS_STORE_ADDRESS_H_
#define COMM_RENDEZVOUS_STORE_ADDRESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/rendezvous/job_env.h"

namespace comm {

// The IPv4 wildcard: every interface.
inline constexpr char kEveryInterface[] = "0.0.0.0";

struct StoreListenAddress {
  std::string bind_ip;     // dotted IPv4; kEveryInterface for all
  std::string connect_ip;  // where rank 0 reaches its own store
  // Non-empty when the store listens more widely than MASTER_ADDR's
  // interface without FSDP_STORE_BIND=all: why, for rank 0 to print.
  std::string note;
};

// The rule of the banner, as a pure function. `master_ips` are MASTER_ADDR's
// IPv4 addresses as resolved on rank 0's host (in resolver order), `local_ips`
// this host's interface addresses (any 127.x.y.z counts as local: the whole
// 127/8 is on the loopback interface). Errors are kInvalidArgument naming
// MASTER_ADDR or FSDP_STORE_BIND, what they resolved to and what to set.
absl::StatusOr<StoreListenAddress> ChooseStoreListenAddress(
    const std::string& store_bind, const std::string& master_addr,
    const std::vector<std::string>& master_ips, const std::vector<std::string>& local_ips,
    bool job_spans_hosts);

// The same for `env` on this host: MASTER_ADDR through getaddrinfo, the
// interfaces through getifaddrs. kInvalidArgument also when MASTER_ADDR does
// not resolve here.
absl::StatusOr<StoreListenAddress> StoreListenAddressOnThisHost(const JobEnv& env);

// Under the PMIx bootstrap (JobEnv::master_from_pmix) rank 0 listens as if
// MASTER_ADDR were "127.0.0.1" on one host, its own host name across hosts,
// and publishes, for the other ranks, the address below (pure): on one host
// where.connect_ip; across hosts the bound address if it is a single
// non-loopback one, else this host's first non-loopback interface address
// (set FSDP_STORE_BIND=<address> to choose). kUnavailable when it has none.
absl::StatusOr<std::string> ChoosePublishedStoreIp(const StoreListenAddress& where,
                                                   const std::vector<std::string>& local_ips,
                                                   bool job_spans_hosts);

// The same with this host's interfaces (getifaddrs).
absl::StatusOr<std::string> PublishedStoreIpOnThisHost(const StoreListenAddress& where,
                                                       bool job_spans_hosts);

}  // namespace comm

#endif  // COMM_RENDEZVOUS_STORE_ADDRESS_H_
