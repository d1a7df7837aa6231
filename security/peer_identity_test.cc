#include "security/peer_identity.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using Role = PeerIdentity::Role;

TEST(PeerIdentityTest, ParsesWorkerAndClientUris) {
  const std::optional<PeerIdentity> worker = ParseIdentityUri(WorkerIdentityUri("w0"));
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->role, Role::kWorker);
  EXPECT_EQ(worker->name, "w0");
  const std::optional<PeerIdentity> client = ParseIdentityUri("granary://client/alice");
  ASSERT_TRUE(client.has_value());
  EXPECT_EQ(client->role, Role::kClient);
  EXPECT_EQ(client->name, "alice");
}

TEST(PeerIdentityTest, RefusesUrisThatNameNoGranaryIdentity) {
  EXPECT_FALSE(ParseIdentityUri("granary://worker/").has_value()) << "empty name";
  EXPECT_FALSE(ParseIdentityUri("granary://worker/w0/extra").has_value());
  EXPECT_FALSE(ParseIdentityUri(kDispatcherIdentityUri).has_value());
  EXPECT_FALSE(ParseIdentityUri("spiffe://granary/worker/w0").has_value());
  EXPECT_FALSE(ParseIdentityUri("localhost").has_value());
}

TEST(PeerIdentityTest, WorkerRpcsNeedThatWorker) {
  const PeerIdentity w0{Role::kWorker, "w0"};
  EXPECT_TRUE(RequireWorker(w0, "w0", "RegisterWorker").ok());
  const absl::Status other =
      RequireWorker(PeerIdentity{Role::kWorker, "w1"}, "w0", "RegisterWorker");
  EXPECT_TRUE(absl::IsPermissionDenied(other)) << other;
  EXPECT_THAT(other.message(), HasSubstr("RegisterWorker as worker 'w0' refused: the caller is "
                                         "worker 'w1'"));
  EXPECT_TRUE(absl::IsPermissionDenied(
      RequireWorker(PeerIdentity{Role::kClient, "w0"}, "w0", "WorkerHeartbeat")))
      << "a client named like a worker is still a client";
  const absl::Status nobody = RequireWorker(PeerIdentity{}, "w0", "GetSplits");
  EXPECT_TRUE(absl::IsUnauthenticated(nobody)) << nobody;
  EXPECT_THAT(nobody.message(), HasSubstr("present a worker certificate"));
}

TEST(PeerIdentityTest, ClientRpcsNeedAClient) {
  EXPECT_TRUE(RequireClient(PeerIdentity{Role::kClient, "alice"}, "StartEpoch").ok());
  EXPECT_TRUE(absl::IsPermissionDenied(RequireClient(PeerIdentity{Role::kWorker, "w0"}, "X")));
  EXPECT_TRUE(absl::IsUnauthenticated(RequireClient(PeerIdentity{}, "X")));
}

}  // namespace
}  // namespace granary
