// EtcdJournal against a real etcd (testing/etcd_test_cluster.h): a prefix is claimed once and
// refused when something else wrote there; concurrent appends get contiguous seqs and recover in
// order; a leader whose election key is gone commits nothing (fencing) and is deposed;
// snapshots are chunked, drop the records they cover and recover; large records go in parts;
// a follower sees every record; a missing record is DataLoss; a request etcd would refuse is
// caught at start-up; the journal's metrics count what it committed.
#include "replication/etcd_journal.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "journal/journal_metrics.h"
#include "testing/etcd_test_cluster.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class EtcdJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::EtcdTestCluster::Options options;
    options.max_request_bytes = 2 << 20;
    auto cluster = testing::EtcdTestCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    auto client = etcd::EtcdClient::Create(cluster_->ClientOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<EtcdJournal> Open(int64_t max_txn_bytes = 1 << 20) {
    EtcdJournalOptions options;
    options.prefix = "/granary/test";
    options.max_txn_bytes = max_txn_bytes;
    auto journal = EtcdJournal::Open(client_.get(), options);
    EXPECT_TRUE(journal.ok()) << journal.status();
    return journal.ok() ? *std::move(journal) : nullptr;
  }

  // An election key of a fresh lease, as LeaderElection makes it: the journal's fence.
  struct Fence {
    std::string key;
    int64_t revision = 0;
    int64_t lease = 0;
  };
  Fence MakeFence(const std::string& name) {
    Fence fence;
    auto lease = client_->LeaseGrant(30);
    EXPECT_TRUE(lease.ok()) << lease.status();
    fence.lease = lease->id();
    fence.key = "/granary/test/election/" + name;
    auto put = client_->Put(fence.key, name, fence.lease);
    EXPECT_TRUE(put.ok()) << put.status();
    fence.revision = put->header().revision();
    return fence;
  }
  void Lead(EtcdJournal& journal, const Fence& fence, uint64_t next_seq) {
    journal.Lead(fence.key, fence.revision, next_seq, [this](const absl::Status& why) {
      deposed_ = why;
      deposed_once_.Notify();
    });
  }

  std::unique_ptr<testing::EtcdTestCluster> cluster_;
  std::unique_ptr<etcd::EtcdClient> client_;
  absl::Status deposed_;
  absl::Notification deposed_once_;
};

TEST_F(EtcdJournalTest, APrefixSomethingElseWroteIsRefusedNamingAKey) {
  ASSERT_TRUE(client_->Put("/granary/test/other", "not ours").ok());
  EtcdJournalOptions options;
  options.prefix = "/granary/test";
  const auto journal = EtcdJournal::Open(client_.get(), options);
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(journal.status().message(), HasSubstr("/granary/test/other"));
  // A sibling prefix that merely starts with the same letters is not in the way.
  options.prefix = "/granary/tes";
  EXPECT_TRUE(EtcdJournal::Open(client_.get(), options).ok());
}

TEST_F(EtcdJournalTest, AnotherFormatVersionIsRefused) {
  ASSERT_TRUE(client_->Put("/granary/test/format", "\x08\x07").ok());  // version 7
  EtcdJournalOptions options;
  options.prefix = "/granary/test";
  const auto journal = EtcdJournal::Open(client_.get(), options);
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(journal.status().message(), HasSubstr("version 7"));
}

TEST_F(EtcdJournalTest, ConcurrentAppendsGetContiguousSeqsAndRecoverInOrder) {
  std::unique_ptr<EtcdJournal> journal = Open();
  ASSERT_NE(journal, nullptr);
  EXPECT_EQ(journal->Append("x").status().code(), absl::StatusCode::kUnavailable)
      << "a journal that does not lead appends nothing";
  Lead(*journal, MakeFence("a"), 1);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!journal->Append(absl::StrCat("record ", t, " ", i)).ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  // A second journal object (another replica) recovers all of them, seqs 1..N in order.
  std::unique_ptr<EtcdJournal> other = Open();
  const auto recovered = other->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->records.size(), static_cast<size_t>(kThreads * kPerThread));
  for (size_t i = 0; i < recovered->records.size(); ++i) {
    EXPECT_EQ(recovered->records[i].first, i + 1);
  }
  EXPECT_FALSE(recovered->has_snapshot);
  EXPECT_EQ(*other->LastSeq(), static_cast<uint64_t>(kThreads * kPerThread));
}

TEST_F(EtcdJournalTest, MetricsCountTheCommittedRecordsTheirGroupsAndCommitTimes) {
  MetricRegistry registry;
  EtcdJournalOptions options;
  options.prefix = "/granary/test";
  options.metrics = &registry;
  auto opened = EtcdJournal::Open(client_.get(), options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<EtcdJournal> journal = *std::move(opened);
  const JournalMetrics metrics = JournalMetrics::In(&registry);
  Lead(*journal, MakeFence("a"), 1);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) ASSERT_TRUE(journal->Append("r").ok());
    });
  }
  for (std::thread& thread : threads) thread.join();
  constexpr int kRecords = kThreads * kPerThread;
  EXPECT_EQ(metrics.appends->value(), kRecords);
  const Histogram::Snapshot groups = metrics.group_size->Take();
  const Histogram::Snapshot commits = metrics.commit_seconds->Take();
  EXPECT_EQ(groups.sum, kRecords) << "every record in exactly one committed group";
  EXPECT_EQ(commits.count, groups.count) << "one commit time per group";
  EXPECT_GE(groups.count, 2u);  // 8 writers: some groups carry several records
  EXPECT_LE(groups.count, static_cast<uint64_t>(kRecords));
  EXPECT_GT(commits.sum, 0);
  ASSERT_TRUE(journal->WriteSnapshot(kRecords, "state").ok());
  EXPECT_EQ(metrics.snapshot_seconds->Take().count, 1u);
  // A refused append counts nothing.
  journal->StopLeading(absl::CancelledError("the test stops leading"));
  EXPECT_FALSE(journal->Append("refused").ok());
  EXPECT_EQ(metrics.appends->value(), kRecords);
}

TEST_F(EtcdJournalTest, ALeaderWhoseElectionKeyIsGoneCommitsNothingAndIsDeposed) {
  std::unique_ptr<EtcdJournal> journal = Open();
  const Fence fence = MakeFence("a");
  Lead(*journal, fence, 1);
  ASSERT_TRUE(journal->Append("before").ok());
  // Its lease ends (as when it is cut off from etcd for a TTL): etcd deletes the key.
  ASSERT_TRUE(client_->LeaseRevoke(fence.lease).ok());
  const absl::StatusOr<uint64_t> after = journal->Append("after");
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(after.status().message(), HasSubstr("no longer leads"));
  ASSERT_TRUE(deposed_once_.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_THAT(deposed_.message(), HasSubstr("no longer leads"));
  EXPECT_FALSE(journal->leading());
  EXPECT_EQ(journal->Append("later").status().code(), absl::StatusCode::kUnavailable);
  // A new leader (same key name, recreated: another create revision) — the old fence no longer
  // matches it either.
  const Fence next = MakeFence("a");
  std::unique_ptr<EtcdJournal> successor = Open();
  Lead(*successor, next, *successor->LastSeq() + 1);
  ASSERT_TRUE(successor->Append("successor").ok());
  const auto recovered = successor->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->records.size(), 2u);
  EXPECT_EQ(recovered->records[0].second, "before");
  EXPECT_EQ(recovered->records[1].second, "successor");
}

TEST_F(EtcdJournalTest, SnapshotsAreChunkedDropTheRecordsTheyCoverAndRecover) {
  // 1000-byte chunks: a 4500-byte snapshot takes 5.
  std::unique_ptr<EtcdJournal> journal = Open(/*max_txn_bytes=*/1000);
  Lead(*journal, MakeFence("a"), 1);
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(journal->Append(absl::StrCat("r", i)).ok());
  std::string snapshot(4500, '\0');
  for (size_t i = 0; i < snapshot.size(); ++i) snapshot[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(journal->WriteSnapshot(4, snapshot).ok());
  ASSERT_TRUE(journal->Append("r6").ok());
  const auto chunks = client_->Range("/granary/test/snapshots/",
                                     etcd::PrefixRangeEnd("/granary/test/snapshots/"));
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(chunks->kvs_size(), 5);
  const auto recovered = Open(1000)->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_TRUE(recovered->has_snapshot);
  EXPECT_EQ(recovered->snapshot_seq, 4u);
  EXPECT_EQ(recovered->snapshot, snapshot);
  ASSERT_EQ(recovered->records.size(), 2u);
  EXPECT_EQ(recovered->records[0], std::make_pair(uint64_t{5}, std::string("r5")));
  EXPECT_EQ(recovered->records[1], std::make_pair(uint64_t{6}, std::string("r6")));
  // Records 1..4 are gone from etcd; a second snapshot replaces the first.
  const auto old = client_->Range(journal->RecordKey(1));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->kvs_size(), 0);
  ASSERT_TRUE(journal->WriteSnapshot(6, "small").ok());
  const auto after = Open(1000)->Recover();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->snapshot_seq, 6u);
  EXPECT_EQ(after->snapshot, "small");
  EXPECT_TRUE(after->records.empty());
  EXPECT_EQ(*journal->LastSeq(), 6u);
}

TEST_F(EtcdJournalTest, ARecordLargerThanARequestIsStoredInPartsAndReadWhole) {
  std::unique_ptr<EtcdJournal> journal = Open(/*max_txn_bytes=*/1000);
  Lead(*journal, MakeFence("a"), 1);
  std::string large(3500, 'x');
  large[1234] = 'y';
  ASSERT_EQ(*journal->Append("small"), 1u);
  ASSERT_EQ(*journal->Append(large), 2u);
  ASSERT_EQ(*journal->Append("after"), 3u);
  const auto recovered = Open(1000)->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->records.size(), 3u);
  EXPECT_EQ(recovered->records[1].second, large);
  EXPECT_EQ(recovered->records[2].second, "after");
}

TEST_F(EtcdJournalTest, AFollowerIsGivenEveryRecordInOrder) {
  std::unique_ptr<EtcdJournal> leader = Open(/*max_txn_bytes=*/1000);
  std::unique_ptr<EtcdJournal> follower = Open(1000);
  ASSERT_TRUE(follower->Recover().ok());
  absl::Mutex mu;
  std::vector<std::pair<uint64_t, std::string>> seen;
  auto watch = follower->Follow(
      follower->recovered_revision() + 1,
      [&](uint64_t seq, const absl::StatusOr<std::string>& record) {
        absl::MutexLock lock(&mu);
        seen.emplace_back(seq, record.ok() ? *record : record.status().ToString());
      },
      [](const absl::Status&) {});
  ASSERT_TRUE(watch.ok()) << watch.status();
  Lead(*leader, MakeFence("a"), 1);
  const std::string large(2500, 'z');
  ASSERT_TRUE(leader->Append("one").ok());
  ASSERT_TRUE(leader->Append(large).ok());
  ASSERT_TRUE(leader->Append("three").ok());
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(
      absl::Condition(+[](decltype(seen)* s) { return s->size() >= 3; }, &seen),
      absl::Seconds(10)));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(uint64_t{1}, std::string("one")));
  EXPECT_EQ(seen[1], std::make_pair(uint64_t{2}, large));
  EXPECT_EQ(seen[2], std::make_pair(uint64_t{3}, std::string("three")));
}

TEST_F(EtcdJournalTest, AMissingRecordIsDataLossNamingIt) {
  std::unique_ptr<EtcdJournal> journal = Open();
  Lead(*journal, MakeFence("a"), 1);
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(journal->Append(absl::StrCat("r", i)).ok());
  ASSERT_TRUE(client_->DeleteRange(journal->RecordKey(2)).ok());
  const auto recovered = Open()->Recover();
  EXPECT_EQ(recovered.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(recovered.status().message(), HasSubstr("after record 1"));
  EXPECT_THAT(recovered.status().message(), HasSubstr(journal->RecordKey(2)));
}

TEST_F(EtcdJournalTest, ARequestSizeEtcdRefusesIsCaughtAtStartUp) {
  std::unique_ptr<EtcdJournal> journal = Open();
  EXPECT_TRUE(journal->CheckRecordFits(1 << 20).ok());
  // The cluster takes requests up to 2 MiB.
  const absl::Status too_large = journal->CheckRecordFits(3 << 20);
  EXPECT_EQ(too_large.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_large.message(), HasSubstr("--max-request-bytes"));
}

TEST_F(EtcdJournalTest, AnUnreachableEtcdIsAClearErrorNamingTheEndpoints) {
  etcd::EtcdClientOptions options = cluster_->ClientOptions();
  options.endpoints = {"127.0.0.1:1"};
  options.call_timeout = absl::Milliseconds(500);
  auto client = etcd::EtcdClient::Create(options);
  ASSERT_TRUE(client.ok());
  EtcdJournalOptions journal_options;
  journal_options.prefix = "/granary/test";
  const auto journal = EtcdJournal::Open(client->get(), journal_options);
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(journal.status().message(), HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace granary
