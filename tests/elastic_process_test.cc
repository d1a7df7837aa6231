// Elastic tasks (issue 17) against real dispatcher and worker processes on 127.0.0.1: a job's
// running epoch gains tasks on more workers and sheds them while its reader reads, and every
// element still arrives exactly once — the epoch's digest equals the in-process run's — also
// when the worker that joined is SIGKILLed, and when the dispatcher dies right after journaling
// a scaling step.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/failpoint.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "gtest/gtest.h"
#include "pipeline/digests/epoch_digest.h"
#include "testing/scoped_temp_dir.h"
#include "tests/in_process_digest.h"
#include "tests/local_cluster.h"
#include "tests/read_into_digest.h"

namespace granary {
namespace {

constexpr uint64_t kSeed = 13;
// 400 splits of 50 values, batches of 10: 2000 elements, read slowly enough (small worker
// windows) that splits are still unleased when the job scales.
PipelineDef Pipeline() {
  return PipelineBuilder::Range(20000,
                                {{"elements_per_split", int64_t{50}}, {"shuffle_splits", true}})
      .Shuffle(32)
      .Map("add", {{"value", int64_t{7}}})
      .Batch(10)
      .Build();
}

class ElasticTest : public ::testing::Test {
 protected:
  void Start(int workers, std::vector<std::string> dispatcher_flags = {}) {
    cluster_ = std::make_unique<testing::LocalCluster>(
        dir_.Join("cluster"),
        testing::LocalClusterOptions{.workers = workers,
                                     .worker_flags = {"--window_bytes=4096"},
                                     .dispatcher_flags = std::move(dispatcher_flags),
                                     .worker_timeout_ms = 1000});
    ASSERT_TRUE(cluster_->ok());
    // Small requests keep the reader from fetching far ahead of its trainer (its queue holds
    // two requests' bytes), so tasks lease splits only as the trainer reads.
    auto client = Client::Connect({.dispatcher_address = cluster_->dispatcher_address(),
                                   .max_bytes_per_request = 1024,
                                   .stall_timeout_ms = 30000,
                                   .insecure = true});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    auto dataset = client_->RegisterPipeline(Pipeline());
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    auto job =
        client_->OpenJob(*dataset, {.name = "elastic", .seed = kSeed, .num_worker_slots = 1});
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = *std::move(job);
  }

  // Reads `n` elements (all when n < 0) into the digest, a simulated training step of 1 ms
  // each, so that the epoch lasts long enough (~2 s) for workers to pick up new tasks.
  void Read(EpochReader& reader, int64_t n) {
    const absl::StatusOr<bool> ended = testing::ReadIntoDigest(reader, n, digest_);
    ASSERT_TRUE(ended.ok()) << ended.status();
    ended_ = ended_ || *ended;
  }

  // Reads on, a few elements at a time, until every task of epoch 0 has leased a split.
  void ReadUntilEveryTaskLeased(EpochReader& reader) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (true) {
      const std::vector<TaskState> tasks = Tasks(0);
      if (std::all_of(tasks.begin(), tasks.end(),
                      [](const TaskState& t) { return t.leased_size() > 0; })) {
        return;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "a task never leased a split";
      Read(reader, 5);
      ASSERT_FALSE(ended_) << "the epoch ended before every task leased a split";
    }
  }

  void ExpectExactlyOnce(int64_t epoch) {
    ASSERT_TRUE(ended_);
    const testing::InProcessDigest expected = testing::DigestInProcess(Pipeline(), kSeed, epoch);
    EXPECT_EQ(digest_.rows(), expected.rows);
    EXPECT_EQ(digest_.multiset(), expected.multiset) << "seed " << kSeed << " epoch " << epoch;
  }

  // The tasks of epoch `epoch` of the job, from the dispatcher.
  std::vector<TaskState> Tasks(int64_t epoch) {
    GetStatusResponse status;
    const grpc::Status rpc =
        cluster_->dispatcher().GetStatus(testing::RpcContext().get(), {}, &status);
    EXPECT_TRUE(rpc.ok()) << rpc.error_message();
    std::vector<TaskState> tasks;
    for (const TaskState& task : status.state().tasks()) {
      if (task.job_id() == job_->job_id() && task.epoch() == epoch) tasks.push_back(task);
    }
    return tasks;
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<testing::LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Job> job_;
  EpochDigest digest_{true};
  bool ended_ = false;
};

TEST_F(ElasticTest, TasksJoinAndAreShedMidEpochExactlyOnce) {
  Start(3);
  auto reader = job_->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Read(**reader, 300);
  auto grown = job_->Scale(3, "test: grow");
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(*grown, 3);
  ReadUntilEveryTaskLeased(**reader);
  Read(**reader, 100);
  auto shrunk = job_->Scale(1, "test: shrink");
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_EQ(*shrunk, 1);
  Read(**reader, -1);
  ExpectExactlyOnce(0);
  const std::vector<TaskState> tasks = Tasks(0);
  ASSERT_EQ(tasks.size(), 3u);
  std::set<std::string> workers;
  int draining = 0;
  for (const TaskState& task : tasks) {
    EXPECT_TRUE(task.finished());
    EXPECT_GT(task.num_elements(), 0) << "task " << task.task_id() << " never produced";
    workers.insert(task.worker_id());
    draining += task.draining();
  }
  EXPECT_EQ(workers.size(), 3u);
  EXPECT_EQ(draining, 2);
  // The next epoch starts with the job's new size.
  auto next = job_->ReadEpoch(1);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Tasks(1).size(), 1u);
}

TEST_F(ElasticTest, TheJoiningWorkerKilledMidEpochLosesNothing) {
  Start(2);
  auto reader = job_->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Read(**reader, 200);
  ASSERT_TRUE(job_->Scale(2, "test").ok());
  ReadUntilEveryTaskLeased(**reader);
  // The task that joined runs on the worker the first did not.
  const std::vector<TaskState> tasks = Tasks(0);
  ASSERT_EQ(tasks.size(), 2u);
  const std::string joined = tasks[1].worker_id();
  ASSERT_NE(joined, tasks[0].worker_id());
  const int index = joined == cluster_->worker_id(0) ? 0 : 1;
  cluster_->KillWorker(index);
  Read(**reader, 300);
  ASSERT_TRUE(cluster_->RestartWorker(index));
  Read(**reader, -1);
  ExpectExactlyOnce(0);
}

TEST_F(ElasticTest, TheDispatcherDyingRightAfterJournalingAScalingStepLosesNothing) {
  ::setenv("GRANARY_FAILPOINTS", "dispatcher.after_scale_before_reply=crash", 1);
  Start(2);
  ::unsetenv("GRANARY_FAILPOINTS");
  auto reader = job_->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Read(**reader, 200);
  // The dispatcher journals the step, crashes before answering; the client retries the
  // Unavailable call against the restarted dispatcher, where the step is already applied. (The
  // restart is this thread's: a child dies with the thread that started it, PR_SET_PDEATHSIG.)
  absl::StatusOr<int32_t> scaled = absl::UnknownError("not called");
  std::thread scale([&] { scaled = job_->Scale(2, "test"); });
  EXPECT_EQ(cluster_->WaitDispatcherExit(), kFailpointCrashExitCode);
  ASSERT_TRUE(cluster_->RestartDispatcher());
  scale.join();
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  Read(**reader, -1);
  ExpectExactlyOnce(0);
  EXPECT_EQ(Tasks(0).size(), 2u) << "the step applied once, the retry changed nothing";
}

// Autoscaling (issue 17) on real processes: workers whose pipeline costs 20 ms of wall time per
// batch (simulate_cost: a sleep, so five worker processes on two cores behave like five hosts)
// and a trainer stepping every 5 ms. The model-based policy measures both and scales the job from
// 1 task to what the rates call for in at most three decisions; the epoch is exactly once.
TEST(AutoscaleTest, TheModelPolicyScalesToTheMeasuredNeedExactlyOnce) {
  testing::ScopedTempDir dir;
  testing::LocalCluster cluster(dir.Join("cluster"),
                                {.workers = 5, .dispatcher_flags = {"--policy_period_ms=400"}});
  ASSERT_TRUE(cluster.ok());
  auto client = Client::Connect({.dispatcher_address = cluster.dispatcher_address(),
                                 .stall_timeout_ms = 30000,
                                 .insecure = true});
  ASSERT_TRUE(client.ok()) << client.status();
  const PipelineDef def = PipelineBuilder::Range(4000, {{"elements_per_split", int64_t{20}}})
                              .Batch(10)
                              .Map("simulate_cost", {{"us_per_element", int64_t{20000}}})
                              .Build();
  auto dataset = (*client)->RegisterPipeline(def);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto job = (*client)->OpenJob(*dataset, {.name = "autoscaled",
                                           .seed = kSeed,
                                           .num_worker_slots = 1,
                                           .autoscale = JobAutoscale::kModel});
  ASSERT_TRUE(job.ok()) << job.status();
  auto reader = (*job)->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EpochDigest digest(true);
  for (bool end = false;;) {
    ReceivedElement element;
    ASSERT_TRUE((*reader)->Next(&element, &end).ok());
    if (end) break;
    digest.Add(element.tensors());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the trainer's step
  }
  // The reference without the sleeps (simulate_cost leaves every element as it is).
  const PipelineDef reference =
      PipelineBuilder::Range(4000, {{"elements_per_split", int64_t{20}}}).Batch(10).Build();
  const testing::InProcessDigest expected = testing::DigestInProcess(reference, kSeed, 0);
  EXPECT_EQ(digest.rows(), expected.rows);
  EXPECT_EQ(digest.multiset(), expected.multiset);

  GetStatusResponse status;
  ASSERT_TRUE(cluster.dispatcher().GetStatus(testing::RpcContext().get(), {}, &status).ok());
  ASSERT_EQ(status.state().jobs_size(), 1);
  const JobState& state = status.state().jobs(0);
  // 200 batches/s wanted, 50 made per worker: ceil(200 x 1.05 / 50) = 5.
  EXPECT_GE(state.options().num_worker_slots(), 4) << state.last_scaling();
  EXPECT_GE(state.scaling_steps(), 1);
  EXPECT_LE(state.scaling_steps(), 3) << state.last_scaling();
  EXPECT_THAT(state.last_scaling(), ::testing::HasSubstr("model"));
}

}  // namespace
}  // namespace granary
