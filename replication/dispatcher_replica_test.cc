// DispatcherReplica: three replicas over one real etcd (testing/etcd_test_cluster.h). One leads
// and the others redirect to it; when the leader resigns or its lease is revoked (as when it is
// cut off from etcd for a TTL), another takes over with every state change the first committed
// — across snapshots too — and the deposed one rejoins as a follower; a leader partitioned from
// etcd (a proxy on its link cut) stops serving within its lease and commits nothing; a replica id
// is held by one live replica. A follower's lag is 0 once caught up, and positive while it is
// cut off from etcd and the leader commits. A replica started from nothing after snapshots
// rebuilds from etcd and can lead.
#include "replication/dispatcher_replica.h"

#include <memory>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache/cache_ops.h"
#include "common/leader_redirect.h"
#include "faultinject/tcp_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "obs/metrics.h"
#include "pipeline/pipeline_loader.h"
#include "testing/etcd_test_cluster.h"
#include "testing/exposition_parser.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kFailoverTimeout = absl::Seconds(15);

class DispatcherReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = testing::EtcdTestCluster::Start({});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    auto client = etcd::EtcdClient::Create(cluster_->ClientOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  void TearDown() override {
    replicas_.clear();
  }

  DispatcherReplicaOptions Options(int index) {
    DispatcherReplicaOptions options;
    options.dispatcher.registries = &registries_;
    options.dispatcher.check_invariants = true;
    options.dispatcher.snapshot_every = snapshot_every_;
    options.me.set_replica_id(absl::StrCat("r", index));
    options.me.set_address(absl::StrCat("127.0.0.1:", 7000 + index));
    options.journal.prefix = "/granary/replicas-test";
    return options;
  }
  void StartReplicas(int count) {
    for (int i = 0; i < count; ++i) {
      auto replica = DispatcherReplica::Start(client_.get(), Options(i));
      ASSERT_TRUE(replica.ok()) << replica.status();
      replicas_.push_back(*std::move(replica));
    }
  }
  // The index of the replica that leads and serves, once one does (-1 after the timeout).
  int AwaitLeader(int other_than = -1) {
    const absl::Time deadline = absl::Now() + kFailoverTimeout;
    while (absl::Now() < deadline) {
      for (int i = 0; i < static_cast<int>(replicas_.size()); ++i) {
        if (i != other_than && replicas_[i] != nullptr && replicas_[i]->Leader().ok()) return i;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return -1;
  }
  std::string RegisterDataset(DispatcherImpl& impl, int stop) {
    auto def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "range", "params": {"stop": )", stop, "}}}"),
        "range.json");
    EXPECT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    const absl::Status registered = impl.RegisterDataset(request, &response);
    EXPECT_TRUE(registered.ok()) << registered;
    return response.dataset_id();
  }
  static std::set<std::string> Datasets(DispatcherImpl& impl) {
    GetStatusResponse status;
    EXPECT_TRUE(impl.GetStatus({}, &status).ok());
    std::set<std::string> ids;
    for (const auto& dataset : status.state().datasets()) ids.insert(dataset.dataset_id());
    return ids;
  }

  // Starts proxy_ to the etcd member and cut_client_ through it (short call deadlines, so that a
  // cut shows quickly); cut_client_ stays null if either fails (the failure reported).
  void ConnectThroughProxy() {
    auto proxy = TcpProxy::Start(cluster_->endpoint(0));
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
    etcd::EtcdClientOptions cut_options = cluster_->ClientOptions();
    cut_options.endpoints = {proxy_->address()};
    cut_options.call_timeout = absl::Milliseconds(500);
    auto cut_client = etcd::EtcdClient::Create(cut_options);
    ASSERT_TRUE(cut_client.ok()) << cut_client.status();
    cut_client_ = *std::move(cut_client);
  }

  PipelineRegistries registries_ = PipelineRegistriesWithCache();
  int64_t snapshot_every_ = 10000;
  std::unique_ptr<testing::EtcdTestCluster> cluster_;
  std::unique_ptr<etcd::EtcdClient> client_;
  // A replica's link to etcd through a proxy the test cuts; outlive the replicas (TearDown).
  std::unique_ptr<TcpProxy> proxy_;
  std::unique_ptr<etcd::EtcdClient> cut_client_;
  std::vector<std::unique_ptr<DispatcherReplica>> replicas_;
};

TEST_F(DispatcherReplicaTest, OneLeadsAndTheOthersRedirectToIt) {
  StartReplicas(3);
  const int leader = AwaitLeader();
  ASSERT_GE(leader, 0) << "no replica leads";
  const std::string leader_address = absl::StrCat("127.0.0.1:", 7000 + leader);
  for (int i = 0; i < 3; ++i) {
    if (i == leader) continue;
    // A follower learns the leader from the election as soon as it campaigns.
    absl::StatusOr<std::shared_ptr<DispatcherImpl>> impl = replicas_[i]->Leader();
    for (absl::Time deadline = absl::Now() + absl::Seconds(5);
         !RedirectedLeader(impl.status()).has_value() && absl::Now() < deadline;
         impl = replicas_[i]->Leader()) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_EQ(impl.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(RedirectedLeader(impl.status()), leader_address) << impl.status();
    EXPECT_THAT(impl.status().message(), HasSubstr(leader_address));
    EXPECT_FALSE(replicas_[i]->status().leading);
  }
  EXPECT_TRUE(replicas_[leader]->status().leading);
}

TEST_F(DispatcherReplicaTest, AFollowerTakesOverWithEveryCommittedChangeWhenTheLeaderResigns) {
  snapshot_every_ = 5;  // several snapshots, so the followers also cross compactions
  StartReplicas(3);
  const int first = AwaitLeader();
  ASSERT_GE(first, 0);
  std::set<std::string> registered;
  {
    std::shared_ptr<DispatcherImpl> impl = *replicas_[first]->Leader();
    for (int stop = 1; stop <= 12; ++stop) registered.insert(RegisterDataset(*impl, stop));
  }
  replicas_[first].reset();  // resigns: its lease is revoked
  const int second = AwaitLeader(first);
  ASSERT_GE(second, 0) << "no replica took over";
  std::shared_ptr<DispatcherImpl> impl = *replicas_[second]->Leader();
  EXPECT_EQ(Datasets(*impl), registered);
  // The new leader goes on committing.
  registered.insert(RegisterDataset(*impl, 100));
  EXPECT_EQ(Datasets(*impl), registered);
}

// A replica keeps nothing on its own disk: one whose machine (and disk) was replaced starts from
// nothing, rebuilds its state from etcd's newest snapshot and the records after it, and can lead
// with every change the others committed before it existed.
TEST_F(DispatcherReplicaTest, AReplicaStartedAfterSnapshotsRebuildsFromEtcdAndLeadsWithEveryChange) {
  snapshot_every_ = 5;
  StartReplicas(1);
  ASSERT_EQ(AwaitLeader(), 0);
  std::set<std::string> registered;
  {
    std::shared_ptr<DispatcherImpl> impl = *replicas_[0]->Leader();
    for (int stop = 1; stop <= 12; ++stop) registered.insert(RegisterDataset(*impl, stop));
  }
  // Snapshots dropped the first records: what a fresh replica reads is a snapshot and a tail.
  const auto first_record = client_->Range(
      absl::StrCat(Options(0).journal.prefix, "/log/00000000000000000001"));
  ASSERT_TRUE(first_record.ok()) << first_record.status();
  EXPECT_EQ(first_record->kvs_size(), 0) << "record 1 should be covered by a snapshot";
  auto fresh = DispatcherReplica::Start(client_.get(), Options(1));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  replicas_.push_back(*std::move(fresh));
  replicas_[0].reset();  // the old leader resigns; the fresh replica is the only one left
  ASSERT_EQ(AwaitLeader(0), 1) << "the fresh replica did not take over";
  std::shared_ptr<DispatcherImpl> impl = *replicas_[1]->Leader();
  EXPECT_EQ(Datasets(*impl), registered);
  registered.insert(RegisterDataset(*impl, 100));
  EXPECT_EQ(Datasets(*impl), registered);
}

TEST_F(DispatcherReplicaTest, ALeaderWhoseLeaseEndsStepsDownAndRejoinsAsAFollower) {
  StartReplicas(3);
  const int first = AwaitLeader();
  ASSERT_GE(first, 0);
  std::shared_ptr<DispatcherImpl> old_impl = *replicas_[first]->Leader();
  const std::string dataset = RegisterDataset(*old_impl, 7);
  // Its lease ends as when it is cut off from etcd for a TTL: etcd deletes its campaign.
  const auto campaigns = client_->Range("/granary/replicas-test/replicas/r" + std::to_string(first));
  ASSERT_TRUE(campaigns.ok() && campaigns->kvs_size() == 1);
  ASSERT_TRUE(client_->LeaseRevoke(campaigns->kvs(0).lease()).ok());
  // The old leader's impl commits nothing more: its journal is fenced.
  RegisterDatasetRequest request;
  auto def = ParsePipelineJson(R"({"source": {"type": "range", "params": {"stop": 99}}})", "r");
  ASSERT_TRUE(def.ok());
  *request.mutable_pipeline() = *def;
  RegisterDatasetResponse response;
  const absl::Status refused = old_impl->RegisterDataset(request, &response);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  const int second = AwaitLeader(first);
  ASSERT_GE(second, 0) << "no replica took over";
  std::shared_ptr<DispatcherImpl> impl = *replicas_[second]->Leader();
  EXPECT_EQ(Datasets(*impl), std::set<std::string>{dataset});
  // The old leader is a follower again, redirecting to the new one.
  const absl::Time deadline = absl::Now() + kFailoverTimeout;
  while (replicas_[first]->status().terms_ended < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GE(replicas_[first]->status().terms_ended, 1);
  EXPECT_FALSE(replicas_[first]->status().leading);
  old_impl.reset();
  const std::string new_leader = absl::StrCat("127.0.0.1:", 7000 + second);
  absl::StatusOr<std::shared_ptr<DispatcherImpl>> redirected = replicas_[first]->Leader();
  for (; RedirectedLeader(redirected.status()) != new_leader && absl::Now() < deadline;
       redirected = replicas_[first]->Leader()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(RedirectedLeader(redirected.status()), new_leader) << redirected.status();
}

TEST_F(DispatcherReplicaTest, ALeaderCutOffFromEtcdStopsServingWithinItsLeaseAndCommitsNothing) {
  // Replica 0 reaches etcd only through a proxy the test cuts; its clients (this test) still
  // reach it: a split brain unless fencing and the lease hold.
  ConnectThroughProxy();
  ASSERT_NE(cut_client_, nullptr);
  auto first = DispatcherReplica::Start(cut_client_.get(), Options(0));
  ASSERT_TRUE(first.ok()) << first.status();
  replicas_.push_back(*std::move(first));
  ASSERT_TRUE(replicas_[0]->AwaitLeading(kFailoverTimeout));
  for (int i = 1; i < 3; ++i) {
    auto replica = DispatcherReplica::Start(client_.get(), Options(i));
    ASSERT_TRUE(replica.ok()) << replica.status();
    replicas_.push_back(*std::move(replica));
  }
  std::shared_ptr<DispatcherImpl> old_impl = *replicas_[0]->Leader();
  const std::string dataset = RegisterDataset(*old_impl, 5);

  proxy_->Cut();
  const absl::Time cut_at = absl::Now();
  // It cannot commit: the journal's Txn never reaches etcd.
  auto def = ParsePipelineJson(R"({"source": {"type": "range", "params": {"stop": 6}}})", "r");
  ASSERT_TRUE(def.ok());
  RegisterDatasetRequest request;
  *request.mutable_pipeline() = *def;
  RegisterDatasetResponse response;
  EXPECT_FALSE(old_impl->RegisterDataset(request, &response).ok());
  // It stops serving once its lease may have expired (TTL 1 s, plus a poll).
  while (replicas_[0]->Leader().ok() && absl::Now() < cut_at + kFailoverTimeout) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Duration stepped_down = absl::Now() - cut_at;
  EXPECT_FALSE(replicas_[0]->Leader().ok());
  EXPECT_LT(stepped_down, absl::Seconds(3)) << "the cut-off leader served for "
                                             << absl::FormatDuration(stepped_down);
  const int second = AwaitLeader(0);
  ASSERT_GE(second, 1) << "no replica took over";
  std::shared_ptr<DispatcherImpl> impl = *replicas_[second]->Leader();
  EXPECT_EQ(Datasets(*impl), std::set<std::string>{dataset})
      << "the cut-off leader committed nothing after the cut";
  // Healed, it rejoins as a follower of the new leader.
  proxy_->Heal();
  const std::string new_leader = absl::StrCat("127.0.0.1:", 7000 + second);
  absl::StatusOr<std::shared_ptr<DispatcherImpl>> redirected = replicas_[0]->Leader();
  for (const absl::Time deadline = absl::Now() + kFailoverTimeout;
       RedirectedLeader(redirected.status()) != new_leader && absl::Now() < deadline;
       redirected = replicas_[0]->Leader()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(RedirectedLeader(redirected.status()), new_leader) << redirected.status();
}

// Replica lag (what `granary status` and granary_dispatcher_replica_lag_records show): a
// follower that has applied everything reports the leader's applied seq and a lag of 0; one cut
// off from etcd (a proxy on its link cut) while the leader commits falls behind — its refusals
// carry an applied seq below the leader's, and its metric is absent (etcd cannot be read) —
// and once healed it catches up to a lag of 0 again.
TEST_F(DispatcherReplicaTest, AFollowersLagIsZeroWhenCaughtUpAndPositiveWhileItIsCutOffFromEtcd) {
  StartReplicas(1);
  ASSERT_TRUE(replicas_[0]->AwaitLeading(kFailoverTimeout));
  std::shared_ptr<DispatcherImpl> leader = *replicas_[0]->Leader();
  ConnectThroughProxy();
  ASSERT_NE(cut_client_, nullptr);
  auto follower = DispatcherReplica::Start(cut_client_.get(), Options(1));
  ASSERT_TRUE(follower.ok()) << follower.status();
  replicas_.push_back(*std::move(follower));

  const auto leader_applied = [&] {
    GetStatusResponse status;
    EXPECT_TRUE(leader->GetStatus({}, &status).ok());
    return status.state().applied_seq();
  };
  // The follower's applied seq as its refusals carry it (0 when they carry none).
  const auto follower_applied = [&] {
    return AppliedSeqOf(replicas_[1]->Leader().status()).value_or(0);
  };
  // A replica's granary_dispatcher_replica_lag_records (-1: absent).
  const auto lag_metric = [&](int replica) {
    MetricRegistry metrics;
    metrics.AddCollector([&](MetricSamples& out) { replicas_[replica]->CollectMetrics(out); });
    absl::StatusOr<Exposition> scraped = ParseExposition(metrics.RenderText());
    EXPECT_TRUE(scraped.ok()) << scraped.status();
    if (!scraped.ok() || !scraped->Has("granary_dispatcher_replica_lag_records")) return -1.0;
    return scraped->Sum("granary_dispatcher_replica_lag_records");
  };
  // Waits until the follower has applied what the leader has; whether it did.
  const auto caught_up = [&] {
    const absl::Time deadline = absl::Now() + kFailoverTimeout;
    while (follower_applied() != leader_applied() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    return follower_applied() == leader_applied();
  };

  for (int stop = 1; stop <= 3; ++stop) RegisterDataset(*leader, stop);
  ASSERT_TRUE(caught_up()) << "applied " << follower_applied() << " of " << leader_applied();
  EXPECT_EQ(lag_metric(1), 0);
  EXPECT_EQ(lag_metric(0), 0) << "the leader's lag";

  proxy_->Cut();
  const uint64_t before = leader_applied();
  for (int stop = 4; stop <= 8; ++stop) RegisterDataset(*leader, stop);
  ASSERT_GE(leader_applied(), before + 5);
  EXPECT_LE(follower_applied(), before) << "a follower cut off from etcd applied new records";
  EXPECT_GE(leader_applied() - follower_applied(), 5u) << "the follower's lag";
  EXPECT_EQ(lag_metric(1), -1) << "a lag reported while etcd cannot be read";

  proxy_->Heal();
  ASSERT_TRUE(caught_up()) << "applied " << follower_applied() << " of " << leader_applied();
  const absl::Time deadline = absl::Now() + kFailoverTimeout;
  while (lag_metric(1) != 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(lag_metric(1), 0);
}

TEST_F(DispatcherReplicaTest, AReplicaIdHeldByALiveReplicaIsRefused) {
  StartReplicas(1);
  DispatcherReplicaOptions twin = Options(0);
  twin.me.set_address("127.0.0.1:7999");
  const auto refused = DispatcherReplica::Start(client_.get(), twin);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(), HasSubstr("'r0'"));
  EXPECT_THAT(refused.status().message(), HasSubstr("127.0.0.1:7000"));
}

}  // namespace
}  // namespace granary
