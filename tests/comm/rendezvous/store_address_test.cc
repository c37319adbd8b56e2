// File: tests/comm/rendezvous/store_address_test.cc
//
// Where rank 0's store listens (comm/rendezvous/store_address.h), as a table
// over what MASTER_ADDR resolves to, this host's addresses, FSDP_STORE_BIND
// and whether the job spans hosts; plus the real resolver on this host.
#include "comm/rendezvous/store_address.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace comm {
namespace {

struct Case {
  std::string name;
  std::string store_bind;
  std::string master_addr;
  std::vector<std::string> master_ips;
  std::vector<std::string> local_ips;
  bool spans_hosts;
  // Expected; an empty bind_ip means an error whose message holds `error`.
  std::string bind_ip;
  std::string connect_ip;
  bool note;
  std::vector<std::string> error;
};

const std::vector<std::string> kLocal = {"127.0.0.1", "10.0.0.5", "172.17.0.1"};

class StoreAddress : public ::testing::TestWithParam<Case> {};

TEST_P(StoreAddress, Chooses) {
  const Case& c = GetParam();
  absl::StatusOr<StoreListenAddress> where = ChooseStoreListenAddress(
      c.store_bind, c.master_addr, c.master_ips, c.local_ips, c.spans_hosts);
  if (c.bind_ip.empty()) {
    ASSERT_FALSE(where.ok()) << "listens on " << where->bind_ip;
    EXPECT_EQ(where.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.error) {
      EXPECT_NE(where.status().message().find(part), absl::string_view::npos)
          << "missing '" << part << "' in: " << where.status();
    }
    return;
  }
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->bind_ip, c.bind_ip);
  EXPECT_EQ(where->connect_ip, c.connect_ip);
  EXPECT_EQ(!where->note.empty(), c.note) << where->note;
  if (c.note) {
    EXPECT_NE(where->note.find("FSDP_STORE_BIND"), std::string::npos) << where->note;
    EXPECT_NE(where->note.find(c.master_addr), std::string::npos) << where->note;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rules, StoreAddress,
    ::testing::Values(
        // The built-in launcher and mpirun on one host: loopback only.
        Case{"launcher_loopback", "", "127.0.0.1", {"127.0.0.1"}, kLocal, false,
             "127.0.0.1", "127.0.0.1", false, {}},
        // A host name resolving to one of this host's interfaces: that one,
        // on one host or across hosts.
        Case{"cluster_address", "", "n0", {"10.0.0.5"}, kLocal, true, "10.0.0.5",
             "10.0.0.5", false, {}},
        Case{"cluster_address_one_host", "", "n0", {"10.0.0.5"}, kLocal, false,
             "10.0.0.5", "10.0.0.5", false, {}},
        // Several addresses: the local one; across hosts a non-loopback one
        // even if the resolver lists loopback first.
        Case{"first_local_of_several", "", "n0", {"192.168.9.9", "172.17.0.1"}, kLocal, true,
             "172.17.0.1", "172.17.0.1", false, {}},
        Case{"non_loopback_preferred", "", "n0", {"127.0.1.1", "10.0.0.5"}, kLocal, true,
             "10.0.0.5", "10.0.0.5", false, {}},
        // Debian's 127.0.1.1 for the host's own name: fine on one host...
        Case{"debian_name_one_host", "", "vm", {"127.0.1.1"}, kLocal, false, "127.0.1.1",
             "127.0.1.1", false, {}},
        // ... across hosts the host's one other address, said aloud; with
        // several or none, an error saying what to set (every interface
        // only when asked).
        Case{"debian_name_across_hosts", "", "vm", {"127.0.1.1"}, {"127.0.0.1", "10.0.0.5"},
             true, "10.0.0.5", "10.0.0.5", true, {}},
        Case{"debian_name_across_hosts_several", "", "vm", {"127.0.1.1"}, kLocal, true, "", "",
             false,
             {"MASTER_ADDR=vm resolves to 127.0.1.1 (loopback)", "10.0.0.5, 172.17.0.1",
              "FSDP_STORE_BIND", "FSDP_STORE_BIND=all"}},
        Case{"debian_name_across_hosts_none", "", "vm", {"127.0.1.1"}, {"127.0.0.1"}, true, "",
             "", false, {"no other IPv4 address", "FSDP_STORE_BIND"}},
        // Asked: every interface, or one address.
        Case{"bind_all", "all", "n0", {"10.0.0.5"}, kLocal, true, kEveryInterface,
             "127.0.0.1", false, {}},
        Case{"bind_one", "172.17.0.1", "n0", {"10.0.0.5"}, kLocal, true, "172.17.0.1",
             "172.17.0.1", false, {}},
        Case{"bind_other_loopback", "127.0.0.2", "n0", {}, kLocal, false, "127.0.0.2",
             "127.0.0.2", false, {}},
        // Errors: MASTER_ADDR names another host, FSDP_STORE_BIND not ours.
        Case{"master_is_another_host", "", "n1", {"10.0.0.6"}, kLocal, true, "", "", false,
             {"MASTER_ADDR=n1 resolves to 10.0.0.6", "127.0.0.1, 10.0.0.5, 172.17.0.1",
              "FSDP_STORE_BIND"}},
        Case{"bind_not_ours", "10.9.9.9", "n0", {"10.0.0.5"}, kLocal, true, "", "", false,
             {"FSDP_STORE_BIND=10.9.9.9 is not an address of rank 0's host", "10.0.0.5"}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

JobEnv TwoRanks(const std::string& master_addr) {
  JobEnv env;
  env.world_size = 2;
  env.local_world_size = 2;
  env.master_addr = master_addr;
  env.master_port = 1;
  return env;
}

TEST(PublishedStoreIp, LoopbackOnOneHostARealAddressAcrossHosts) {
  const StoreListenAddress loopback{"127.0.0.1", "127.0.0.1", ""};
  const std::vector<std::string> local = {"127.0.0.1", "10.0.0.5", "192.168.1.2"};
  absl::StatusOr<std::string> one_host = ChoosePublishedStoreIp(loopback, local, false);
  ASSERT_TRUE(one_host.ok()) << one_host.status();
  EXPECT_EQ(*one_host, "127.0.0.1");
  // Across hosts: the bound address when it is a real one...
  absl::StatusOr<std::string> bound =
      ChoosePublishedStoreIp({"192.168.1.2", "192.168.1.2", ""}, local, true);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(*bound, "192.168.1.2");
  // ...else (every interface, or a host name resolving to loopback) the
  // first non-loopback interface address.
  absl::StatusOr<std::string> wildcard =
      ChoosePublishedStoreIp({kEveryInterface, "127.0.0.1", ""}, local, true);
  ASSERT_TRUE(wildcard.ok()) << wildcard.status();
  EXPECT_EQ(*wildcard, "10.0.0.5");
  absl::StatusOr<std::string> none = ChoosePublishedStoreIp(loopback, {"127.0.0.1"}, true);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("FSDP_STORE_BIND"), std::string::npos) << none.status();
}

TEST(StoreAddressOnThisHost, LoopbackAndUnresolvable) {
  absl::StatusOr<StoreListenAddress> loopback =
      StoreListenAddressOnThisHost(TwoRanks("127.0.0.1"));
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  EXPECT_EQ(loopback->bind_ip, "127.0.0.1");

  absl::StatusOr<StoreListenAddress> unknown =
      StoreListenAddressOnThisHost(TwoRanks("no-such-host.invalid"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("MASTER_ADDR=no-such-host.invalid does not "
                                            "resolve"),
            absl::string_view::npos)
      << unknown.status();

  // TEST-NET-3 (RFC 5737): never an address of this host.
  absl::StatusOr<StoreListenAddress> foreign =
      StoreListenAddressOnThisHost(TwoRanks("203.0.113.7"));
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("none of which is an address of this host"),
            absl::string_view::npos)
      << foreign.status();
}

}  // namespace
}  // namespace comm
