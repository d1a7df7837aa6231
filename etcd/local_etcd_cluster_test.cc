#include "etcd/local_etcd_cluster.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary::etcd {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

LocalEtcdOptions OptionsIn(const std::string& dir, int members) {
  LocalEtcdOptions options;
  options.dir = dir;
  options.members = members;
  return options;
}

// A directory planned again keeps its members' ports (a member restarted on its data must come
// back at the peer address the others know), and every member's command line names them all.
TEST(LocalEtcdClusterTest, APlannedDirectoryKeepsItsPorts) {
  testing::ScopedTempDir dir;
  const absl::StatusOr<LocalEtcdCluster> first = LocalEtcdCluster::Plan(OptionsIn(dir.path(), 3));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 3);
  const absl::StatusOr<LocalEtcdCluster> again = LocalEtcdCluster::Plan(OptionsIn(dir.path(), 3));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->endpoints(), first->endpoints());
  for (int i = 0; i < 3; ++i) {
    const LocalEtcdMember& member = first->members()[i];
    EXPECT_EQ(again->members()[i].peer_port, member.peer_port);
    EXPECT_EQ(member.data_dir, absl::StrCat(dir.path(), "/member-", i, ".etcd"));
    EXPECT_THAT(
        first->Argv(0),
        Contains(HasSubstr(absl::StrCat(member.name, "=http://127.0.0.1:", member.peer_port))));
  }
  EXPECT_THAT(first->Argv(1), Contains(absl::StrCat("--listen-client-urls=http://127.0.0.1:",
                                                    first->members()[1].client_port)));
}

TEST(LocalEtcdClusterTest, TlsMembersServeHttpsAndAuthenticateClients) {
  testing::ScopedTempDir dir;
  LocalEtcdOptions options = OptionsIn(dir.path(), 1);
  options.security.insecure = false;
  options.security.cert_file = "etcd.crt";
  options.security.key_file = "etcd.key";
  options.security.ca_file = "ca.crt";
  const absl::StatusOr<LocalEtcdCluster> plan = LocalEtcdCluster::Plan(options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::string> argv = plan->Argv(0);
  EXPECT_THAT(argv, Contains(absl::StrCat("--listen-client-urls=https://127.0.0.1:",
                                          plan->members()[0].client_port)));
  EXPECT_THAT(argv, AllOf(Contains("--cert-file=etcd.crt"), Contains("--key-file=etcd.key"),
                          Contains("--trusted-ca-file=ca.crt"), Contains("--client-cert-auth")));
  EXPECT_TRUE(plan->ClientOptions().security.tls());
}

TEST(LocalEtcdClusterTest, AMemberCountOtherThanOneOrThreeIsRefused) {
  testing::ScopedTempDir dir;
  const absl::StatusOr<LocalEtcdCluster> plan = LocalEtcdCluster::Plan(OptionsIn(dir.path(), 2));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("members must be 1 or 3, is 2"));
}

TEST(LocalEtcdClusterTest, AMembersFileOfAnotherSizeIsRefused) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(LocalEtcdCluster::Plan(OptionsIn(dir.path(), 1)).ok());
  const absl::StatusOr<LocalEtcdCluster> plan = LocalEtcdCluster::Plan(OptionsIn(dir.path(), 3));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr(dir.path() + "/members lists 1 member(s), not 3"));
}

TEST(LocalEtcdClusterTest, AMalformedMembersFileIsRefusedNamingTheLine) {
  testing::ScopedTempDir dir;
  ASSERT_TRUE(WriteStringToFile(Env::Default(), dir.path() + "/members",
                                "member-0 2379 2380\nmember-1 two 2382\n", false)
                  .ok());
  const absl::StatusOr<LocalEtcdCluster> plan = LocalEtcdCluster::Plan(OptionsIn(dir.path(), 3));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              HasSubstr(dir.path() +
                        "/members:2: 'member-1 two 2382' is not 'member-1 CLIENT_PORT PEER_PORT'"));
}

}  // namespace
}  // namespace granary::etcd
