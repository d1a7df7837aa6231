#include "etcd/etcd_client.h"

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/env.h"
#include "common/loopback_port.h"
#include "etcd/etcd_watch.h"
#include "etcd/lease_keep_alive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/peer_identity.h"
#include "security/transport_security.h"
#include "testing/etcd_test_cluster.h"
#include "testing/manual_clock_env.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_certificates.h"

namespace granary::etcd {
namespace {

using ::granary::testing::EtcdTestCluster;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Polls `condition` every 10 ms until it holds or `timeout` passes; whether it held.
bool Eventually(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

std::unique_ptr<EtcdClient> ClientOf(const EtcdClientOptions& options) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// The events a watch delivered, collected under a lock.
class EventLog {
 public:
  void Add(const google::protobuf::RepeatedPtrField<mvccpb::Event>& events) {
    absl::MutexLock lock(&mu_);
    if (events.empty()) ++empty_calls_;
    for (const mvccpb::Event& event : events) events_.push_back(event);
  }
  // Calls with no event (a resumption after compaction, OnCompacted::kResumeAtCompactRevision).
  int empty_calls() const {
    absl::MutexLock lock(&mu_);
    return empty_calls_;
  }
  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    end_ = status;
    ended_ = true;
  }
  std::vector<mvccpb::Event> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return events_.size();
  }
  bool ended() const {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  absl::Status end() const {
    absl::MutexLock lock(&mu_);
    return end_;
  }

  absl::StatusOr<std::unique_ptr<EtcdWatch>> Watch(
      EtcdClient* client, const std::string& prefix, int64_t start_revision,
      EtcdWatch::OnCompacted on_compacted = EtcdWatch::OnCompacted::kEnd) {
    return EtcdWatch::Start(
        client, prefix, PrefixRangeEnd(prefix), start_revision,
        [this](const google::protobuf::RepeatedPtrField<mvccpb::Event>& events) { Add(events); },
        [this](const absl::Status& status) { End(status); }, on_compacted);
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<mvccpb::Event> events_ ABSL_GUARDED_BY(mu_);
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  int empty_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// Why a LeaseKeepAlive lost its lease, once it has.
struct LossLog {
  LeaseKeepAlive::LostCallback Callback() {
    return [this](const absl::Status& status) {
      why = status;  // written before the notification, read after it
      lost.Notify();
    };
  }
  absl::Notification lost;
  absl::Status why;
};

// One single-member cluster for the tests that need no failures; each test uses its own keys.
class EtcdSingleMemberTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<EtcdTestCluster>> cluster =
        EtcdTestCluster::Start(EtcdTestCluster::Options());
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    client_ = ClientOf(cluster_->ClientOptions());
    ASSERT_NE(client_, nullptr);
    prefix_ = absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
  }

  static EtcdTestCluster* cluster_;
  std::unique_ptr<EtcdClient> client_;
  std::string prefix_;  // this test's keys
};

EtcdTestCluster* EtcdSingleMemberTest::cluster_ = nullptr;

TEST(PrefixRangeEndTest, CoversExactlyTheKeysWithThePrefix) {
  EXPECT_EQ(PrefixRangeEnd("journal/"), "journal0");
  EXPECT_EQ(PrefixRangeEnd("a\xff"), "b");
  EXPECT_EQ(PrefixRangeEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(PrefixRangeEnd(""), std::string(1, '\0'));
}

TEST(EtcdClientOptionsTest, MalformedOptionsAreRefusedNamingTheOption) {
  EtcdClientOptions options;
  options.security.insecure = true;
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("endpoints is empty"));

  options.endpoints = {"127.0.0.1:2379", "localhost"};
  client = EtcdClient::Create(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("\"localhost\" is not host:port"));

  options.endpoints = {"127.0.0.1:2379"};
  options.call_timeout = absl::ZeroDuration();
  client = EtcdClient::Create(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("call_timeout must be positive"));

  options.call_timeout = absl::Seconds(1);
  options.max_response_bytes = 0;
  client = EtcdClient::Create(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("max_response_bytes must be positive"));

  options.max_response_bytes = 1 << 20;
  options.security.insecure = false;
  client = EtcdClient::Create(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << client.status();
}

TEST(EtcdClientUnreachableTest, FailsWithinTheDeadlineNamingTheEndpoints) {
  // Two ports nothing listens on.
  const int first = BindLoopbackPort(0);
  int second = BindLoopbackPort(0);
  while (second == first) second = BindLoopbackPort(0);
  EtcdClientOptions options;
  options.endpoints = {absl::StrCat("127.0.0.1:", first), absl::StrCat("127.0.0.1:", second)};
  options.security.insecure = true;
  options.call_timeout = absl::Seconds(1);
  std::unique_ptr<EtcdClient> client = ClientOf(options);
  ASSERT_NE(client, nullptr);
  const std::string named = absl::StrCat("etcd ", absl::StrJoin(options.endpoints, ","), ": ");

  const absl::Time start = absl::Now();
  absl::StatusOr<etcdserverpb::RangeResponse> range = client->Range("key");
  EXPECT_EQ(range.status().code(), absl::StatusCode::kUnavailable) << range.status();
  EXPECT_THAT(range.status().message(), HasSubstr(named + "Range: no endpoint answered"));
  // A write that could not be sent anywhere was not applied: Unavailable, not Unknown.
  absl::StatusOr<etcdserverpb::PutResponse> put = client->Put("key", "value");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
  EXPECT_THAT(put.status().message(), HasSubstr(named + "Put: no endpoint answered"));
  // Each call makes at most one attempt per endpoint, each within call_timeout.
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
}

TEST_F(EtcdSingleMemberTest, PutThenRangeReadsValuesRevisionsAndPrefixes) {
  absl::StatusOr<etcdserverpb::PutResponse> put = client_->Put(prefix_ + "a", "1");
  ASSERT_TRUE(put.ok()) << put.status();
  const int64_t revision = put->header().revision();
  ASSERT_TRUE(client_->Put(prefix_ + "b", "2").ok());
  // Just past the prefix's range: "<prefix minus '/'>0".
  const std::string outside = prefix_.substr(0, prefix_.size() - 1) + "0";
  ASSERT_TRUE(client_->Put(outside, "3").ok());

  absl::StatusOr<etcdserverpb::RangeResponse> one = client_->Range(prefix_ + "a");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->kvs_size(), 1);
  EXPECT_EQ(one->kvs(0).value(), "1");
  EXPECT_EQ(one->kvs(0).create_revision(), revision);
  EXPECT_EQ(one->kvs(0).mod_revision(), revision);
  EXPECT_EQ(one->kvs(0).version(), 1);

  absl::StatusOr<etcdserverpb::RangeResponse> prefix =
      client_->Range(prefix_, PrefixRangeEnd(prefix_));
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  ASSERT_EQ(prefix->kvs_size(), 2);
  EXPECT_EQ(prefix->kvs(0).key(), prefix_ + "a");
  EXPECT_EQ(prefix->kvs(1).key(), prefix_ + "b");

  absl::StatusOr<etcdserverpb::RangeResponse> limited =
      client_->Range(prefix_, PrefixRangeEnd(prefix_), 0, /*limit=*/1);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ(limited->kvs_size(), 1);
  EXPECT_TRUE(limited->more());

  // As of the first Put's revision, only "a" existed.
  absl::StatusOr<etcdserverpb::RangeResponse> past =
      client_->Range(prefix_, PrefixRangeEnd(prefix_), revision);
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(past->kvs_size(), 1);

  absl::StatusOr<etcdserverpb::DeleteRangeResponse> deleted =
      client_->DeleteRange(prefix_, PrefixRangeEnd(prefix_));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->deleted(), 2);
  absl::StatusOr<etcdserverpb::RangeResponse> outside_kept = client_->Range(outside);
  ASSERT_TRUE(outside_kept.ok());
  EXPECT_EQ(outside_kept->kvs_size(), 1);
}

TEST_F(EtcdSingleMemberTest, TxnGuardedByCreateRevisionFailsOnceTheKeyIsRecreated) {
  const std::string leader = prefix_ + "leader";
  const std::string journal = prefix_ + "journal/";
  absl::StatusOr<etcdserverpb::PutResponse> elected = client_->Put(leader, "dispatcher-1");
  ASSERT_TRUE(elected.ok()) << elected.status();
  const int64_t term = elected->header().revision();  // the key's create_revision

  // The leader appends, fenced by its key's create_revision.
  const auto append = [&](const std::string& record) {
    etcdserverpb::TxnRequest request;
    *request.add_compare() = txn::CreateRevision(leader, etcdserverpb::Compare::EQUAL, term);
    *request.add_success() = txn::PutOp(journal + record, record);
    *request.add_failure() = txn::RangeOp(leader);
    return client_->Txn(request);
  };
  absl::StatusOr<etcdserverpb::TxnResponse> first = append("1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded());
  ASSERT_EQ(first->responses_size(), 1);
  EXPECT_TRUE(first->responses(0).has_response_put());

  // Deposed: the key is deleted (its lease expired) and another dispatcher recreated it.
  ASSERT_TRUE(client_->DeleteRange(leader).ok());
  absl::StatusOr<etcdserverpb::TxnResponse> while_absent = append("2");
  ASSERT_TRUE(while_absent.ok()) << while_absent.status();
  EXPECT_FALSE(while_absent->succeeded());
  ASSERT_EQ(while_absent->responses_size(), 1);
  EXPECT_EQ(while_absent->responses(0).response_range().kvs_size(), 0);

  absl::StatusOr<etcdserverpb::PutResponse> reelected = client_->Put(leader, "dispatcher-2");
  ASSERT_TRUE(reelected.ok());
  absl::StatusOr<etcdserverpb::TxnResponse> stale = append("3");
  ASSERT_TRUE(stale.ok()) << stale.status();
  // A failed compare is an answer, not an error: the failure branch ran and shows the new term.
  EXPECT_FALSE(stale->succeeded());
  ASSERT_EQ(stale->responses_size(), 1);
  ASSERT_EQ(stale->responses(0).response_range().kvs_size(), 1);
  EXPECT_EQ(stale->responses(0).response_range().kvs(0).value(), "dispatcher-2");
  EXPECT_EQ(stale->responses(0).response_range().kvs(0).create_revision(),
            reelected->header().revision());

  absl::StatusOr<etcdserverpb::RangeResponse> records =
      client_->Range(journal, PrefixRangeEnd(journal));
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->kvs_size(), 1);
  EXPECT_EQ(records->kvs(0).value(), "1");

  // The other compares: mod_revision, version and value.
  etcdserverpb::TxnRequest request;
  *request.add_compare() =
      txn::ModRevision(leader, etcdserverpb::Compare::EQUAL, reelected->header().revision());
  *request.add_compare() = txn::Version(leader, etcdserverpb::Compare::EQUAL, 1);
  *request.add_compare() = txn::Value(leader, etcdserverpb::Compare::EQUAL, "dispatcher-2");
  *request.add_success() = txn::DeleteOp(journal, PrefixRangeEnd(journal));
  absl::StatusOr<etcdserverpb::TxnResponse> all_hold = client_->Txn(request);
  ASSERT_TRUE(all_hold.ok()) << all_hold.status();
  EXPECT_TRUE(all_hold->succeeded());
  EXPECT_EQ(all_hold->responses(0).response_delete_range().deleted(), 1);
}

TEST_F(EtcdSingleMemberTest, LeaseExpiryDeletesItsKeys) {
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> lease = client_->LeaseGrant(1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put(prefix_ + "owned", "x", lease->id()).ok());
  absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> ttl =
      client_->LeaseTimeToLive(lease->id(), /*keys=*/true);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(ttl->grantedttl(), lease->ttl());
  EXPECT_GE(ttl->ttl(), 0);  // whole seconds left, rounded down
  ASSERT_EQ(ttl->keys_size(), 1);
  EXPECT_EQ(ttl->keys(0), prefix_ + "owned");

  const absl::Time start = absl::Now();
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<etcdserverpb::RangeResponse> range = client_->Range(prefix_ + "owned");
        return range.ok() && range->kvs_size() == 0;
      },
      absl::Seconds(5)));
  // Never before the TTL (the granted one, which etcd may have raised).
  EXPECT_GE(absl::Now() - start, absl::Seconds(lease->ttl()) - absl::Milliseconds(200));
  ttl = client_->LeaseTimeToLive(lease->id());
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(ttl->ttl(), -1);
}

TEST_F(EtcdSingleMemberTest, LeaseKeepAliveKeepsTheLeaseAndReportsItsRevocation) {
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> lease = client_->LeaseGrant(1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put(prefix_ + "owned", "x", lease->id()).ok());
  LossLog loss;
  absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> keep_alive =
      LeaseKeepAlive::Start(client_.get(), lease->id(), lease->ttl(), loss.Callback());
  ASSERT_TRUE(keep_alive.ok()) << keep_alive.status();

  // Well past the TTL, the key is still there.
  absl::SleepFor(absl::Seconds(lease->ttl()) * 2.5);
  absl::StatusOr<etcdserverpb::RangeResponse> range = client_->Range(prefix_ + "owned");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->kvs_size(), 1);
  EXPECT_TRUE((*keep_alive)->alive());
  EXPECT_GE((*keep_alive)->refreshes(), 4);
  EXPECT_GT((*keep_alive)->valid_for(), absl::ZeroDuration());

  ASSERT_TRUE(client_->LeaseRevoke(lease->id()).ok());
  ASSERT_TRUE(
      loss.lost.WaitForNotificationWithTimeout(absl::Seconds(lease->ttl()) + absl::Seconds(2)));
  EXPECT_EQ(loss.why.code(), absl::StatusCode::kNotFound) << loss.why;
  EXPECT_THAT(loss.why.message(), HasSubstr("expired or was revoked"));
  EXPECT_FALSE((*keep_alive)->alive());
  EXPECT_EQ((*keep_alive)->status(), loss.why);
  range = client_->Range(prefix_ + "owned");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->kvs_size(), 0);
}

TEST_F(EtcdSingleMemberTest, LeaseKeepAliveOfAnUnknownLeaseIsNotFound) {
  absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> keep_alive =
      LeaseKeepAlive::Start(client_.get(), 0x1234567, 5, [](const absl::Status&) {});
  EXPECT_EQ(keep_alive.status().code(), absl::StatusCode::kNotFound) << keep_alive.status();
  EXPECT_THAT(keep_alive.status().message(), HasSubstr("lease 1234567"));
  keep_alive = LeaseKeepAlive::Start(client_.get(), 0x1234567, 0, [](const absl::Status&) {});
  EXPECT_EQ(keep_alive.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(keep_alive.status().message(), HasSubstr("ttl_seconds must be >= 1"));
}

TEST_F(EtcdSingleMemberTest, WatchDeliversEveryEventOfThePrefixInOrderFromItsStart) {
  absl::StatusOr<etcdserverpb::PutResponse> before = client_->Put(prefix_ + "a", "1");
  ASSERT_TRUE(before.ok());
  EventLog log;
  // From the first Put's revision: history first, then what follows.
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      log.Watch(client_.get(), prefix_, before->header().revision());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE((*watch)->WaitUntilCreated(absl::Seconds(5)).ok());

  ASSERT_TRUE(client_->Put(prefix_ + "b", "2").ok());
  ASSERT_TRUE(client_->Put("elsewhere/" + prefix_, "ignored").ok());
  ASSERT_TRUE(client_->DeleteRange(prefix_ + "a").ok());
  etcdserverpb::TxnRequest request;
  *request.add_success() = txn::PutOp(prefix_ + "c", "3");
  *request.add_success() = txn::PutOp(prefix_ + "d", "4");
  absl::StatusOr<etcdserverpb::TxnResponse> both = client_->Txn(request);
  ASSERT_TRUE(both.ok());

  ASSERT_TRUE(Eventually([&] { return log.size() >= 5; }, absl::Seconds(5))) << log.size();
  const std::vector<mvccpb::Event> events = log.events();
  ASSERT_EQ(events.size(), 5u);
  const std::vector<std::pair<mvccpb::Event::EventType, std::string>> expected = {
      {mvccpb::Event::PUT, "a"},
      {mvccpb::Event::PUT, "b"},
      {mvccpb::Event::DELETE, "a"},
      {mvccpb::Event::PUT, "c"},
      {mvccpb::Event::PUT, "d"}};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].type(), expected[i].first) << i;
    EXPECT_EQ(events[i].kv().key(), prefix_ + expected[i].second) << i;
    if (i > 0) {
      EXPECT_GE(events[i].kv().mod_revision(), events[i - 1].kv().mod_revision()) << i;
    }
  }
  EXPECT_EQ(events[0].kv().mod_revision(), before->header().revision());
  EXPECT_EQ(events[0].kv().create_revision(), before->header().revision());
  // One Txn, one revision.
  EXPECT_EQ(events[3].kv().mod_revision(), both->header().revision());
  EXPECT_EQ(events[4].kv().mod_revision(), both->header().revision());
  EXPECT_EQ((*watch)->next_revision(), both->header().revision() + 1);
  EXPECT_TRUE((*watch)->status().ok());
  EXPECT_FALSE(log.ended());
}

TEST_F(EtcdSingleMemberTest, WatchFromACompactedRevisionIsOutOfRange) {
  absl::StatusOr<etcdserverpb::PutResponse> first = client_->Put(prefix_ + "k", "1");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<etcdserverpb::PutResponse> last = client_->Put(prefix_ + "k", "2");
  ASSERT_TRUE(last.ok());
  const int64_t compacted_to = last->header().revision();
  ASSERT_TRUE(client_->Compact(compacted_to, /*physical=*/true).ok());

  absl::StatusOr<etcdserverpb::RangeResponse> old =
      client_->Range(prefix_ + "k", "", first->header().revision());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kOutOfRange) << old.status();
  EXPECT_THAT(old.status().message(), HasSubstr("required revision has been compacted"));

  EventLog log;
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      log.Watch(client_.get(), prefix_, first->header().revision());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(Eventually([&] { return log.ended(); }, absl::Seconds(5)));
  EXPECT_EQ(log.end().code(), absl::StatusCode::kOutOfRange) << log.end();
  EXPECT_THAT(log.end().message(),
              HasSubstr(absl::StrCat("revision ", first->header().revision(), " is compacted; ",
                                     "etcd's compact revision is ", compacted_to)));
  EXPECT_EQ((*watch)->status(), log.end());
  EXPECT_EQ(log.size(), 0u);

  // From the compact revision itself, the watch works.
  EventLog from_compaction;
  absl::StatusOr<std::unique_ptr<EtcdWatch>> current =
      from_compaction.Watch(client_.get(), prefix_, compacted_to);
  ASSERT_TRUE(current.ok());
  ASSERT_TRUE(Eventually([&] { return from_compaction.size() == 1; }, absl::Seconds(5)));
  EXPECT_EQ(from_compaction.events()[0].kv().value(), "2");

  // Compacting again to the same revision is refused.
  absl::StatusOr<etcdserverpb::CompactionResponse> again = client_->Compact(compacted_to, false);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kOutOfRange) << again.status();
}

TEST_F(EtcdSingleMemberTest, AWatchToldToResumeAtTheCompactRevisionGoesOnFromThere) {
  absl::StatusOr<etcdserverpb::PutResponse> first = client_->Put(prefix_ + "k", "1");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<etcdserverpb::PutResponse> last = client_->Put(prefix_ + "k", "2");
  ASSERT_TRUE(last.ok());
  ASSERT_TRUE(client_->Compact(last->header().revision(), /*physical=*/true).ok());
  EventLog log;
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      log.Watch(client_.get(), prefix_, first->header().revision(),
                EtcdWatch::OnCompacted::kResumeAtCompactRevision);
  ASSERT_TRUE(watch.ok()) << watch.status();
  // Told that changes may be missed (an empty call), then given the compact revision's event
  // and every later one; the watch does not end.
  ASSERT_TRUE(Eventually([&] { return log.size() == 1; }, absl::Seconds(5)));
  EXPECT_EQ(log.empty_calls(), 1);
  EXPECT_EQ(log.events()[0].kv().value(), "2");
  ASSERT_TRUE(client_->Put(prefix_ + "k", "3").ok());
  ASSERT_TRUE(Eventually([&] { return log.size() == 2; }, absl::Seconds(5)));
  EXPECT_EQ(log.events()[1].kv().value(), "3");
  EXPECT_FALSE(log.ended());
  EXPECT_TRUE((*watch)->status().ok());
}

TEST_F(EtcdSingleMemberTest, WatchRefusesAnIndefiniteStart) {
  EventLog log;
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = log.Watch(client_.get(), prefix_, 0);
  EXPECT_EQ(watch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(watch.status().message(), HasSubstr("start_revision must be >= 1, is 0"));
}

TEST_F(EtcdSingleMemberTest, RequestLargerThanTheServersLimitIsRefusedClearly) {
  // etcd's default --max-request-bytes is 1.5 MiB.
  const std::string fits(1 << 20, 'x');
  EXPECT_TRUE(client_->Put(prefix_ + "fits", fits).ok());
  const std::string too_large((3 << 20) / 2 + 1024, 'x');
  absl::StatusOr<etcdserverpb::PutResponse> put = client_->Put(prefix_ + "too-large", too_large);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument) << put.status();
  EXPECT_THAT(put.status().message(),
              HasSubstr(absl::StrCat("etcd ", cluster_->endpoint(0),
                                     ": Put: etcdserver: request is too large")));
  // Past the limit plus gRPC's allowance (512 KiB), gRPC itself refuses the message.
  const std::string far_too_large(3 << 20, 'x');
  put = client_->Put(prefix_ + "far-too-large", far_too_large);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kResourceExhausted) << put.status();
  EXPECT_THAT(put.status().message(), HasSubstr("larger than max"));
}

TEST_F(EtcdSingleMemberTest, StatusNamesTheLeaderAndRefusesForeignEndpoints) {
  absl::StatusOr<etcdserverpb::StatusResponse> status = client_->Status(cluster_->endpoint(0));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->leader(), status->header().member_id());
  EXPECT_EQ(status->version(), "3.4.23");
  EXPECT_GT(status->dbsize(), 0);
  absl::StatusOr<etcdserverpb::StatusResponse> foreign = client_->Status("127.0.0.1:1");
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(foreign.status().message(), HasSubstr("\"127.0.0.1:1\" is not one of"));
}

// `endpoints` rotated to start at `first`.
std::vector<std::string> StartingAt(std::vector<std::string> endpoints, int first) {
  std::rotate(endpoints.begin(), endpoints.begin() + first, endpoints.end());
  return endpoints;
}

// A three-member cluster of the test's own (its tests kill and pause members), its leader, and
// a follower.
class EtcdThreeMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EtcdTestCluster::Options options;
    options.members = 3;
    absl::StatusOr<std::unique_ptr<EtcdTestCluster>> cluster = EtcdTestCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<int> leader = cluster_->LeaderIndex();
    ASSERT_TRUE(leader.ok()) << leader.status();
    leader_ = *leader;
    follower_ = (leader_ + 1) % 3;
  }

  // A client of every member, member `first` first.
  std::unique_ptr<EtcdClient> ClientStartingAt(int first,
                                               absl::Duration call_timeout = absl::Seconds(2)) {
    EtcdClientOptions options = cluster_->ClientOptions();
    options.endpoints = StartingAt(options.endpoints, first);
    options.call_timeout = call_timeout;
    return ClientOf(options);
  }

  std::unique_ptr<EtcdTestCluster> cluster_;
  int leader_ = -1;
  int follower_ = -1;
};

TEST_F(EtcdThreeMemberTest, KillingTheMemberTheClientTalksToFailsOverToAnother) {
  std::unique_ptr<EtcdClient> client = ClientStartingAt(follower_);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put("failover/key", "v1").ok());

  // A follower the client talks to dies: the very next calls go elsewhere.
  cluster_->KillMember(follower_);
  absl::StatusOr<etcdserverpb::RangeResponse> range = client->Range("failover/key");
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->kvs_size(), 1);
  EXPECT_EQ(range->kvs(0).value(), "v1");
  EXPECT_NE(client->endpoints()[client->current_endpoint()], cluster_->endpoint(follower_));
  absl::StatusOr<etcdserverpb::PutResponse> put = client->Put("failover/key", "v2");
  ASSERT_TRUE(put.ok()) << put.status();

  // Then the leader, when the client talks to it: two members are needed for a quorum, so the
  // follower comes back first. The others elect a new leader and the client's calls go there.
  const absl::Status restarted = cluster_->RestartMember(follower_);
  ASSERT_TRUE(restarted.ok()) << restarted;
  std::unique_ptr<EtcdClient> leader_client = ClientStartingAt(leader_);
  ASSERT_NE(leader_client, nullptr);
  ASSERT_TRUE(leader_client->Range("failover/key").ok());
  const absl::Time killed = absl::Now();
  cluster_->KillMember(leader_);
  absl::StatusOr<etcdserverpb::RangeResponse> after;
  EXPECT_TRUE(Eventually(
      [&] {
        after = leader_client->Range("failover/key");
        return after.ok();
      },
      absl::Seconds(5)))
      << after.status();
  std::cout << "Range answered again " << absl::FormatDuration(absl::Now() - killed)
            << " after the leader was killed" << std::endl;
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->kvs_size(), 1);
  EXPECT_EQ(after->kvs(0).value(), "v2");
}

TEST_F(EtcdThreeMemberTest, WatchContinuesAcrossAMemberKillWithoutLossOrDuplicates) {
  // The writer talks to the leader, the watch to a follower, which is killed mid-stream.
  std::unique_ptr<EtcdClient> writer = ClientStartingAt(leader_);
  std::unique_ptr<EtcdClient> watcher = ClientStartingAt(follower_);
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(watcher, nullptr);

  absl::StatusOr<etcdserverpb::RangeResponse> start = writer->Range("journal/");
  ASSERT_TRUE(start.ok());
  EventLog log;
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      log.Watch(watcher.get(), "journal/", start->header().revision() + 1);
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE((*watch)->WaitUntilCreated(absl::Seconds(5)).ok());

  constexpr int kRecords = 200;
  for (int i = 0; i < kRecords; ++i) {
    if (i == kRecords / 2) {
      // Some events are surely delivered on the first stream before it breaks.
      ASSERT_TRUE(Eventually([&] { return log.size() >= 10; }, absl::Seconds(5)));
      cluster_->KillMember(follower_);
    }
    absl::StatusOr<etcdserverpb::PutResponse> put =
        writer->Put(absl::StrCat("journal/", i), absl::StrCat(i));
    ASSERT_TRUE(put.ok()) << "record " << i << ": " << put.status();
  }
  ASSERT_TRUE(Eventually([&] { return log.size() >= kRecords; }, absl::Seconds(10)))
      << log.size() << " events";
  const std::vector<mvccpb::Event> events = log.events();
  ASSERT_EQ(events.size(), static_cast<size_t>(kRecords));
  for (int i = 0; i < kRecords; ++i) {
    EXPECT_EQ(events[i].kv().value(), absl::StrCat(i)) << "event " << i;
    if (i > 0) {
      EXPECT_EQ(events[i].kv().mod_revision(), events[i - 1].kv().mod_revision() + 1) << i;
    }
  }
  EXPECT_GE((*watch)->streams_opened(), 2);
  EXPECT_TRUE((*watch)->status().ok()) << (*watch)->status();
}

TEST_F(EtcdThreeMemberTest, APausedMemberIsPassedOverAfterTheCallDeadline) {
  const absl::Duration call_timeout = absl::Seconds(1);
  std::unique_ptr<EtcdClient> client = ClientStartingAt(follower_, call_timeout);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put("paused/key", "v").ok());

  // Paused, the member neither answers nor refuses: the call waits out its deadline there, then
  // goes to the next member.
  cluster_->StopMember(follower_);
  const absl::Time start = absl::Now();
  absl::StatusOr<etcdserverpb::RangeResponse> range = client->Range("paused/key");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->kvs_size(), 1);
  EXPECT_GE(absl::Now() - start, call_timeout);
  EXPECT_LT(absl::Now() - start, call_timeout + absl::Seconds(1));
  EXPECT_NE(client->endpoints()[client->current_endpoint()], cluster_->endpoint(follower_));
  cluster_->ContinueMember(follower_);
}

// A single-member cluster of the test's own, for tests that pause or kill its member.
class EtcdOwnMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EtcdTestCluster>> cluster =
        EtcdTestCluster::Start(EtcdTestCluster::Options());
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  std::unique_ptr<EtcdClient> ClientWithCallTimeout(absl::Duration call_timeout) {
    EtcdClientOptions options = cluster_->ClientOptions();
    options.call_timeout = call_timeout;
    return ClientOf(options);
  }

  std::unique_ptr<EtcdTestCluster> cluster_;
};

TEST_F(EtcdOwnMemberTest, AWriteSentToAMemberThatStopsAnsweringIsUnknown) {
  std::unique_ptr<EtcdClient> client = ClientWithCallTimeout(absl::Milliseconds(500));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Range("unanswered/key").ok());  // connected

  cluster_->StopMember(0);
  // The connection stands, so the write is sent; its answer never comes: applied or not is
  // unknown (etcd may apply it once the member runs again).
  absl::StatusOr<etcdserverpb::PutResponse> put = client->Put("unanswered/key", "v");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnknown) << put.status();
  EXPECT_THAT(put.status().message(),
              HasSubstr(absl::StrCat("etcd ", cluster_->endpoint(0),
                                     ": Put: outcome unknown: the request was sent to ",
                                     cluster_->endpoint(0))));
  // A read of a member that does not answer is Unavailable: nothing was changed by it.
  absl::StatusOr<etcdserverpb::RangeResponse> range = client->Range("unanswered/key");
  EXPECT_EQ(range.status().code(), absl::StatusCode::kUnavailable) << range.status();

  cluster_->ContinueMember(0);
  EXPECT_TRUE(Eventually([&] { return client->Range("unanswered/key").ok(); }, absl::Seconds(5)));
}

TEST_F(EtcdOwnMemberTest, LeaseKeepAliveReportsLossWhenNoMemberAnswersWithinTheTtl) {
  std::unique_ptr<EtcdClient> client = ClientWithCallTimeout(absl::Milliseconds(300));
  ASSERT_NE(client, nullptr);
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> lease = client->LeaseGrant(1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  LossLog loss;
  absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> keep_alive =
      LeaseKeepAlive::Start(client.get(), lease->id(), lease->ttl(), loss.Callback());
  ASSERT_TRUE(keep_alive.ok()) << keep_alive.status();

  cluster_->KillMember(0);
  const uint64_t valid_until =
      Env::Default()->NowMicros() + absl::ToInt64Microseconds((*keep_alive)->valid_for());
  ASSERT_TRUE(
      loss.lost.WaitForNotificationWithTimeout(absl::Seconds(lease->ttl()) + absl::Seconds(2)));
  // Not before the lease may have expired, and not much after.
  EXPECT_GE(Env::Default()->NowMicros(), valid_until);
  EXPECT_EQ(loss.why.code(), absl::StatusCode::kDeadlineExceeded) << loss.why;
  EXPECT_THAT(loss.why.message(), HasSubstr("not refreshed before"));
  EXPECT_THAT(loss.why.message(), HasSubstr(cluster_->endpoint(0)));
  EXPECT_FALSE((*keep_alive)->alive());
}

// Validity follows the keep-alive's Env clock (steady in production), not the wall clock: while
// that clock stands still, wall time passing (as after a backward wall-clock step) does not
// expire the lease; once it passes the TTL, the loss is reported at once.
TEST_F(EtcdOwnMemberTest, LeaseKeepAliveMeasuresValidityOnItsEnvClockNotTheWallClock) {
  std::unique_ptr<EtcdClient> client = ClientWithCallTimeout(absl::Milliseconds(300));
  ASSERT_NE(client, nullptr);
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> lease = client->LeaseGrant(1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ManualClockEnv clock(Env::Default());
  LossLog loss;
  absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> keep_alive =
      LeaseKeepAlive::Start(client.get(), lease->id(), lease->ttl(), loss.Callback(), &clock);
  ASSERT_TRUE(keep_alive.ok()) << keep_alive.status();
  EXPECT_EQ((*keep_alive)->valid_for(), absl::Seconds(lease->ttl()));

  cluster_->KillMember(0);
  EXPECT_FALSE(loss.lost.WaitForNotificationWithTimeout(absl::Seconds(lease->ttl()) * 2));
  EXPECT_TRUE((*keep_alive)->alive());

  clock.AdvanceMicros(lease->ttl() * 1'000'000);
  EXPECT_EQ((*keep_alive)->valid_for(), absl::ZeroDuration());
  ASSERT_TRUE(loss.lost.WaitForNotificationWithTimeout(absl::Seconds(2)));
  EXPECT_EQ(loss.why.code(), absl::StatusCode::kDeadlineExceeded) << loss.why;
  EXPECT_FALSE((*keep_alive)->alive());
}

TEST(EtcdTestClusterTest, MaxRequestBytesIsTheMembersLimit) {
  EtcdTestCluster::Options options;
  options.max_request_bytes = 64 << 10;
  absl::StatusOr<std::unique_ptr<EtcdTestCluster>> cluster = EtcdTestCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<EtcdClient> client = ClientOf((*cluster)->ClientOptions());
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->Put("limit/fits", std::string(32 << 10, 'x')).ok());
  absl::StatusOr<etcdserverpb::PutResponse> put =
      client->Put("limit/too-large", std::string(80 << 10, 'x'));
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument) << put.status();
  EXPECT_THAT(put.status().message(), HasSubstr("etcdserver: request is too large"));
}

TEST(EtcdTestClusterTest, RefusesAMemberCountOtherThanOneOrThree) {
  EtcdTestCluster::Options options;
  options.members = 2;
  absl::StatusOr<std::unique_ptr<EtcdTestCluster>> cluster = EtcdTestCluster::Start(options);
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cluster.status().message(), HasSubstr("members must be 1 or 3, is 2"));
}

// A single-member etcd serving TLS with client-certificate auth (--client-cert-auth), its
// certificates made with openssl (testing/test_certificates.h) as the other TLS tests' are; a
// second CA issues the certificates the member must refuse.
class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScopedTempDir;
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_->Join("ca")).ok());
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_->Join("other-ca")).ok());
    ca_ = new testing::TestCertificates(dir_->Join("ca"));
    other_ca_ = new testing::TestCertificates(dir_->Join("other-ca"));
    ASSERT_TRUE(ca_->ok() && other_ca_->ok());
    EtcdTestCluster::Options options;
    options.security = ca_->Issue("etcd", "granary://etcd");
    absl::StatusOr<std::unique_ptr<EtcdTestCluster>> cluster = EtcdTestCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete other_ca_;
    delete ca_;
    delete dir_;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  // Options for a client of the cluster secured by `security`, with a short call deadline.
  static EtcdClientOptions ClientOptionsWith(const TransportSecurity& security) {
    EtcdClientOptions options;
    options.endpoints = cluster_->endpoints();
    options.security = security;
    options.call_timeout = absl::Seconds(2);
    return options;
  }

  // Expects a Range by a client secured by `security` to be refused as the member's TLS
  // refusal: Unavailable, naming the endpoint, saying TLS and certificate.
  static void ExpectRefused(const TransportSecurity& security) {
    std::unique_ptr<EtcdClient> client = ClientOf(ClientOptionsWith(security));
    ASSERT_NE(client, nullptr);
    absl::StatusOr<etcdserverpb::RangeResponse> range = client->Range("tls/key");
    EXPECT_EQ(range.status().code(), absl::StatusCode::kUnavailable) << range.status();
    EXPECT_THAT(
        std::string(range.status().message()),
        AllOf(HasSubstr(cluster_->endpoint(0)), HasSubstr("TLS"), HasSubstr("certificate")));
  }

  static testing::ScopedTempDir* dir_;
  static testing::TestCertificates* ca_;
  static testing::TestCertificates* other_ca_;
  static EtcdTestCluster* cluster_;
};

testing::ScopedTempDir* EtcdTlsTest::dir_ = nullptr;
testing::TestCertificates* EtcdTlsTest::ca_ = nullptr;
testing::TestCertificates* EtcdTlsTest::other_ca_ = nullptr;
EtcdTestCluster* EtcdTlsTest::cluster_ = nullptr;

TEST_F(EtcdTlsTest, AClientWithACertificateOfTheClustersCaWritesReadsWatchesAndKeepsALease) {
  std::unique_ptr<EtcdClient> client =
      ClientOf(ClientOptionsWith(ca_->Issue("dispatcher", kDispatcherIdentityUri)));
  ASSERT_NE(client, nullptr);

  EventLog log;
  absl::StatusOr<etcdserverpb::PutResponse> first = client->Put("tls/a", "1");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      log.Watch(client.get(), "tls/", first->header().revision());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE((*watch)->WaitUntilCreated(absl::Seconds(5)).ok());

  absl::StatusOr<etcdserverpb::LeaseGrantResponse> lease = client->LeaseGrant(1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client->Put("tls/owned", "2", lease->id()).ok());
  LossLog loss;
  absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> keep_alive =
      LeaseKeepAlive::Start(client.get(), lease->id(), lease->ttl(), loss.Callback());
  ASSERT_TRUE(keep_alive.ok()) << keep_alive.status();
  // Well past the TTL, the lease (and its key) lives: the keep-alive stream works over TLS.
  absl::SleepFor(absl::Seconds(lease->ttl()) * 2.5);
  EXPECT_TRUE((*keep_alive)->alive()) << (*keep_alive)->status();
  EXPECT_GE((*keep_alive)->refreshes(), 4);

  absl::StatusOr<etcdserverpb::RangeResponse> range = client->Range("tls/", PrefixRangeEnd("tls/"));
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->kvs_size(), 2);
  EXPECT_EQ(range->kvs(0).value(), "1");
  EXPECT_EQ(range->kvs(1).value(), "2");
  EXPECT_EQ(range->kvs(1).lease(), lease->id());
  ASSERT_TRUE(Eventually([&] { return log.size() >= 2; }, absl::Seconds(5))) << log.size();
  const std::vector<mvccpb::Event> events = log.events();
  EXPECT_EQ(events[0].kv().key(), "tls/a");
  EXPECT_EQ(events[1].kv().key(), "tls/owned");
  EXPECT_FALSE(log.ended()) << log.end();

  ASSERT_TRUE(client->LeaseRevoke(lease->id()).ok());
  ASSERT_TRUE(loss.lost.WaitForNotificationWithTimeout(absl::Seconds(lease->ttl() + 2)));
  EXPECT_EQ(loss.why.code(), absl::StatusCode::kNotFound) << loss.why;
}

TEST_F(EtcdTlsTest, AClientWithoutACertificateIsRefusedNamingTheEndpointAndTls) {
  ExpectRefused(TransportSecurity{.ca_file = ca_->ca_file()});
}

TEST_F(EtcdTlsTest, AClientWithACertificateOfAnotherCaIsRefusedNamingTheEndpointAndTls) {
  // It trusts the member (its CA), but the member does not trust its certificate.
  TransportSecurity security = other_ca_->Issue("stranger", kDispatcherIdentityUri);
  security.ca_file = ca_->ca_file();
  ExpectRefused(security);
}

TEST_F(EtcdTlsTest, AClientTrustingAnotherCaRefusesTheMembersNamingTheEndpointAndTls) {
  ExpectRefused(other_ca_->Issue("trusting-another-ca", kDispatcherIdentityUri));
}

TEST_F(EtcdTlsTest, APlainTextClientIsRefusedNamingTheEndpoint) {
  std::unique_ptr<EtcdClient> client = ClientOf(ClientOptionsWith({.insecure = true}));
  ASSERT_NE(client, nullptr);
  absl::StatusOr<etcdserverpb::RangeResponse> range = client->Range("tls/key");
  EXPECT_FALSE(range.ok());
  EXPECT_THAT(std::string(range.status().message()), HasSubstr(cluster_->endpoint(0)));
}

}  // namespace
}  // namespace granary::etcd
