// File: comm/rendezvous/store_address.cc
#include "comm/rendezvous/store_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace comm {
namespace {

bool IsLoopback(const std::string& ip) { return absl::StartsWith(ip, "127."); }

bool IsLocal(const std::string& ip, const std::vector<std::string>& local_ips) {
  return IsLoopback(ip) || std::find(local_ips.begin(), local_ips.end(), ip) != local_ips.end();
}

std::string ListOrNone(const std::vector<std::string>& ips) {
  return ips.empty() ? std::string("none") : absl::StrJoin(ips, ", ");
}

std::string Dotted(const sockaddr* address) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
            sizeof(text));
  return text;
}

}  // namespace

absl::StatusOr<StoreListenAddress> ChooseStoreListenAddress(
    const std::string& store_bind, const std::string& master_addr,
    const std::vector<std::string>& master_ips, const std::vector<std::string>& local_ips,
    bool job_spans_hosts) {
  if (store_bind == "all") return StoreListenAddress{kEveryInterface, "127.0.0.1", ""};
  if (!store_bind.empty()) {
    if (!IsLocal(store_bind, local_ips)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FSDP_STORE_BIND=", store_bind, " is not an address of rank 0's host (its IPv4 "
          "addresses: ", ListOrNone(local_ips), "); set it to one of them, or to 'all'"));
    }
    return StoreListenAddress{store_bind, store_bind, ""};
  }
  std::vector<std::string> local_matches;
  for (const std::string& ip : master_ips) {
    if (IsLocal(ip, local_ips)) local_matches.push_back(ip);
  }
  if (local_matches.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MASTER_ADDR=", master_addr, " resolves to ", ListOrNone(master_ips),
        " on rank 0's host, none of which is an address of this host (its IPv4 "
        "addresses: ", ListOrNone(local_ips), "); rank 0 hosts the rendezvous store, so "
        "MASTER_ADDR must name rank 0's host (or set FSDP_STORE_BIND to the local address "
        "the others reach, e.g. behind NAT, or to 'all')"));
  }
  // A non-loopback address is the one other hosts can reach; on one host
  // the resolver's first choice is as good as any.
  for (const std::string& ip : local_matches) {
    if (!IsLoopback(ip)) return StoreListenAddress{ip, ip, ""};
  }
  if (!job_spans_hosts) return StoreListenAddress{local_matches[0], local_matches[0], ""};
  // [Note: MASTER_ADDR resolving to loopback] in store_address.h.
  std::vector<std::string> others;
  for (const std::string& ip : local_ips) {
    if (!IsLoopback(ip)) others.push_back(ip);
  }
  const std::string why = absl::StrCat(
      "MASTER_ADDR=", master_addr, " resolves to ", ListOrNone(local_matches),
      " (loopback) on rank 0's host, which ranks on other hosts cannot reach (Debian maps a "
      "host's own name to 127.0.1.1 in /etc/hosts)");
  if (others.size() == 1) {
    return StoreListenAddress{
        others[0], others[0],
        absl::StrCat(why, "; the rendezvous store listens on this host's one other address, ",
                     others[0], ", instead. To choose, set MASTER_ADDR to this host's address "
                     "on the cluster network, or FSDP_STORE_BIND=<that address>")};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      why, "; this host has ",
      others.empty() ? std::string("no other IPv4 address")
                     : absl::StrCat("several other addresses (", ListOrNone(others),
                                    ") and the store does not guess which the others reach"),
      ". Set MASTER_ADDR to rank 0's address on the cluster network, or FSDP_STORE_BIND to "
      "it (FSDP_STORE_BIND=all listens on every interface)"));
}

namespace {

// This host's IPv4 interface addresses; empty if getifaddrs fails.
std::vector<std::string> LocalIpv4Addresses() {
  std::vector<std::string> local_ips;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) == 0) {
    for (ifaddrs* entry = interfaces; entry != nullptr; entry = entry->ifa_next) {
      if (entry->ifa_addr != nullptr && entry->ifa_addr->sa_family == AF_INET) {
        local_ips.push_back(Dotted(entry->ifa_addr));
      }
    }
    freeifaddrs(interfaces);
  }
  return local_ips;
}

}  // namespace

absl::StatusOr<StoreListenAddress> StoreListenAddressOnThisHost(const JobEnv& env) {
  std::vector<std::string> master_ips;
  if (env.store_bind.empty()) {
    addrinfo hints = {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* results = nullptr;
    const int rc = getaddrinfo(env.master_addr.c_str(), nullptr, &hints, &results);
    if (rc != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MASTER_ADDR=", env.master_addr, " does not resolve on rank 0's host (",
          gai_strerror(rc), "); set it to rank 0's host name or IPv4 address"));
    }
    for (addrinfo* entry = results; entry != nullptr; entry = entry->ai_next) {
      const std::string ip = Dotted(entry->ai_addr);
      if (std::find(master_ips.begin(), master_ips.end(), ip) == master_ips.end()) {
        master_ips.push_back(ip);
      }
    }
    freeaddrinfo(results);
  }
  std::vector<std::string> local_ips = LocalIpv4Addresses();
  // Without the interface list only loopback counts as local, and the
  // error names the empty list.
  return ChooseStoreListenAddress(env.store_bind, env.master_addr, master_ips, local_ips,
                                  env.world_size > env.local_world_size);
}

absl::StatusOr<std::string> ChoosePublishedStoreIp(const StoreListenAddress& where,
                                                   const std::vector<std::string>& local_ips,
                                                   bool job_spans_hosts) {
  if (!job_spans_hosts) return where.connect_ip;
  if (where.bind_ip != kEveryInterface && !IsLoopback(where.bind_ip)) return where.bind_ip;
  for (const std::string& ip : local_ips) {
    if (!IsLoopback(ip)) return ip;
  }
  return absl::UnavailableError(absl::StrCat(
      "the job spans hosts but rank 0's host has no IPv4 address other than loopback (",
      local_ips.empty() ? "none found" : absl::StrJoin(local_ips, ", "),
      ") to publish for its rendezvous store; set FSDP_STORE_BIND to an address the other "
      "hosts reach, or MASTER_ADDR and MASTER_PORT"));
}

absl::StatusOr<std::string> PublishedStoreIpOnThisHost(const StoreListenAddress& where,
                                                       bool job_spans_hosts) {
  return ChoosePublishedStoreIp(where, LocalIpv4Addresses(), job_spans_hosts);
}

}  // namespace comm
