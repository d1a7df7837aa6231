// The replicated dispatcher (issue 32) on real processes: a 3-member etcd started from Debian's
// `etcd` binary, three `granary dispatcher --journal etcd://...` replicas, workers and a trainer
// given every replica's address. The leader is SIGKILLed mid-epoch while the trainer reads and
// the workers lease splits: a follower takes over, and the epoch's digest equals the in-process
// run's — nothing leased twice, nothing lost; so too when leaders crash at the journal's
// failpoints (after etcd committed a record, before it was applied or answered). Leases
// acknowledged by a killed leader are
// answered the same by its successor. An etcd member's death does not stop the service; with two
// of three gone it refuses state changes, loses nothing and resumes when one returns. Bad start
// inputs (an unreachable etcd, a missing replica id, both journals) are clear errors, not hangs.
// With TLS throughout — etcd authenticating the replicas by their certificates — a killed leader
// is replaced just the same.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dispatcher_targets.h"
#include "common/env.h"
#include "common/failpoints.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/pipeline_loader.h"
#include "security/peer_identity.h"
#include "security/transport_security.h"
#include "testing/etcd_test_cluster.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_certificates.h"
#include "tests/in_process_digest.h"
#include "tests/local_cluster.h"
#include "tests/read_into_digest.h"

namespace granary {
namespace {

constexpr uint64_t kSeed = 21;
constexpr absl::Duration kFailoverTimeout = absl::Seconds(20);

// 200 splits of 50 values, batches of 10: 1000 elements per epoch.
PipelineDef Pipeline() {
  return PipelineBuilder::Range(10000,
                                {{"elements_per_split", int64_t{50}}, {"shuffle_splits", true}})
      .Map("add", {{"value", int64_t{3}}})
      .Batch(10)
      .Build();
}

// The last lines of the file at `path` (a process' log), for failure messages.
std::string LogTail(const std::string& path) {
  const absl::StatusOr<std::string> log = ReadFileToString(Env::Default(), path);
  if (!log.ok()) return log.status().ToString();
  return log->substr(log->size() > 3000 ? log->size() - 3000 : 0);
}

class ReplicatedDispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::EtcdTestCluster::Options etcd;
    etcd.members = 3;
    if (certificates_ != nullptr) etcd.security = certificates_->Issue("etcd", "granary://etcd");
    auto cluster = testing::EtcdTestCluster::Start(etcd);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    etcd_ = *std::move(cluster);
    journal_ = absl::StrCat("etcd://", absl::StrJoin(etcd_->endpoints(), ","), "/granary");
  }

  void StartGranary(int workers) {
    testing::LocalClusterOptions options{.workers = workers,
                                         .worker_flags = {"--window_bytes=4096"},
                                         .dispatcher_flags = {"--snapshot_every=40"},
                                         .worker_timeout_ms = 2000,
                                         .etcd_journal = journal_,
                                         .replicas = 3};
    if (certificates_ != nullptr) {
      options.issue_certificate = [this](const std::string& name, const std::string& identity) {
        return certificates_->Issue(name, identity);
      };
    }
    cluster_ = std::make_unique<testing::LocalCluster>(dir_.Join("cluster"), options);
    ASSERT_TRUE(cluster_->ok());
    ASSERT_GE(cluster_->LeaderReplica(kFailoverTimeout), 0) << "no replica leads";
  }

  void OpenJob() {
    // Small requests keep the reader close to its trainer, so splits are leased as it reads.
    ClientOptions options{.dispatcher_address = cluster_->dispatcher_address(),
                          .max_bytes_per_request = 1024,
                          .stall_timeout_ms = 60000,
                          .insecure = certificates_ == nullptr};
    if (certificates_ != nullptr) {
      const TransportSecurity trainer =
          certificates_->Issue("trainer", ClientIdentityUri("trainer"));
      options.tls_ca_file = trainer.ca_file;
      options.tls_cert_file = trainer.cert_file;
      options.tls_key_file = trainer.key_file;
    }
    auto client = Client::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    auto dataset = client_->RegisterPipeline(Pipeline());
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    auto job = client_->OpenJob(*dataset, {.name = "replicated", .seed = kSeed});
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = *std::move(job);
  }

  static void ExpectExactlyOnce(const EpochDigest& digest, int64_t epoch) {
    const testing::InProcessDigest expected = testing::DigestInProcess(Pipeline(), kSeed, epoch);
    EXPECT_EQ(digest.rows(), expected.rows) << "seed " << kSeed << " epoch " << epoch;
    EXPECT_EQ(digest.multiset(), expected.multiset) << "seed " << kSeed << " epoch " << epoch;
  }

  // SIGKILLs the leading replica; returns its index.
  int KillLeader() {
    const int leader = cluster_->LeaderReplica(kFailoverTimeout);
    EXPECT_GE(leader, 0);
    if (leader >= 0) cluster_->StopDispatcher(SIGKILL, leader);
    return leader;
  }

  // Reads epoch `epoch` of the job, SIGKILLing the leading replica after 300 elements, and
  // expects it exactly once; then restarts the killed replica (it comes back as a follower).
  void ReadEpochKillingTheLeader(int64_t epoch) {
    auto reader = job_->ReadEpoch(epoch);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EpochDigest digest(true);
    absl::StatusOr<bool> ended = testing::ReadIntoDigest(**reader, 300, digest);
    ASSERT_TRUE(ended.ok() && !*ended) << ended.status();
    const int killed = KillLeader();
    ASSERT_GE(killed, 0);
    ended = testing::ReadIntoDigest(**reader, -1, digest);
    ASSERT_TRUE(ended.ok() && *ended) << ended.status();
    ExpectExactlyOnce(digest, epoch);
    ASSERT_TRUE(cluster_->RestartDispatcher(killed));
  }

  testing::ScopedTempDir dir_;
  // TLS throughout when set (before SetUp): etcd, the replicas, workers and the trainer.
  std::unique_ptr<testing::TestCertificates> certificates_;
  std::unique_ptr<testing::EtcdTestCluster> etcd_;
  std::string journal_;
  std::unique_ptr<testing::LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Job> job_;
};

TEST_F(ReplicatedDispatcherTest, TheLeaderKilledMidEpochLosesAndRepeatsNothing) {
  StartGranary(2);
  OpenJob();
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    ReadEpochKillingTheLeader(epoch);
    if (HasFatalFailure()) return;
  }
}

// TLS throughout: etcd serves https and admits only clients with a certificate of the cluster's
// CA (--client-cert-auth); each replica presents its dispatcher certificate (--tls_cert) to
// etcd as to its callers; workers and the trainer present theirs.
class ReplicatedDispatcherTlsTest : public ReplicatedDispatcherTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("tls")).ok());
    certificates_ = std::make_unique<testing::TestCertificates>(dir_.Join("tls"));
    ASSERT_TRUE(certificates_->ok());
    ReplicatedDispatcherTest::SetUp();
  }
};

TEST_F(ReplicatedDispatcherTlsTest, OnATlsEtcdTheLeaderKilledMidEpochLosesAndRepeatsNothing) {
  StartGranary(2);
  OpenJob();
  ReadEpochKillingTheLeader(0);
}

TEST_F(ReplicatedDispatcherTest, AnEtcdMemberKilledDoesNotStopTheService) {
  StartGranary(1);
  OpenJob();
  auto reader = job_->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EpochDigest digest(true);
  absl::StatusOr<bool> ended = testing::ReadIntoDigest(**reader, 200, digest);
  ASSERT_TRUE(ended.ok() && !*ended) << ended.status();
  // Kill the raft leader of etcd (the member most likely to matter).
  const absl::StatusOr<int> etcd_leader = etcd_->LeaderIndex();
  ASSERT_TRUE(etcd_leader.ok()) << etcd_leader.status();
  etcd_->KillMember(*etcd_leader);
  ended = testing::ReadIntoDigest(**reader, -1, digest);
  ASSERT_TRUE(ended.ok() && *ended) << ended.status();
  ExpectExactlyOnce(digest, 0);
}

// As dispatcher_process_test's SigkillMidStreamLosesNoAcknowledgedUpdate, across a failover:
// streams lease splits through every replica's address (following redirects) while the leader
// is SIGKILLed; every (task, seq) -> split the old leader acknowledged is answered the same by
// the new one, and no split is leased to two tasks.
TEST_F(ReplicatedDispatcherTest, LeasesAcknowledgedByAKilledLeaderAreAnsweredTheSameByItsSuccessor) {
  StartGranary(0);
  auto targets = DispatcherTargets::Create(cluster_->dispatcher_address(), "dispatcher",
                                           grpc::InsecureChannelCredentials(), {});
  ASSERT_TRUE(targets.ok()) << targets.status();
  // Calls `rpc` on the leader, following redirects and retrying Unavailable for a while.
  const auto call = [&](const DispatcherTargets::Rpc& rpc) {
    const absl::Time deadline = absl::Now() + kFailoverTimeout;
    for (;;) {
      const grpc::Status status = (*targets)->Call([] { return testing::RpcContext(); }, rpc);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE || absl::Now() > deadline) {
        return status;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  };
  auto def = ParsePipelineJson(
      R"({"source": {"type": "range", "params": {"stop": 4000, "elements_per_split": 10}}})", "p");
  ASSERT_TRUE(def.ok());
  RegisterDatasetRequest dataset_request;
  *dataset_request.mutable_pipeline() = *def;
  RegisterDatasetResponse dataset;
  ASSERT_TRUE(call([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                return stub.RegisterDataset(context, dataset_request, &dataset);
              }).ok());
  RegisterWorkerRequest worker;
  worker.set_worker_id("w0");
  worker.set_address("127.0.0.1:1");
  RegisterWorkerResponse registered;
  ASSERT_TRUE(call([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                return stub.RegisterWorker(context, worker, &registered);
              }).ok());
  GetOrCreateJobRequest job_request;
  job_request.set_dataset_id(dataset.dataset_id());
  job_request.set_name("job");
  job_request.mutable_options()->set_num_worker_slots(4);
  GetOrCreateJobResponse job;
  ASSERT_TRUE(call([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                return stub.GetOrCreateJob(context, job_request, &job);
              }).ok());
  StartEpochRequest epoch_request;
  epoch_request.set_job_id(job.job_id());
  StartEpochResponse epoch;
  ASSERT_TRUE(call([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                return stub.StartEpoch(context, epoch_request, &epoch);
              }).ok());
  ASSERT_EQ(epoch.num_tasks(), 4);

  absl::Mutex mu;
  std::map<std::pair<int64_t, int64_t>, uint64_t> acked;  // (task, seq) -> split id
  std::atomic<int64_t> acks{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> streams;
  for (int64_t task = 1; task <= 4; ++task) {
    streams.emplace_back([&, task] {
      int64_t seq = 0;
      while (!stop) {
        GetSplitsRequest request;
        request.set_task_id(task);
        request.set_from_seq(seq);
        request.set_max(1);
        GetSplitsResponse response;
        const grpc::Status status = call([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
          return stub.GetSplits(context, request, &response);
        });
        if (!status.ok() || response.splits_size() == 0) continue;
        absl::MutexLock lock(&mu);
        acked[{task, seq++}] = response.splits(0).id();
        ++acks;
      }
    });
  }
  while (acks < 100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GE(KillLeader(), 0);
  const int64_t at_kill = acks;
  // The streams go on through the successor.
  const absl::Time deadline = absl::Now() + kFailoverTimeout;
  while (acks < at_kill + 100 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (std::thread& t : streams) t.join();
  absl::MutexLock lock(&mu);
  EXPECT_GE(acks.load(), at_kill + 100) << "the streams did not go on after the failover";
  std::set<uint64_t> leased;
  for (const auto& [key, split_id] : acked) {
    EXPECT_TRUE(leased.insert(split_id).second)
        << "split " << split_id << " leased twice (task " << key.first << " seq " << key.second
        << ")";
    GetSplitsRequest request;
    request.set_task_id(key.first);
    request.set_from_seq(key.second);
    request.set_max(1);
    GetSplitsResponse response;
    const grpc::Status status = call([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
      return stub.GetSplits(context, request, &response);
    });
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.splits_size(), 1) << "task " << key.first << " seq " << key.second;
    EXPECT_EQ(response.splits(0).id(), split_id) << "task " << key.first << " seq " << key.second;
  }
}

TEST_F(ReplicatedDispatcherTest, TwoOfThreeEtcdMembersDownRefusesChangesLosesNothingAndResumes) {
  StartGranary(0);
  auto targets = DispatcherTargets::Create(cluster_->dispatcher_address(), "dispatcher",
                                           grpc::InsecureChannelCredentials(), {});
  ASSERT_TRUE(targets.ok()) << targets.status();
  // A state-changing call: opens job `name` of the dataset (a new journal record each name).
  RegisterDatasetResponse dataset;
  const auto open_job = [&](const std::string& name) {
    GetOrCreateJobRequest request;
    request.set_dataset_id(dataset.dataset_id());
    request.set_name(name);
    GetOrCreateJobResponse response;
    return (*targets)->Call([] { return testing::RpcContext(); },
                            [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                              return stub.GetOrCreateJob(context, request, &response);
                            });
  };
  auto def = ParsePipelineJson(R"({"source": {"type": "range", "params": {"stop": 100}}})", "p");
  ASSERT_TRUE(def.ok());
  RegisterDatasetRequest dataset_request;
  *dataset_request.mutable_pipeline() = *def;
  const absl::Time deadline = absl::Now() + kFailoverTimeout;
  grpc::Status registered;
  do {
    registered = (*targets)->Call([] { return testing::RpcContext(); },
                                  [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                                    return stub.RegisterDataset(context, dataset_request, &dataset);
                                  });
  } while (!registered.ok() && absl::Now() < deadline);
  ASSERT_TRUE(registered.ok()) << registered.error_message();
  ASSERT_TRUE(open_job("before").ok());

  etcd_->KillMember(0);
  etcd_->KillMember(1);
  // No quorum: nothing can be committed, so no state change is acknowledged.
  const grpc::Status refused = open_job("during");
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(refused.error_code() == grpc::StatusCode::UNAVAILABLE ||
              refused.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      << refused.error_code() << ": " << refused.error_message();

  // One member back: a quorum again; the service resumes with what it had.
  ASSERT_TRUE(etcd_->RestartMember(0).ok());
  grpc::Status resumed;
  for (const absl::Time until = absl::Now() + absl::Seconds(30);
       !(resumed = open_job("after")).ok() && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(resumed.ok()) << resumed.error_message();
  GetStatusResponse status;
  ASSERT_TRUE((*targets)
                  ->Call([] { return testing::RpcContext(); },
                         [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                           return stub.GetStatus(context, GetStatusRequest(), &status);
                         })
                  .ok());
  std::set<std::string> jobs;
  for (const JobState& job : status.state().jobs()) jobs.insert(job.name());
  EXPECT_TRUE(jobs.count("before")) << "a job acknowledged before the outage was lost";
  EXPECT_TRUE(jobs.count("after"));
}

TEST_F(ReplicatedDispatcherTest, BadStartInputsAreClearErrorsNotHangs) {
  const struct {
    std::vector<std::string> flags;
    std::string named;
  } cases[] = {
      // Nothing listens on port 1: the error names the endpoint, within the call deadline.
      {{"--journal=etcd://127.0.0.1:1/granary", "--replica_id=r0"}, "127.0.0.1:1"},
      {{"--journal=" + journal_}, "--journal etcd://... needs --replica_id"},
      {{"--journal=" + journal_, "--replica_id=r0", "--journal_dir=" + dir_.Join("j")},
       "give either --journal_dir"},
      {{"--journal=etcd://127.0.0.1:2379", "--replica_id=r0"}, "no /PREFIX"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {GRANARY_BINARY, "dispatcher", "--insecure", "--port=0"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    Subprocess dispatcher(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = dispatcher.ReadAll(std::chrono::seconds(30));
    EXPECT_EQ(dispatcher.WaitFor(std::chrono::seconds(10)), 1) << c.flags[0] << "\n" << output;
    EXPECT_NE(output.find(c.named), std::string::npos) << output;
  }
}

// Every replica is armed to crash once, at its 20th hit of the failpoint: each leader in turn dies
// there mid-epoch (the record committed in etcd, not applied or not answered), its successor
// takes over, and the test restarts the crashed one (unarmed). The epoch is exactly once.
class ReplicatedDispatcherFailpointTest : public ReplicatedDispatcherTest,
                                          public ::testing::WithParamInterface<const char*> {};

TEST_P(ReplicatedDispatcherFailpointTest, LeadersCrashingThereLoseAndRepeatNothing) {
  ::setenv("GRANARY_FAILPOINTS", absl::StrCat(GetParam(), "=after(20):crash").c_str(), 1);
  StartGranary(2);
  ::unsetenv("GRANARY_FAILPOINTS");
  OpenJob();
  auto reader = job_->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EpochDigest digest(true);
  int crashes = 0;
  for (bool ended = false; !ended;) {
    absl::StatusOr<bool> read = testing::ReadIntoDigest(**reader, 25, digest);
    ASSERT_TRUE(read.ok()) << read.status();
    ended = *read;
    for (int i = 0; i < 3; ++i) {
      if (cluster_->DispatcherRunning(i)) continue;
      ++crashes;
      ASSERT_TRUE(cluster_->RestartDispatcher(i))
          << "replica " << i << "; its log ends:\n"
          << LogTail(dir_.Join(absl::StrCat("cluster/logs/dispatcher-", i, ".log")));
    }
  }
  EXPECT_GE(crashes, 1) << "no leader reached the failpoint";
  ExpectExactlyOnce(digest, 0);
}

INSTANTIATE_TEST_SUITE_P(JournalFailpoints, ReplicatedDispatcherFailpointTest,
                         ::testing::Values(kJournalAfterWriteBeforeApply.name,
                                           kDispatcherAfterLeaseBeforeReply.name));

}  // namespace
}  // namespace granary
