// DispatcherImpl over a real RocksDB journal: recovery reproduces the state exactly (across
// snapshot boundaries), split leases are idempotent and hand out every split of an epoch
// exactly once, also across reassignment and restart.
#include "dispatcher/dispatcher_impl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/cache_gc.h"
#include "cache/cache_ops.h"
#include "cache/cache_policy.h"
#include "common/deterministic_serialization.h"
#include "common/failpoint.h"
#include "common/manual_clock_env.h"
#include "common/scoped_temp_dir.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/exposition_parser.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kTimeoutMs = 1000;
constexpr int64_t kRetentionMs = 60000;

class DispatcherImplTest : public ::testing::Test {
 protected:
  void Open(int64_t snapshot_every = 10000, const std::string& cache_root = "") {
    impl_.reset();
    auto impl = DispatcherImpl::Open(Options(snapshot_every, cache_root));
    ASSERT_TRUE(impl.ok()) << impl.status();
    impl_ = std::move(impl).value();
  }
  DispatcherOptions Options(int64_t snapshot_every = 10000, const std::string& cache_root = "") {
    DispatcherOptions options;
    options.journal_dir = dir_.path() + "/journal";
    options.snapshot_every = snapshot_every;
    options.cache_root = cache_root;
    options.cache_capacity_bytes = cache_capacity_bytes_;
    options.cache_wait_ms = cache_wait_ms_;
    // The failure detector's own thread polls every timeout/4 of the machine's time, but this
    // test's clock only moves when the test says so.
    options.worker_timeout_ms = kTimeoutMs;
    options.job_retention_ms = kRetentionMs;
    options.env = &clock_;
    options.registries = &registries_;
    options.check_invariants = true;
    options.metrics = &metrics_;
    // Some tests register pipelines larger than a gRPC message, as no client can.
    options.limits.pipeline_bytes = 64 << 20;
    return options;
  }

  std::string ClusterId() {
    GetStatusResponse status;
    EXPECT_TRUE(impl_->GetStatus({}, &status).ok());
    return status.state().cluster_id();
  }

  std::string State() {
    GetStatusResponse status;
    EXPECT_TRUE(impl_->GetStatus({}, &status).ok());
    return SerializeDeterministically(status.state());
  }

  std::string RegisterRangeDataset(int64_t stop, int64_t per_split) {
    auto def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "range", "params": {"stop": )", stop,
                     R"(, "elements_per_split": )", per_split, R"(, "shuffle_splits": true}}})"),
        "range.json");
    EXPECT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    EXPECT_TRUE(impl_->RegisterDataset(request, &response).ok());
    return response.dataset_id();
  }

  int64_t CreateJob(const std::string& dataset, const std::string& name, int consumers = 1,
                    int slots = 0) {
    GetOrCreateJobRequest request;
    request.set_dataset_id(dataset);
    request.set_name(name);
    request.mutable_options()->set_seed(3);
    request.mutable_options()->set_num_consumers(consumers);
    request.mutable_options()->set_num_worker_slots(slots);
    GetOrCreateJobResponse response;
    const absl::Status status = impl_->GetOrCreateJob(request, &response);
    EXPECT_TRUE(status.ok()) << status;
    return response.job_id();
  }

  absl::Status StartEpoch(int64_t job, int64_t epoch) {
    StartEpochRequest request;
    request.set_job_id(job);
    request.set_epoch(epoch);
    StartEpochResponse response;
    return impl_->StartEpoch(request, &response);
  }

  int64_t RegisterWorker(const std::string& id, bool standby = false) {
    RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_address(id + ".local:7000");
    request.set_standby(standby);
    RegisterWorkerResponse response;
    EXPECT_TRUE(impl_->RegisterWorker(request, &response).ok());
    return response.incarnation();
  }

  absl::StatusOr<GetSplitsResponse> Splits(int64_t task, int64_t from, int64_t max) {
    GetSplitsRequest request;
    request.set_task_id(task);
    request.set_from_seq(from);
    request.set_max(max);
    GetSplitsResponse response;
    absl::Status status = impl_->GetSplits(request, &response);
    if (!status.ok()) return status;
    return response;
  }

  // Heartbeats every registered worker except `silent`, moves the clock past the timeout and
  // runs the failure detector.
  void LoseWorker(const std::string& silent) {
    clock_.AdvanceMicros(kTimeoutMs * 1000 + 1);
    GetStatusResponse status;
    ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
    for (const WorkerState& w : status.state().workers()) {
      if (w.worker_id() == silent || w.lost()) continue;
      WorkerHeartbeatRequest hb;
      hb.set_worker_id(w.worker_id());
      hb.set_incarnation(w.incarnation());
      WorkerHeartbeatResponse ignored;
      ASSERT_TRUE(impl_->WorkerHeartbeat(hb, &ignored).ok());
    }
    ASSERT_TRUE(impl_->CheckLiveness().ok());
  }

  testing::ScopedTempDir dir_;
  ManualClockEnv clock_{Env::Default()};
  PipelineRegistries registries_ = PipelineRegistriesWithCache();
  // DispatcherOptions.cache_capacity_bytes and cache_wait_ms of the next Open (short: a
  // StartEpoch waiting for a cache decision or Put).
  int64_t cache_capacity_bytes_ = 0;
  int64_t cache_wait_ms_ = 20;
  // Where the journal counts (DispatcherOptions.metrics); outlives impl_.
  MetricRegistry metrics_;
  std::unique_ptr<DispatcherImpl> impl_;
};

// Drives a seeded random sequence of RPCs, "crashing" (dropping the dispatcher without any
// shutdown step) and reopening at random points; after each reopen the state must equal the
// state before, byte for byte.
class ReplayEquivalenceTest : public DispatcherImplTest,
                              public ::testing::WithParamInterface<std::tuple<int64_t, uint32_t>> {
};

TEST_P(ReplayEquivalenceTest, RecoveredStateEqualsStateBeforeTheCrash) {
  const auto [snapshot_every, seed] = GetParam();
  SCOPED_TRACE(absl::StrCat("seed ", seed, ", snapshot_every ", snapshot_every));
  std::mt19937 rng(seed);
  Open(snapshot_every);
  const std::string dataset = RegisterRangeDataset(120, 7);
  std::vector<int64_t> jobs;
  for (int step = 0; step < 250; ++step) {
    switch (rng() % 8) {
      case 0:
        RegisterWorker(absl::StrCat("w", rng() % 5), rng() % 4 == 0);
        break;
      case 1:
        jobs.push_back(
            CreateJob(dataset, rng() % 2 ? absl::StrCat("job", rng() % 3) : "", 1 + rng() % 2));
        break;
      case 2:
        if (!jobs.empty()) {
          const int64_t job = jobs[rng() % jobs.size()];
          GetStatusResponse s;
          ASSERT_TRUE(impl_->GetStatus({}, &s).ok());
          for (const JobState& j : s.state().jobs()) {
            if (j.job_id() == job) {
              ASSERT_TRUE(StartEpoch(job, j.epochs_started()).ok());
            }
          }
        }
        break;
      case 3:
      case 4: {
        GetStatusResponse s;
        ASSERT_TRUE(impl_->GetStatus({}, &s).ok());
        if (s.state().tasks_size() == 0) break;
        const TaskState& t = s.state().tasks(rng() % s.state().tasks_size());
        ASSERT_TRUE(Splits(t.task_id(), rng() % (t.leased_size() + 1), 1 + rng() % 3).ok());
        break;
      }
      case 5: {
        GetStatusResponse s;
        ASSERT_TRUE(impl_->GetStatus({}, &s).ok());
        if (s.state().tasks_size() == 0) break;
        const TaskState& t = s.state().tasks(rng() % s.state().tasks_size());
        TaskFinishedRequest request;
        request.set_task_id(t.task_id());
        request.set_generation(t.generation());
        request.set_num_elements(rng() % 50);
        TaskFinishedResponse response;
        impl_->TaskFinished(request, &response).IgnoreError();
        break;
      }
      case 6:
        LoseWorker(absl::StrCat("w", rng() % 5));
        break;
      case 7:
        if (rng() % 3 == 0) {
          const std::string before = State();
          Open(snapshot_every);
          ASSERT_EQ(State(), before) << "after reopening at step " << step;
        }
        break;
    }
  }
  const std::string before = State();
  Open(snapshot_every);
  EXPECT_EQ(State(), before);
}

INSTANTIATE_TEST_SUITE_P(SnapshotIntervalsAndSeeds, ReplayEquivalenceTest,
                         ::testing::Combine(::testing::Values(1000000, 13, 1),
                                            ::testing::Values(1u, 2u, 3u)));

// Issue 30: the nonce naming a worker's shared-memory socket reaches the readers of its tasks
// with its address, survives a dispatcher restart (journaled with the registration), changes
// with a new incarnation, and anything but up to 32 lowercase hex digits is refused.
TEST_F(DispatcherImplTest, AWorkersShmNonceReachesReadersAndIsValidated) {
  Open();
  const auto register_with = [&](const std::string& nonce) {
    RegisterWorkerRequest request;
    request.set_worker_id("a");
    request.set_address("a.local:7000");
    request.set_shm_nonce(nonce);
    RegisterWorkerResponse response;
    return impl_->RegisterWorker(request, &response);
  };
  ASSERT_TRUE(register_with("0123456789abcdef").ok());
  const int64_t job = CreateJob(RegisterRangeDataset(10, 5), "j");
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  const auto reader_sees = [&]() -> std::string {
    ClientHeartbeatRequest request;
    request.set_job_id(job);
    request.set_epoch(0);
    ClientHeartbeatResponse response;
    EXPECT_TRUE(impl_->ClientHeartbeat(request, &response).ok());
    EXPECT_EQ(response.tasks_size(), 1);
    if (response.tasks_size() != 1) return "";
    EXPECT_EQ(response.tasks(0).worker_address(), "a.local:7000");
    return response.tasks(0).worker_shm_nonce();
  };
  EXPECT_EQ(reader_sees(), "0123456789abcdef");
  Open();  // Restart: replayed from the journal.
  EXPECT_EQ(reader_sees(), "0123456789abcdef");
  ASSERT_TRUE(register_with("fedcba9876543210").ok());  // the worker restarted
  EXPECT_EQ(reader_sees(), "fedcba9876543210");
  for (const std::string& bad :
       std::vector<std::string>{"0123456789ABCDEF", "../x", std::string(33, 'a')}) {
    const absl::Status refused = register_with(bad);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << refused;
    EXPECT_THAT(refused.message(), HasSubstr("lowercase hex digits")) << refused;
  }
  EXPECT_EQ(reader_sees(), "fedcba9876543210");
}

TEST_F(DispatcherImplTest, GetSplitsIsIdempotentAcrossRepeatsThreadsAndRestarts) {
  Open();
  RegisterWorker("a");
  const int64_t job = CreateJob(RegisterRangeDataset(100, 10), "j");
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  auto first = Splits(1, 0, 2);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->splits_size(), 2);
  auto again = Splits(1, 0, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(SerializeDeterministically(*again), SerializeDeterministically(*first));

  // 8 threads race for the first lease at seq 2: all get the same answer.
  std::vector<std::string> answers(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = Splits(1, 2, 3);
      answers[i] = r.ok() ? SerializeDeterministically(*r) : std::string(r.status().message());
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& a : answers) EXPECT_EQ(a, answers[0]);
  auto leased = Splits(1, 0, 100);
  ASSERT_TRUE(leased.ok());
  EXPECT_EQ(leased->splits_size(), 5) << "the race leased once, not 8 times";

  Open();  // Restart: the same answers.
  auto after = Splits(1, 0, 100);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(SerializeDeterministically(*after), SerializeDeterministically(*leased));
}

TEST_F(DispatcherImplTest, EverySplitOnceAcrossTasksThroughReassignmentAndRestart) {
  Open(/*snapshot_every=*/5);
  RegisterWorker("a");
  RegisterWorker("b");
  RegisterWorker("s", /*standby=*/true);
  const int64_t job = CreateJob(RegisterRangeDataset(300, 4), "j", /*consumers=*/2);
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  GetStatusResponse status;
  ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
  const int plan_size = status.state().epochs(0).plan_size();
  ASSERT_EQ(plan_size, 75);
  std::vector<int64_t> tasks;
  for (const TaskState& t : status.state().tasks()) tasks.push_back(t.task_id());
  ASSERT_EQ(tasks.size(), 4u);  // 2 consumers x 2 slots (the standby holds none).

  // Each task's reader: the next seq it will ask for. Readers pull in a seeded random order;
  // midway worker "a" is lost (its tasks move to the standby, whose reader starts over from
  // seq 0 and must see the same splits), and the dispatcher restarts.
  std::mt19937 rng(42);
  std::map<int64_t, int64_t> next_seq;
  std::map<int64_t, std::vector<uint64_t>> seen;
  bool lost = false, restarted = false;
  for (int round = 0; round < 1000; ++round) {
    const int64_t task = tasks[rng() % tasks.size()];
    auto r = Splits(task, next_seq[task], 1 + rng() % 3);
    ASSERT_TRUE(r.ok()) << r.status() << " (seed 42)";
    for (const Split& s : r->splits()) {
      const int64_t seq = next_seq[task]++;
      if (seq < static_cast<int64_t>(seen[task].size())) {
        EXPECT_EQ(seen[task][seq], s.id()) << "task " << task << " seq " << seq << " replayed";
      } else {
        seen[task].push_back(s.id());
      }
    }
    if (!lost && round == 300) {
      LoseWorker("a");
      lost = true;
      ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
      for (const TaskState& t : status.state().tasks()) {
        if (t.generation() == 2) {
          EXPECT_EQ(t.worker_id(), "s");
          next_seq[t.task_id()] = 0;  // The new owner replays from the start.
        }
      }
    }
    if (!restarted && round == 600) {
      Open(5);
      restarted = true;
    }
  }
  std::multiset<uint64_t> all;
  for (const auto& [task, ids] : seen) all.insert(ids.begin(), ids.end());
  std::multiset<uint64_t> expected;
  for (int i = 0; i < plan_size; ++i) expected.insert(i);
  EXPECT_EQ(all, expected) << "every split exactly once across tasks (seed 42)";
  for (int64_t task : tasks) {
    auto end = Splits(task, seen[task].size(), 1);
    ASSERT_TRUE(end.ok());
    EXPECT_TRUE(end->end_of_splits()) << "task " << task;
  }
}

TEST_F(DispatcherImplTest, BadRequestsGetClearErrors) {
  Open();
  RegisterWorker("a");
  const std::string dataset = RegisterRangeDataset(10, 5);
  const int64_t job = CreateJob(dataset, "j");
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  EXPECT_THAT(std::string(Splits(99, 0, 1).status().message()), HasSubstr("no task 99"));
  EXPECT_THAT(std::string(Splits(1, 5, 1).status().message()),
              HasSubstr("task 1 has 0 splits leased; cannot answer from seq 5"));
  EXPECT_TRUE(absl::IsFailedPrecondition(StartEpoch(job, 3)));
  GetOrCreateJobRequest other;
  other.set_dataset_id(RegisterRangeDataset(20, 5));
  other.set_name("j");
  GetOrCreateJobResponse ignored;
  EXPECT_THAT(std::string(impl_->GetOrCreateJob(other, &ignored).message()),
              HasSubstr("job 'j' exists"));
  RegisterDatasetRequest bad;
  auto bad_def = ParsePipelineJson(
      R"({"source": {"type": "range", "params": {"stop": 5}}, "ops": [{"op": "shuffel"}]})", "p");
  ASSERT_TRUE(bad_def.ok());
  *bad.mutable_pipeline() = *bad_def;
  RegisterDatasetResponse bad_response;
  const absl::Status invalid = impl_->RegisterDataset(bad, &bad_response);
  EXPECT_TRUE(absl::IsInvalidArgument(invalid));
  EXPECT_THAT(std::string(invalid.message()), HasSubstr("op 0 (shuffel): unknown op"));
  // The cache's ops are the dispatcher's to insert.
  bad.mutable_pipeline()->mutable_ops(0)->set_op("cache_write");
  const absl::Status inserted = impl_->RegisterDataset(bad, &bad_response);
  EXPECT_TRUE(absl::IsInvalidArgument(inserted));
  EXPECT_THAT(std::string(inserted.message()),
              HasSubstr("op 0 (cache_write) is inserted by the dispatcher"));
  bad.mutable_pipeline()->clear_ops();
  bad.mutable_pipeline()->mutable_source()->set_type("cache_read");
  EXPECT_THAT(std::string(impl_->RegisterDataset(bad, &bad_response).message()),
              HasSubstr("source cache_read (and cached_ops) are inserted by the dispatcher"));
  WorkerHeartbeatRequest stale;
  stale.set_worker_id("a");
  stale.set_incarnation(7);
  WorkerHeartbeatResponse hb;
  EXPECT_TRUE(absl::IsFailedPrecondition(impl_->WorkerHeartbeat(stale, &hb)));
}

TEST_F(DispatcherImplTest, HostileCountsAreRefusedBeforeAnythingIsJournaled) {
  // Issue 13, defect 1: this request, then StartEpoch, bricked the dispatcher for good.
  Open();
  RegisterWorker("a");
  const std::string dataset = RegisterRangeDataset(10, 5);
  const std::string before = State();
  GetOrCreateJobRequest request;
  request.set_dataset_id(dataset);
  request.mutable_options()->set_num_consumers(2147483647);
  request.mutable_options()->set_num_worker_slots(2147483647);
  GetOrCreateJobResponse response;
  absl::Status status = impl_->GetOrCreateJob(request, &response);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("num_consumers is 2147483647"));
  request.mutable_options()->set_num_consumers(4096);
  request.mutable_options()->set_num_worker_slots(4096);
  status = impl_->GetOrCreateJob(request, &response);
  EXPECT_THAT(std::string(status.message()), HasSubstr("16777216 tasks per epoch"));
  request.mutable_options()->set_num_consumers(1);
  request.mutable_options()->set_num_worker_slots(1);
  request.set_name(std::string(5000, 'n'));
  status = impl_->GetOrCreateJob(request, &response);
  EXPECT_THAT(std::string(status.message()), HasSubstr("job name has 5000 bytes"));
  EXPECT_TRUE(State() == before) << "a refused request journals nothing";
  Open();
  EXPECT_TRUE(State() == before) << "and the restarted dispatcher is in the same state";
}

TEST_F(DispatcherImplTest, GetSplitsWithTheLargestMaxAnswersTheLeasedSplits) {
  // Issue 13, defect 8: from_seq + INT64_MAX overflowed, and the answer was empty or
  // end-of-splits.
  Open();
  RegisterWorker("a");
  const int64_t job = CreateJob(RegisterRangeDataset(40, 5), "j", 1, 1);
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  constexpr int64_t kLargest = std::numeric_limits<int64_t>::max();
  auto first = Splits(1, 0, kLargest);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->splits_size(), 8);
  EXPECT_FALSE(first->end_of_splits());
  auto again = Splits(1, 3, kLargest);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->splits_size(), 5);
  auto end = Splits(1, 8, kLargest);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_TRUE(end->end_of_splits());
}

TEST_F(DispatcherImplTest, ClientHeartbeatRefusesTasksItsConsumerDoesNotOwn) {
  // Issue 13, defects 7 and 11: any task id in a client heartbeat was recorded as consumed and
  // kept forever — a stranger could hide another consumer's finished task from its worker, and
  // millions of fake ids grew the dispatcher's memory without bound.
  Open();
  RegisterWorker("a");
  const int64_t job = CreateJob(RegisterRangeDataset(10, 5), "j", 2, 1);
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  const auto heartbeat = [&](int32_t consumer, int64_t task, int64_t next_index) {
    ClientHeartbeatRequest request;
    request.set_job_id(job);
    request.set_epoch(0);
    request.set_consumer(consumer);
    (*request.mutable_next_index())[task] = next_index;
    ClientHeartbeatResponse response;
    return impl_->ClientHeartbeat(request, &response);
  };
  // Tasks 1 and 2 belong to consumers 0 and 1.
  TaskFinishedRequest finished;
  finished.set_task_id(2);
  finished.set_generation(1);
  finished.set_num_elements(5);
  TaskFinishedResponse ignored;
  ASSERT_TRUE(impl_->TaskFinished(finished, &ignored).ok());
  absl::Status foreign = heartbeat(0, 2, 5);
  EXPECT_TRUE(absl::IsInvalidArgument(foreign)) << foreign;
  EXPECT_THAT(std::string(foreign.message()),
              HasSubstr("task 2 is not a task of job 1 epoch 0 consumer 0"));
  absl::Status fake = heartbeat(0, 123456789, 1);
  EXPECT_THAT(std::string(fake.message()), HasSubstr("task 123456789 is not a task"));
  EXPECT_TRUE(absl::IsInvalidArgument(heartbeat(0, 1, -1)));
  WorkerHeartbeatRequest request;
  request.set_worker_id("a");
  request.set_incarnation(1);
  WorkerHeartbeatResponse response;
  ASSERT_TRUE(impl_->WorkerHeartbeat(request, &response).ok());
  EXPECT_EQ(response.tasks_size(), 2) << "consumer 1 has not read task 2: it is still listed";
  EXPECT_TRUE(heartbeat(1, 2, 5).ok());
}

TEST_F(DispatcherImplTest, IdleFinishedJobsAreRetiredAfterTheRetentionPeriod) {
  Open();
  RegisterWorker("a");
  const std::string dataset = RegisterRangeDataset(10, 5);
  const int64_t done = CreateJob(dataset, "done", 1, 1);
  const int64_t running = CreateJob(dataset, "running", 1, 1);
  const int64_t idle_but_read = CreateJob(dataset, "active", 1, 1);
  for (int64_t job : {done, running, idle_but_read}) ASSERT_TRUE(StartEpoch(job, 0).ok());
  // Tasks 1 and 3 finish; task 2 (job "running") does not.
  for (int64_t task : {1, 3}) {
    TaskFinishedRequest finished;
    finished.set_task_id(task);
    finished.set_generation(1);
    finished.set_num_elements(10);
    TaskFinishedResponse ignored;
    ASSERT_TRUE(impl_->TaskFinished(finished, &ignored).ok());
  }
  clock_.AdvanceMicros(kRetentionMs * 1000 + 1);
  ClientHeartbeatRequest hb;
  hb.set_job_id(idle_but_read);
  hb.set_epoch(0);
  hb.set_consumer(0);
  ClientHeartbeatResponse hb_response;
  ASSERT_TRUE(impl_->ClientHeartbeat(hb, &hb_response).ok());
  ASSERT_TRUE(impl_->RetireIdleJobs().ok());
  GetStatusResponse status;
  ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
  std::set<int64_t> jobs;
  for (const JobState& job : status.state().jobs()) jobs.insert(job.job_id());
  EXPECT_EQ(jobs, (std::set<int64_t>{running, idle_but_read}))
      << "only the finished job nobody asked about is retired";
  for (const TaskState& task : status.state().tasks()) EXPECT_NE(task.job_id(), done);
  const std::string retired = State();
  Open();
  EXPECT_TRUE(State() == retired) << "the retirement is journaled";
  // Its name is free again: a new job with epochs from 0.
  EXPECT_GT(CreateJob(dataset, "done", 1, 1), idle_but_read);
}

// Issue 19: what the status page and /metrics show of a running job.
TEST_F(DispatcherImplTest, StatusSummaryAndMetricsShowTheRunningJob) {
  Open();
  RegisterWorker("w1");
  RegisterWorker("w2");
  const std::string dataset = RegisterRangeDataset(100, 10);
  const int64_t job = CreateJob(dataset, "metered", 1, 2);
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  GetStatusResponse full;
  ASSERT_TRUE(impl_->GetStatus({}, &full).ok());
  ASSERT_EQ(full.state().tasks_size(), 2);
  const TaskState task = full.state().tasks(0);
  ASSERT_TRUE(Splits(task.task_id(), 0, 3).ok());

  // The worker says what it produced, the trainer what it got, twice one second apart.
  WorkerHeartbeatRequest worker_hb;
  worker_hb.set_worker_id(task.worker_id());
  worker_hb.set_incarnation(1);
  RunningTask* running = worker_hb.add_running();
  running->set_task_id(task.task_id());
  running->set_generation(task.generation());
  running->set_produced(40);
  running->set_busy_us(1000);
  running->set_transport("tcp");
  WorkerHeartbeatResponse worker_hb_response;
  ASSERT_TRUE(impl_->WorkerHeartbeat(worker_hb, &worker_hb_response).ok());
  for (const int64_t delivered : {30, 50}) {
    ClientHeartbeatRequest hb;
    hb.set_job_id(job);
    hb.set_epoch(0);
    hb.set_consumer(0);
    (*hb.mutable_next_index())[task.task_id()] = delivered;
    hb.set_delivered(delivered);
    hb.set_wait_us(delivered * 100);
    hb.set_step_us(delivered * 1000);
    ClientHeartbeatResponse ignored;
    ASSERT_TRUE(impl_->ClientHeartbeat(hb, &ignored).ok());
    if (delivered == 30) clock_.AdvanceMicros(1000000);
  }

  GetStatusRequest summary_request;
  summary_request.set_summary(true);
  GetStatusResponse summary;
  ASSERT_TRUE(impl_->GetStatus(summary_request, &summary).ok());
  ASSERT_EQ(summary.state().epochs_size(), 1);
  EXPECT_EQ(summary.state().epochs(0).plan_size(), 0) << "the summary leaves the plan out";
  EXPECT_TRUE(summary.state().datasets(0).pipeline().source().type().empty());
  ASSERT_EQ(summary.epoch_progress_size(), 1);
  EXPECT_EQ(summary.epoch_progress(0).splits(), 10);
  EXPECT_EQ(summary.epoch_progress(0).leased(), 3);
  ASSERT_EQ(summary.task_activity_size(), 2);
  const TaskActivity& activity = summary.task_activity(0);
  EXPECT_EQ(activity.task_id(), task.task_id());
  EXPECT_EQ(activity.leased_splits(), 3);
  EXPECT_EQ(activity.produced(), 40);
  EXPECT_EQ(activity.delivered(), 50);
  EXPECT_EQ(activity.transport(), "tcp");
  ASSERT_EQ(summary.job_activity_size(), 1);
  EXPECT_EQ(summary.job_activity(0).delivered(), 50);
  EXPECT_EQ(summary.job_activity(0).wait_us(), 5000);
  EXPECT_DOUBLE_EQ(summary.job_activity(0).elements_per_second(), 20);  // 50 - 30 in 1 s
  EXPECT_DOUBLE_EQ(summary.job_activity(0).wait_seconds_per_element(), 100e-6);

  // /metrics: the same, plus the journal's own instruments; after a worker is lost, its task
  // counts as moved.
  metrics_.AddCollector([this](MetricSamples& out) {
    if (impl_ != nullptr) impl_->CollectMetrics(out);
  });
  absl::StatusOr<Exposition> scraped = ParseExposition(metrics_.RenderText());
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  const std::map<std::string, std::string> job_label = {{"job", absl::StrCat(job)}};
  EXPECT_EQ(scraped->Sum("granary_job_elements_delivered_total", job_label), 50);
  EXPECT_DOUBLE_EQ(scraped->Sum("granary_job_trainer_wait_seconds_total", job_label), 0.005);
  EXPECT_EQ(scraped->Sum("granary_job_slots_per_consumer",
                         {{"job", absl::StrCat(job)}, {"kind", "remote"}}),
            2);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_epochs_started_total", {{"cache", "compute"}}), 1);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_workers", {{"state", "live"}}), 2);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_running_tasks", {{"assigned", "yes"}}), 2);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_tasks_moved_total"), 0);
  EXPECT_GE(scraped->Sum("granary_journal_appends_total"), 6);  // cluster id, 2 workers, ...
  EXPECT_EQ(scraped->Sum("granary_journal_applied_seq"), summary.state().applied_seq());
  LoseWorker(task.worker_id());
  scraped = ParseExposition(metrics_.RenderText());
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(scraped->Sum("granary_dispatcher_tasks_moved_total"), 1);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_workers", {{"state", "lost"}}), 1);
}

// Issue 20: GetOrCreateJob tells which cache the job's next epoch would use, and its state.
TEST_F(DispatcherImplTest, OpeningAJobTellsTheCacheItsNextEpochWouldUse) {
  Open(10000, dir_.path() + "/cache");
  RegisterWorker("w");
  const std::string dataset = RegisterRangeDataset(100, 10);
  GetOrCreateJobRequest request;
  request.set_dataset_id(dataset);
  request.set_name("cached");
  request.mutable_options()->set_seed(3);
  request.mutable_options()->set_num_consumers(1);
  request.mutable_options()->set_cache_policy(CACHE_FULL);
  GetOrCreateJobResponse opened;
  ASSERT_TRUE(impl_->GetOrCreateJob(request, &opened).ok());
  EXPECT_FALSE(opened.cache_key().empty());
  EXPECT_FALSE(opened.has_cache()) << "no cache yet: the next epoch puts it";
  EXPECT_EQ(opened.epochs_started(), 0);
  ASSERT_TRUE(StartEpoch(opened.job_id(), 0).ok());
  GetOrCreateJobResponse again;
  ASSERT_TRUE(impl_->GetOrCreateJob(request, &again).ok());
  EXPECT_EQ(again.cache_key(), opened.cache_key());
  ASSERT_TRUE(again.has_cache());
  EXPECT_FALSE(again.cache().complete());
  EXPECT_EQ(again.cache().put_job_id(), opened.job_id());
  EXPECT_EQ(again.cache().put_epoch(), 0);
  EXPECT_EQ(again.epochs_started(), 1);
  // A job that does not cache names no cache.
  request.set_name("computed");
  request.mutable_options()->set_cache_policy(CACHE_COMPUTE);
  GetOrCreateJobResponse computed;
  ASSERT_TRUE(impl_->GetOrCreateJob(request, &computed).ok());
  EXPECT_TRUE(computed.cache_key().empty());
}

// Records the counts it is asked for.
class RecordingProvisioner : public Provisioner {
 public:
  explicit RecordingProvisioner(std::vector<int32_t>* asked) : asked_(asked) {}
  absl::Status Resize(int32_t count, const std::vector<std::string>& idle) override {
    asked_->push_back(count);
    return absl::OkStatus();
  }
  std::string Describe() const override { return "recording"; }

 private:
  std::vector<int32_t>* const asked_;
};

TEST_F(DispatcherImplTest, StandbyWorkersAreNoSurplusForTheProvisioner) {
  // A standby is not the provisioner's to stop (a StatefulSet of its own on Kubernetes): counted
  // as a surplus worker, it made the provisioner ask for the same count every few periods.
  Open();
  std::vector<int32_t> asked;
  impl_->SetProvisioner(std::make_unique<RecordingProvisioner>(&asked), 1, 4);
  const int64_t remote = RegisterWorker("remote-0");
  const int64_t standby = RegisterWorker("standby-0", /*standby=*/true);
  // 30 steps of 0.9 s (under the failure detector's timeout): 27 s, many policy periods.
  for (int step = 0; step < 30; ++step) {
    for (const auto& [id, incarnation] : {std::pair<std::string, int64_t>{"remote-0", remote},
                                          std::pair<std::string, int64_t>{"standby-0", standby}}) {
      WorkerHeartbeatRequest hb;
      hb.set_worker_id(id);
      hb.set_incarnation(incarnation);
      WorkerHeartbeatResponse ignored;
      ASSERT_TRUE(impl_->WorkerHeartbeat(hb, &ignored).ok());
    }
    impl_->Provision();
    clock_.AdvanceMicros(900 * 1000);
  }
  EXPECT_EQ(asked, std::vector<int32_t>{1}) << "asked once, for --min_workers";
}

TEST_F(DispatcherImplTest, HeartbeatsSendEachPipelineOnceAndOnlyNewTaskDefinitions) {
  // Issue 13, defect 3: every heartbeat answer carried the full pipeline of every task the
  // worker held; past gRPC's 4 MiB message limit the worker could no longer learn its tasks.
  Open();
  RegisterWorker("a");
  // Two datasets whose pipelines (a mark with a long name) are 10 MB each, two epochs each.
  std::vector<int64_t> jobs;
  for (char c : {'x', 'y'}) {
    auto def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "range", "params": {"stop": 10}}, "ops": [)",
                     R"({"op": "mark", "params": {"name": ")", std::string(10 << 20, c),
                     R"("}}]})"),
        "big.json");
    ASSERT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    ASSERT_TRUE(impl_->RegisterDataset(request, &response).ok());
    jobs.push_back(CreateJob(response.dataset_id(), std::string(1, c), 2, 1));
    ASSERT_TRUE(StartEpoch(jobs.back(), 0).ok());
  }
  WorkerHeartbeatRequest request;
  request.set_worker_id("a");
  request.set_incarnation(1);
  WorkerHeartbeatResponse first;
  ASSERT_TRUE(impl_->WorkerHeartbeat(request, &first).ok());
  EXPECT_EQ(first.assigned_task_ids_size(), 4);
  // The pipeline budget holds one of the two: the other dataset's tasks come next time.
  EXPECT_TRUE(first.more());
  ASSERT_EQ(first.tasks_size(), 2);
  EXPECT_TRUE(first.tasks(0).has_pipeline());
  EXPECT_FALSE(first.tasks(1).has_pipeline()) << "sent once per answer";
  EXPECT_EQ(first.tasks(0).pipeline_key(), first.tasks(1).pipeline_key());
  EXPECT_LT(first.ByteSizeLong(), 11u << 20);
  // What a worker does with an answer: hold its pipeline and run its tasks.
  const auto hold_and_run = [&request](const WorkerHeartbeatResponse& answer) {
    request.add_pipeline_keys(answer.tasks(0).pipeline_key());
    for (const TaskDef& def : answer.tasks()) {
      RunningTask* running = request.add_running();
      running->set_task_id(def.task_id());
      running->set_generation(def.generation());
    }
  };
  hold_and_run(first);
  WorkerHeartbeatResponse second;
  ASSERT_TRUE(impl_->WorkerHeartbeat(request, &second).ok());
  EXPECT_FALSE(second.more());
  ASSERT_EQ(second.tasks_size(), 2) << "only the definitions the worker lacks";
  EXPECT_TRUE(second.tasks(0).has_pipeline());
  EXPECT_NE(second.tasks(0).pipeline_key(), first.tasks(0).pipeline_key());
  hold_and_run(second);
  WorkerHeartbeatResponse steady;
  ASSERT_TRUE(impl_->WorkerHeartbeat(request, &steady).ok());
  EXPECT_EQ(steady.tasks_size(), 0);
  EXPECT_EQ(steady.assigned_task_ids_size(), 4);
  EXPECT_LT(steady.ByteSizeLong(), 64u) << "the steady state costs a few bytes per task";
}

// Parameter ranges and file patterns are checked at registration, with Pipeline::Create's
// message, not when an epoch starts (issue 13, defect 12).
TEST_F(DispatcherImplTest, RegisterDatasetRefusesOutOfRangeParamsAndMissingFiles) {
  Open();
  const auto register_json = [&](const std::string& json) {
    auto def = ParsePipelineJson(json, "p.json");
    EXPECT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    return impl_->RegisterDataset(request, &response);
  };
  const absl::Status batch = register_json(
      R"({"source": {"type": "range", "params": {"stop": 5}},
          "ops": [{"op": "batch", "params": {"batch_size": 0}}]})");
  EXPECT_TRUE(absl::IsInvalidArgument(batch)) << batch;
  EXPECT_THAT(std::string(batch.message()),
              HasSubstr("invalid pipeline: op 0 (batch): param 'batch_size' must be at least 1"));
  const absl::Status files = register_json(
      R"({"source": {"type": "tfrecord", "params": {"files": ["/nonexistent/granary/*.rec"]}}})");
  EXPECT_TRUE(absl::IsNotFound(files)) << files;
  EXPECT_THAT(std::string(files.message()),
              HasSubstr("source tfrecord: pattern '/nonexistent/granary/*.rec' matches no file"));
  GetStatusResponse status;
  ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
  EXPECT_EQ(status.state().datasets_size(), 0) << "nothing refused is journaled";
  // A dataset already registered is not checked again: its files may have gone while a
  // complete cache serves it.
  const std::string lines = dir_.path() + "/lines.txt";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), lines, "a\nb\n", false).ok());
  const std::string text_json = absl::StrCat(
      R"({"source": {"type": "text_lines", "params": {"files": [")", lines, R"("]}}})");
  EXPECT_TRUE(register_json(text_json).ok());
  ASSERT_TRUE(Env::Default()->RenameFile(lines, lines + ".moved").ok());
  EXPECT_TRUE(register_json(text_json).ok());
}

TEST_F(DispatcherImplTest, AJournalNamesItsClusterOnceAndWorkersLearnIt) {
  // Issue 13, defect 4: task ids start at 1 again in a new journal, so workers need the
  // journal's identity to keep one cluster's checkpoints from another's tasks.
  Open();
  RegisterWorkerRequest request;
  request.set_worker_id("a");
  request.set_address("a:1");
  RegisterWorkerResponse first;
  ASSERT_TRUE(impl_->RegisterWorker(request, &first).ok());
  EXPECT_EQ(first.cluster_id().size(), 32u) << first.cluster_id();
  Open();
  RegisterWorkerResponse after_restart;
  ASSERT_TRUE(impl_->RegisterWorker(request, &after_restart).ok());
  EXPECT_EQ(after_restart.cluster_id(), first.cluster_id()) << "journaled: kept across restarts";
  impl_.reset();
  std::filesystem::remove_all(dir_.path() + "/journal");
  Open();
  RegisterWorkerResponse fresh;
  ASSERT_TRUE(impl_->RegisterWorker(request, &fresh).ok());
  EXPECT_NE(fresh.cluster_id(), first.cluster_id()) << "a new journal is a new cluster";
}

TEST_F(DispatcherImplTest, NamedJobsAreSharedAndDatasetsDeduplicated) {
  Open();
  const std::string d1 = RegisterRangeDataset(10, 5);
  const std::string d2 = RegisterRangeDataset(10, 5);
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(CreateJob(d1, "shared"), CreateJob(d1, "shared"));
  EXPECT_NE(CreateJob(d1, ""), CreateJob(d1, ""));
}

TEST_F(DispatcherImplTest, RestartedWorkerKeepsItsTasksAndNoSpuriousLossAfterRestart) {
  Open();
  EXPECT_EQ(RegisterWorker("a"), 1);
  const int64_t job = CreateJob(RegisterRangeDataset(10, 5), "j");
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  EXPECT_EQ(RegisterWorker("a"), 2);  // Restarted before the timeout.
  WorkerHeartbeatRequest hb;
  hb.set_worker_id("a");
  hb.set_incarnation(2);
  WorkerHeartbeatResponse tasks;
  ASSERT_TRUE(impl_->WorkerHeartbeat(hb, &tasks).ok());
  ASSERT_EQ(tasks.tasks_size(), 1);
  EXPECT_EQ(tasks.tasks(0).generation(), 1);
  EXPECT_EQ(tasks.tasks(0).seed(), 3u);

  // Long after the last heartbeat the dispatcher restarts: the worker is freshly seen.
  clock_.AdvanceMicros(10 * kTimeoutMs * 1000);
  Open();
  ASSERT_TRUE(impl_->CheckLiveness().ok());
  GetStatusResponse status;
  ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
  EXPECT_FALSE(status.state().workers(0).lost());
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// Caching jobs (DESIGN.md §5) through DispatcherImpl: validation at job creation, the mode each
// epoch gets (PUT, GET or COMPUTE), what its tasks are told to run, the manifest, and all of it
// across restarts.
class DispatcherCacheTest : public DispatcherImplTest {
 protected:
  std::string CacheRoot() const { return dir_.path() + "/cache"; }

  void OpenCaching(int64_t snapshot_every = 10000) { Open(snapshot_every, CacheRoot()); }

  // range (10 splits of 10) -> shuffle (op 0) -> mark (op 1) -> map add (op 2).
  static PipelineDef CachedDef() {
    auto def = ParsePipelineJson(R"({"source": {"type": "range", "params":
        {"stop": 100, "elements_per_split": 10, "shuffle_splits": true}}, "ops": [
        {"op": "shuffle", "params": {"buffer_size": 16}},
        {"op": "mark"},
        {"op": "map", "udf": "add", "udfParams": {"value": 1}}]})",
                                 "cached.json");
    EXPECT_TRUE(def.ok()) << def.status();
    return def.ok() ? *def : PipelineDef();
  }

  std::string RegisterCachedDataset() {
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = CachedDef();
    RegisterDatasetResponse response;
    const absl::Status status = impl_->RegisterDataset(request, &response);
    EXPECT_TRUE(status.ok()) << status;
    return response.dataset_id();
  }

  absl::StatusOr<int64_t> CreateCachingJob(const std::string& dataset, const std::string& name,
                                           CachePolicy policy, uint64_t seed = 3) {
    GetOrCreateJobRequest request;
    request.set_dataset_id(dataset);
    request.set_name(name);
    request.mutable_options()->set_seed(seed);
    request.mutable_options()->set_num_worker_slots(2);
    request.mutable_options()->set_cache_policy(policy);
    GetOrCreateJobResponse response;
    const absl::Status status = impl_->GetOrCreateJob(request, &response);
    if (!status.ok()) return status;
    return response.job_id();
  }

  GetStatusResponse Status() {
    GetStatusResponse status;
    EXPECT_TRUE(impl_->GetStatus({}, &status).ok());
    return status;
  }

  EpochState EpochOf(int64_t job, int64_t epoch) {
    const GetStatusResponse status = Status();
    for (const EpochState& e : status.state().epochs()) {
      if (e.job_id() == job && e.epoch() == epoch) return e;
    }
    ADD_FAILURE() << "no epoch " << job << "/" << epoch;
    return EpochState();
  }

  std::optional<CacheState> CacheOf(const std::string& key) {
    const GetStatusResponse status = Status();
    for (const CacheState& c : status.state().caches()) {
      if (c.cache_key() == key) return c;
    }
    return std::nullopt;
  }

  // What worker "a" (incarnation `incarnation`, holding no pipeline) is told to run for the
  // epoch, by task id, each with its pipeline (sent once per answer, with the first task
  // naming it).
  std::vector<TaskDef> TaskDefs(int64_t job, int64_t epoch, int64_t incarnation = 1) {
    WorkerHeartbeatRequest request;
    request.set_worker_id("a");
    request.set_incarnation(incarnation);
    WorkerHeartbeatResponse response;
    const absl::Status status = impl_->WorkerHeartbeat(request, &response);
    EXPECT_TRUE(status.ok()) << status;
    std::map<std::string, PipelineDef> pipelines;
    for (const TaskDef& def : response.tasks()) {
      if (def.has_pipeline()) pipelines.emplace(def.pipeline_key(), def.pipeline());
    }
    std::vector<TaskDef> defs;
    for (const TaskDef& def : response.tasks()) {
      if (def.job_id() != job || def.epoch() != epoch) continue;
      defs.push_back(def);
      EXPECT_TRUE(pipelines.count(def.pipeline_key())) << "task " << def.task_id();
      *defs.back().mutable_pipeline() = pipelines[def.pipeline_key()];
    }
    std::sort(defs.begin(), defs.end(),
              [](const TaskDef& x, const TaskDef& y) { return x.task_id() < y.task_id(); });
    return defs;
  }

  static CacheChunk Chunk(const std::string& dir, int64_t task, int64_t first, int64_t n) {
    CacheChunk c;
    c.set_path(absl::StrCat(dir, "/t", task, "-g1-i", first, "-n", n, ".chunk"));
    c.set_task_id(task);
    c.set_generation(1);
    c.set_first_index(first);
    c.set_num_elements(n);
    c.set_mac(absl::StrCat("mac ", task, " ", first));
    return c;
  }

  absl::Status Finish(int64_t task, int64_t generation, int64_t num_elements,
                      const std::vector<CacheChunk>& chunks) {
    TaskFinishedRequest request;
    request.set_task_id(task);
    request.set_generation(generation);
    request.set_num_elements(num_elements);
    for (const CacheChunk& c : chunks) *request.add_cache_chunks() = c;
    TaskFinishedResponse response;
    return impl_->TaskFinished(request, &response);
  }

  // The chunks the tasks of a PUT epoch (two tasks, 100 elements) report, in task order.
  static std::vector<std::vector<CacheChunk>> PutChunks(const std::vector<TaskDef>& tasks) {
    const std::string& dir = tasks[0].cache_dir();
    return {{Chunk(dir, tasks[0].task_id(), 0, 30), Chunk(dir, tasks[0].task_id(), 30, 25)},
            {Chunk(dir, tasks[1].task_id(), 0, 45)}};
  }

  // Finishes every task of a PUT epoch with PutChunks; returns the expected manifest.
  std::vector<CacheChunk> CompletePut(int64_t job, int64_t epoch) {
    const std::vector<TaskDef> tasks = TaskDefs(job, epoch);
    EXPECT_EQ(tasks.size(), 2u);
    if (tasks.size() != 2) return {};
    std::vector<CacheChunk> manifest;
    const std::vector<std::vector<CacheChunk>> chunks = PutChunks(tasks);
    for (size_t i = 0; i < tasks.size(); ++i) {
      int64_t n = 0;
      for (const CacheChunk& c : chunks[i]) {
        n += c.num_elements();
        manifest.push_back(c);
      }
      const absl::Status status = Finish(tasks[i].task_id(), tasks[i].generation(), n, chunks[i]);
      EXPECT_TRUE(status.ok()) << status;
    }
    return manifest;
  }

  static std::vector<std::string> Serialized(
      const google::protobuf::RepeatedPtrField<CacheChunk>& chunks) {
    std::vector<std::string> out;
    for (const CacheChunk& c : chunks) out.push_back(SerializeDeterministically(c));
    return out;
  }
  static std::vector<std::string> Serialized(const std::vector<CacheChunk>& chunks) {
    std::vector<std::string> out;
    for (const CacheChunk& c : chunks) out.push_back(SerializeDeterministically(c));
    return out;
  }

  static int CountOps(const PipelineDef& def, const std::string& op) {
    int n = 0;
    for (const OpDef& o : def.ops()) n += o.op() == op;
    return n;
  }
};

TEST_F(DispatcherCacheTest, CachingJobNeedsCacheRootAndAtMarkNeedsAMark) {
  Open();  // No --cache_root.
  const std::string dataset = RegisterCachedDataset();
  for (CachePolicy policy : {CACHE_FULL, CACHE_AT_MARK}) {
    auto job = CreateCachingJob(dataset, "", policy);
    ASSERT_FALSE(job.ok()) << CachePolicyName(policy);
    EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(job.status().message()), HasSubstr("--cache_root"));
  }
  EXPECT_TRUE(CreateCachingJob(dataset, "", CACHE_COMPUTE).ok());
  EXPECT_EQ(Status().state().jobs_size(), 1) << "refused jobs are not created";

  OpenCaching();
  const std::string unmarked = RegisterRangeDataset(100, 10);
  auto at_mark = CreateCachingJob(unmarked, "m", CACHE_AT_MARK);
  ASSERT_FALSE(at_mark.ok());
  EXPECT_EQ(at_mark.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(at_mark.status().message()), HasSubstr("mark"));
  EXPECT_EQ(Status().state().jobs_size(), 1);
  // With a mark, or caching the whole pipeline, the jobs are created.
  EXPECT_TRUE(CreateCachingJob(unmarked, "f", CACHE_FULL).ok());
  EXPECT_TRUE(CreateCachingJob(dataset, "m", CACHE_AT_MARK).ok());
}

TEST_F(DispatcherCacheTest, FullJobPutsInEpochZeroThenGetsFromTheManifest) {
  OpenCaching();
  RegisterWorker("a");
  const PipelineDef def = CachedDef();
  auto job = CreateCachingJob(RegisterCachedDataset(), "full", CACHE_FULL);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  const std::string key = CacheKey(def, def.ops_size(), 3);
  const std::string cache_dir = CacheRoot() + "/" + key;

  // Epoch 0 is PUT: the tasks run the pipeline with cache_write at its end.
  const EpochState put = EpochOf(*job, 0);
  EXPECT_EQ(put.cache().mode(), EpochCache::PUT);
  EXPECT_EQ(put.cache().cache_key(), key);
  std::vector<TaskDef> tasks = TaskDefs(*job, 0);
  ASSERT_EQ(tasks.size(), 2u);
  for (const TaskDef& task : tasks) {
    EXPECT_EQ(task.cache_dir(), cache_dir);
    EXPECT_EQ(task.cached_prefix_ops(), 3);
    EXPECT_EQ(task.pipeline().source().type(), "range");
    ASSERT_EQ(task.pipeline().ops_size(), 4);
    EXPECT_EQ(CountOps(task.pipeline(), "cache_write"), 1);
    EXPECT_EQ(task.pipeline().ops(3).op(), "cache_write");
  }
  EXPECT_TRUE(clock_.FileExists(cache_dir)) << "the PUT epoch's directory is created";
  std::optional<CacheState> cache = CacheOf(key);
  ASSERT_TRUE(cache.has_value());
  EXPECT_FALSE(cache->complete());

  // Its plan is the source's, enumerated and ordered as epoch 0.
  auto pipeline = Pipeline::Create(def, registries_);
  ASSERT_TRUE(pipeline.ok());
  auto splits = (*pipeline)->EnumerateSplits(&clock_);
  ASSERT_TRUE(splits.ok());
  const std::vector<Split> plan = (*pipeline)->PlanEpoch(*splits, 3, 0);
  ASSERT_EQ(put.plan_size(), 10);
  ASSERT_EQ(plan.size(), 10u);
  for (int i = 0; i < put.plan_size(); ++i) {
    EXPECT_EQ(SerializeDeterministically(put.plan(i)), SerializeDeterministically(plan[i]))
        << "plan " << i;
  }

  // Chunks that do not cover 0, 1, 2, ... are refused, naming the task; nothing is recorded.
  const std::vector<std::vector<CacheChunk>> good = PutChunks(tasks);
  const int64_t t0 = tasks[0].task_id();
  const std::string task_name = absl::StrCat("task ", t0);
  const absl::Status gap =
      Finish(t0, 1, 55, {Chunk(cache_dir, t0, 0, 30), Chunk(cache_dir, t0, 31, 25)});
  EXPECT_TRUE(absl::IsInvalidArgument(gap)) << gap;
  EXPECT_THAT(std::string(gap.message()), HasSubstr(task_name));
  const absl::Status late = Finish(t0, 1, 55, {Chunk(cache_dir, t0, 5, 55)});
  EXPECT_TRUE(absl::IsInvalidArgument(late)) << late;
  EXPECT_THAT(std::string(late.message()), HasSubstr(task_name));
  const absl::Status overlap =
      Finish(t0, 1, 55, {Chunk(cache_dir, t0, 0, 30), Chunk(cache_dir, t0, 20, 35)});
  EXPECT_TRUE(absl::IsInvalidArgument(overlap)) << overlap;
  EXPECT_THAT(std::string(overlap.message()), HasSubstr(task_name));
  // A chunk outside the cache's directory (issue 15: a Get epoch would read it as the cache).
  for (const std::string& elsewhere :
       {std::string("/etc"), cache_dir + "/sub", cache_dir + "/.."}) {
    CacheChunk stray = Chunk(elsewhere, t0, 0, 55);
    const absl::Status outside = Finish(t0, 1, 55, {stray});
    EXPECT_TRUE(absl::IsInvalidArgument(outside)) << outside;
    EXPECT_THAT(std::string(outside.message()), HasSubstr("is not a file of " + cache_dir))
        << elsewhere;
  }
  const GetStatusResponse after_refusals = Status();
  for (const TaskState& t : after_refusals.state().tasks()) {
    EXPECT_FALSE(t.finished()) << "task " << t.task_id();
  }

  // Valid chunks from every task: the cache is complete, its manifest theirs in task order.
  const std::vector<CacheChunk> manifest = CompletePut(*job, 0);
  cache = CacheOf(key);
  ASSERT_TRUE(cache.has_value());
  EXPECT_TRUE(cache->complete());
  EXPECT_EQ(Serialized(cache->chunks()), Serialized(manifest));
  EXPECT_EQ(cache->num_elements(), 100);

  // Epoch 1 is GET: cache_read over the manifest, one split per chunk.
  ASSERT_TRUE(StartEpoch(*job, 1).ok());
  EXPECT_EQ(EpochOf(*job, 1).cache().mode(), EpochCache::GET);
  tasks = TaskDefs(*job, 1);
  ASSERT_EQ(tasks.size(), 2u);
  for (const TaskDef& task : tasks) {
    EXPECT_EQ(task.pipeline().source().type(), "cache_read");
    EXPECT_EQ(task.pipeline().cached_ops(), 3);
    EXPECT_EQ(task.pipeline().ops_size(), 0);
    EXPECT_EQ(task.cache_dir(), "");
    EXPECT_EQ(task.cached_prefix_ops(), 3);
  }
  auto leased = Splits(tasks[0].task_id(), 0, 100);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->splits_size(), static_cast<int>(manifest.size()));
  for (size_t i = 0; i < manifest.size(); ++i) {
    const Split& split = leased->splits(i);
    EXPECT_EQ(split.file(), manifest[i].path()) << i;
    EXPECT_EQ(split.num_records(), manifest[i].num_elements()) << i;
    EXPECT_EQ(split.cache_chunk().SerializeAsString(), manifest[i].SerializeAsString()) << i;
  }
  auto rest = Splits(tasks[1].task_id(), 0, 100);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->splits_size(), 0);
  EXPECT_TRUE(rest->end_of_splits());
}

TEST_F(DispatcherCacheTest, AtMarkJobPutsThePrefixAndItsGetsRunTheOpsAfterTheMark) {
  OpenCaching();
  RegisterWorker("a");
  const PipelineDef def = CachedDef();
  auto job = CreateCachingJob(RegisterCachedDataset(), "mark", CACHE_AT_MARK);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  const std::string key = CacheKey(def, 2, 3);
  EXPECT_EQ(EpochOf(*job, 0).cache().cache_key(), key);
  std::vector<TaskDef> tasks = TaskDefs(*job, 0);
  ASSERT_EQ(tasks.size(), 2u);
  for (const TaskDef& task : tasks) {
    EXPECT_EQ(task.cache_dir(), CacheRoot() + "/" + key);
    EXPECT_EQ(task.cached_prefix_ops(), 2);
    ASSERT_EQ(task.pipeline().ops_size(), 4);
    EXPECT_EQ(task.pipeline().ops(2).op(), "cache_write");
    EXPECT_EQ(task.pipeline().ops(3).udf(), "add");
  }
  // Ops after the mark may change the element count (filter, batch): with at_mark a task's own
  // count need not match its chunks'.
  const std::string& dir = tasks[0].cache_dir();
  ASSERT_TRUE(Finish(tasks[0].task_id(), 1, 7, {Chunk(dir, tasks[0].task_id(), 0, 50)}).ok());
  ASSERT_TRUE(Finish(tasks[1].task_id(), 1, 9, {Chunk(dir, tasks[1].task_id(), 0, 50)}).ok());
  ASSERT_TRUE(CacheOf(key).has_value());
  EXPECT_TRUE(CacheOf(key)->complete());
  ASSERT_TRUE(StartEpoch(*job, 1).ok());
  tasks = TaskDefs(*job, 1);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].pipeline().source().type(), "cache_read");
  EXPECT_EQ(tasks[0].pipeline().cached_ops(), 2);
  ASSERT_EQ(tasks[0].pipeline().ops_size(), 1);
  EXPECT_EQ(SerializeDeterministically(tasks[0].pipeline().ops(0)),
            SerializeDeterministically(def.ops(2)));
  EXPECT_EQ(tasks[0].cached_prefix_ops(), 2);
  EXPECT_EQ(EpochOf(*job, 1).plan_size(), 2);
}

TEST_F(DispatcherCacheTest, AnotherJobWithTheSameSeedGetsTheCacheAnotherSeedPutsItsOwn) {
  OpenCaching();
  RegisterWorker("a");
  const PipelineDef def = CachedDef();
  const std::string dataset = RegisterCachedDataset();
  auto first = CreateCachingJob(dataset, "first", CACHE_FULL);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(StartEpoch(*first, 0).ok());
  const std::string key = CacheKey(def, 3, 3);
  const std::vector<CacheChunk> manifest = CompletePut(*first, 0);

  auto second = CreateCachingJob(dataset, "second", CACHE_FULL);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_NE(*second, *first);
  ASSERT_TRUE(StartEpoch(*second, 0).ok());
  const EpochState reading = EpochOf(*second, 0);
  EXPECT_EQ(reading.cache().mode(), EpochCache::GET);
  EXPECT_EQ(reading.cache().cache_key(), key);
  ASSERT_EQ(reading.plan_size(), static_cast<int>(manifest.size()));
  for (size_t i = 0; i < manifest.size(); ++i)
    EXPECT_EQ(reading.plan(i).file(), manifest[i].path());
  for (const TaskDef& task : TaskDefs(*second, 0)) {
    EXPECT_EQ(task.pipeline().source().type(), "cache_read");
    EXPECT_EQ(task.cache_dir(), "");
  }

  auto reseeded = CreateCachingJob(dataset, "reseeded", CACHE_FULL, /*seed=*/4);
  ASSERT_TRUE(reseeded.ok()) << reseeded.status();
  ASSERT_TRUE(StartEpoch(*reseeded, 0).ok());
  const EpochState writing = EpochOf(*reseeded, 0);
  const std::string other_key = CacheKey(def, 3, 4);
  ASSERT_NE(other_key, key);
  EXPECT_EQ(writing.cache().mode(), EpochCache::PUT);
  EXPECT_EQ(writing.cache().cache_key(), other_key);
  const std::vector<TaskDef> tasks = TaskDefs(*reseeded, 0);
  ASSERT_EQ(tasks.size(), 2u);
  for (const TaskDef& task : tasks) {
    EXPECT_EQ(task.cache_dir(), CacheRoot() + "/" + other_key);
    EXPECT_EQ(CountOps(task.pipeline(), "cache_write"), 1);
  }
  EXPECT_EQ(Status().state().caches_size(), 2);
  ASSERT_TRUE(CacheOf(other_key).has_value());
  EXPECT_FALSE(CacheOf(other_key)->complete());
  EXPECT_EQ(CacheOf(other_key)->put_job_id(), *reseeded);
  EXPECT_TRUE(CacheOf(key)->complete());
}

class DispatcherCacheRestartTest : public DispatcherCacheTest,
                                   public ::testing::WithParamInterface<int64_t> {};

TEST_P(DispatcherCacheRestartTest, CacheStateSurvivesRestartsMidPutAndAfter) {
  const int64_t snapshot_every = GetParam();
  OpenCaching(snapshot_every);
  RegisterWorker("a");
  const PipelineDef def = CachedDef();
  auto job = CreateCachingJob(RegisterCachedDataset(), "full", CACHE_FULL);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  const std::string key = CacheKey(def, 3, 3);
  const std::vector<TaskDef> tasks = TaskDefs(*job, 0);
  ASSERT_EQ(tasks.size(), 2u);
  const std::vector<std::vector<CacheChunk>> chunks = PutChunks(tasks);

  // Restart mid-Put: still incomplete, and the last task completes it afterwards.
  ASSERT_TRUE(Finish(tasks[0].task_id(), 1, 55, chunks[0]).ok());
  std::string before = State();
  OpenCaching(snapshot_every);
  ASSERT_EQ(State(), before);
  ASSERT_TRUE(CacheOf(key).has_value());
  EXPECT_FALSE(CacheOf(key)->complete());
  ASSERT_TRUE(Finish(tasks[1].task_id(), 1, 45, chunks[1]).ok());
  ASSERT_TRUE(CacheOf(key)->complete());
  const std::string cache_before = SerializeDeterministically(*CacheOf(key));

  before = State();
  OpenCaching(snapshot_every);
  EXPECT_EQ(State(), before);
  ASSERT_TRUE(CacheOf(key).has_value());
  EXPECT_TRUE(CacheOf(key)->complete());
  EXPECT_EQ(SerializeDeterministically(*CacheOf(key)), cache_before);
  std::vector<CacheChunk> manifest = chunks[0];
  manifest.insert(manifest.end(), chunks[1].begin(), chunks[1].end());
  EXPECT_EQ(Serialized(CacheOf(key)->chunks()), Serialized(manifest));

  ASSERT_TRUE(StartEpoch(*job, 1).ok());
  const EpochState get = EpochOf(*job, 1);
  EXPECT_EQ(get.cache().mode(), EpochCache::GET);
  ASSERT_EQ(get.plan_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get.plan(i).file(), manifest[i].path());
  // And a job created after the restart reads it too.
  auto late = CreateCachingJob(Status().state().datasets(0).dataset_id(), "late", CACHE_FULL);
  ASSERT_TRUE(late.ok());
  ASSERT_TRUE(StartEpoch(*late, 0).ok());
  EXPECT_EQ(EpochOf(*late, 0).cache().mode(), EpochCache::GET);
}

INSTANTIATE_TEST_SUITE_P(SnapshotIntervals, DispatcherCacheRestartTest,
                         ::testing::Values(10000, 2));

TEST_F(DispatcherCacheTest, WhileAPutIsIncompleteAnotherJobComputesWithThePrefixPinned) {
  OpenCaching();
  RegisterWorker("a");
  const PipelineDef def = CachedDef();
  const std::string dataset = RegisterCachedDataset();
  auto writer = CreateCachingJob(dataset, "writer", CACHE_FULL);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(StartEpoch(*writer, 0).ok());
  const std::string key = CacheKey(def, 3, 3);
  ASSERT_EQ(EpochOf(*writer, 0).cache().mode(), EpochCache::PUT);

  auto other = CreateCachingJob(dataset, "other", CACHE_FULL);
  ASSERT_TRUE(other.ok()) << other.status();
  for (int64_t epoch : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("epoch ", epoch));
    ASSERT_TRUE(StartEpoch(*other, epoch).ok());
    const EpochState computing = EpochOf(*other, epoch);
    EXPECT_EQ(computing.cache().mode(), EpochCache::COMPUTE);
    EXPECT_EQ(computing.cache().cache_key(), key);
    EXPECT_EQ(computing.cache().cached_prefix_ops(), 3);
    const std::vector<TaskDef> tasks = TaskDefs(*other, epoch);
    ASSERT_EQ(tasks.size(), 2u);
    for (const TaskDef& task : tasks) {
      EXPECT_EQ(SerializeDeterministically(task.pipeline()), SerializeDeterministically(def))
          << "the dataset's pipeline: no cache_write, no cache_read";
      EXPECT_EQ(CountOps(task.pipeline(), "cache_write"), 0);
      EXPECT_EQ(task.pipeline().source().type(), "range");
      EXPECT_EQ(task.cache_dir(), "");
      EXPECT_EQ(task.cached_prefix_ops(), 3);
    }
    // The pinned prefix reads epoch 0's plan, the one the writer is caching.
    const EpochState put = EpochOf(*writer, 0);
    ASSERT_EQ(computing.plan_size(), put.plan_size());
    for (int i = 0; i < put.plan_size(); ++i) {
      EXPECT_EQ(computing.plan(i).id(), put.plan(i).id()) << "plan " << i;
    }
  }
  // Sanity: unpinned, epoch 1's plan would be another order.
  auto pipeline = Pipeline::Create(def, registries_);
  ASSERT_TRUE(pipeline.ok());
  auto splits = (*pipeline)->EnumerateSplits(&clock_);
  ASSERT_TRUE(splits.ok());
  std::vector<uint64_t> e0, e1;
  for (const Split& s : (*pipeline)->PlanEpoch(*splits, 3, 0)) e0.push_back(s.id());
  for (const Split& s : (*pipeline)->PlanEpoch(*splits, 3, 1)) e1.push_back(s.id());
  EXPECT_NE(e0, e1);
  // The writer's cache is untouched.
  ASSERT_TRUE(CacheOf(key).has_value());
  EXPECT_FALSE(CacheOf(key)->complete());
  EXPECT_EQ(CacheOf(key)->put_job_id(), *writer);
  EXPECT_EQ(Status().state().caches_size(), 1);
}

// cache_policy auto (issue 18): the profile round trip, the journaled decision, eviction.
class DispatcherAutoCacheTest : public DispatcherCacheTest {
 protected:
  // CachedDef's one mark: op 1, so candidate point 2.
  static constexpr int kMarkPoint = 2;

  // A profile of CachedDef in which caching at the mark pays: the prefix costs 1 s a sample,
  // reading its output back 0.01 s. `bytes` per 64-record sample of 100 records.
  static CacheProfile WorthCaching(int64_t bytes = 64) {
    CacheProfile profile;
    profile.set_sample_records(64);
    profile.set_estimated_records(100);
    profile.set_tail_seconds(0.001);
    CachePointProfile* point = profile.add_points();
    point->set_cache_point(kMarkPoint);
    point->set_segment_seconds(1.0);
    point->set_elements(64);
    point->set_bytes(bytes);
    point->set_write_seconds(0.01);
    point->set_read_seconds(0.01);
    return profile;
  }

  absl::StatusOr<int64_t> CreateAutoJob(const std::string& name, uint64_t seed = 3) {
    return CreateCachingJob(RegisterCachedDataset(), name, CACHE_AUTO, seed);
  }

  // Worker "a"'s heartbeat: the profile requests it carries.
  std::vector<CacheProfileRequest> ProfileRequests() {
    WorkerHeartbeatRequest request;
    request.set_worker_id("a");
    request.set_incarnation(1);
    WorkerHeartbeatResponse response;
    EXPECT_TRUE(impl_->WorkerHeartbeat(request, &response).ok());
    return {response.cache_profiles().begin(), response.cache_profiles().end()};
  }

  absl::StatusOr<CacheDecision> Report(int64_t job, const CacheProfile& profile,
                                       const std::string& error = "") {
    ReportCacheProfileRequest request;
    request.set_worker_id("a");
    request.set_job_id(job);
    *request.mutable_profile() = profile;
    request.set_error(error);
    ReportCacheProfileResponse response;
    RETURN_IF_ERROR(impl_->ReportCacheProfile(request, &response));
    return response.decision();
  }

  JobState JobOf(int64_t job) {
    const GetStatusResponse status = Status();
    for (const JobState& j : status.state().jobs()) {
      if (j.job_id() == job) return j;
    }
    ADD_FAILURE() << "no job " << job;
    return JobState();
  }

  // Finishes every task of `job`'s `epoch` (50 elements each) with chunks of `bytes` each when
  // it writes a cache, and has its consumer read them all: until then a worker's loss would run
  // a finished task again, so its epoch's cache would still be in use.
  void FinishEpoch(int64_t job, int64_t epoch, int64_t bytes = 0) {
    ClientHeartbeatRequest read;
    read.set_job_id(job);
    read.set_epoch(epoch);
    for (const TaskDef& task : TaskDefs(job, epoch)) {
      std::vector<CacheChunk> chunks;
      if (!task.cache_dir().empty()) {
        chunks.push_back(Chunk(task.cache_dir(), task.task_id(), 0, 50));
        chunks.back().set_bytes(bytes);
      }
      const absl::Status status = Finish(task.task_id(), task.generation(), 50, chunks);
      ASSERT_TRUE(status.ok()) << status;
      (*read.mutable_next_index())[task.task_id()] = 50;
    }
    ClientHeartbeatResponse response;
    const absl::Status status = impl_->ClientHeartbeat(read, &response);
    ASSERT_TRUE(status.ok()) << status;
  }
};

TEST_F(DispatcherAutoCacheTest, TheFirstEpochWaitsForAProfileThenPutsWhereThePlannerSays) {
  OpenCaching();
  RegisterWorker("a");
  auto job = CreateAutoJob("auto");
  ASSERT_TRUE(job.ok()) << job.status();
  // No decision yet: the epoch does not start, and the client is told to retry.
  const absl::Status waiting = StartEpoch(*job, 0);
  EXPECT_TRUE(absl::IsUnavailable(waiting)) << waiting;
  EXPECT_THAT(std::string(waiting.message()), HasSubstr("measuring its pipeline"));
  EXPECT_EQ(Status().state().epochs_size(), 0);
  // The worker's heartbeat asks it to profile the candidates, the mark's point.
  const std::vector<CacheProfileRequest> requests = ProfileRequests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].job_id(), *job);
  EXPECT_THAT(
      std::vector<int>(requests[0].cache_points().begin(), requests[0].cache_points().end()),
      ::testing::ElementsAre(kMarkPoint));
  EXPECT_EQ(SerializeDeterministically(requests[0].pipeline()),
            SerializeDeterministically(CachedDef()));
  EXPECT_EQ(requests[0].seed(), 3u);
  EXPECT_THAT(requests[0].probe_dir(), ::testing::StartsWith(CacheRoot() + "/probe-"));

  absl::StatusOr<CacheDecision> decision = Report(*job, WorthCaching());
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->cache_point(), kMarkPoint) << decision->reason();
  EXPECT_EQ(JobOf(*job).cache_decision().cache_point(), kMarkPoint);
  EXPECT_TRUE(ProfileRequests().empty()) << "decided: nothing more to profile";
  // A second report changes nothing: the journaled decision is the answer.
  CacheProfile compute_worthy = WorthCaching();
  compute_worthy.mutable_points(0)->set_read_seconds(100);
  decision = Report(*job, compute_worthy);
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->cache_point(), kMarkPoint);

  // Epoch 0 writes the prefix up to the mark; epoch 1 reads it.
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  const std::string key = CacheKey(CachedDef(), kMarkPoint, 3);
  const EpochState put = EpochOf(*job, 0);
  EXPECT_EQ(put.cache().mode(), EpochCache::PUT);
  EXPECT_EQ(put.cache().cache_key(), key);
  EXPECT_EQ(put.cache().cache_point(), kMarkPoint);
  EXPECT_EQ(put.cache().cached_prefix_ops(), kMarkPoint);
  FinishEpoch(*job, 0, /*bytes=*/1000);
  ASSERT_TRUE(CacheOf(key).has_value());
  EXPECT_TRUE(CacheOf(key)->complete());
  EXPECT_EQ(CacheOf(key)->bytes(), 2000);
  ASSERT_TRUE(StartEpoch(*job, 1).ok());
  EXPECT_EQ(EpochOf(*job, 1).cache().mode(), EpochCache::GET);
}

TEST_F(DispatcherAutoCacheTest, AFailedOrMalformedProfileMeansComputeWithThePrefixStillPinned) {
  OpenCaching();
  RegisterWorker("a");
  for (const bool failed : {true, false}) {
    SCOPED_TRACE(failed ? "failed" : "malformed");
    auto job = CreateAutoJob(failed ? "failed" : "malformed", failed ? 5 : 6);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*job, 0)));
    CacheProfile malformed = WorthCaching();
    malformed.mutable_points(0)->set_cache_point(1);  // Not the mark's point.
    absl::StatusOr<CacheDecision> decision =
        failed ? Report(*job, CacheProfile(), "decode_jpeg: not a JPEG (file x, record 3)")
               : Report(*job, malformed);
    ASSERT_TRUE(decision.ok()) << decision.status();
    EXPECT_EQ(decision->cache_point(), 0);
    EXPECT_THAT(decision->reason(), HasSubstr("compute: worker a could not profile"));
    EXPECT_THAT(decision->reason(), HasSubstr(failed ? "not a JPEG" : "point 0 is 1"));
    for (int64_t epoch : {0, 1}) {
      ASSERT_TRUE(StartEpoch(*job, epoch).ok());
      const EpochState computing = EpochOf(*job, epoch);
      EXPECT_EQ(computing.cache().mode(), EpochCache::COMPUTE);
      EXPECT_EQ(computing.cache().cache_key(), "");
      // Pinned up to the last mark whatever was decided: the job's data does not depend on it.
      EXPECT_EQ(computing.cache().cached_prefix_ops(), kMarkPoint);
      FinishEpoch(*job, epoch);
    }
  }
  EXPECT_EQ(Status().state().caches_size(), 0);
}

TEST_F(DispatcherAutoCacheTest, WithoutAProfileInTimeTheJobComputes) {
  OpenCaching();
  auto job = CreateAutoJob("nobody");  // No worker to profile it.
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*job, 0)));
  ASSERT_TRUE(impl_->DecideOverdueCaches().ok());
  EXPECT_FALSE(JobOf(*job).has_cache_decision()) << "not overdue yet";
  clock_.AdvanceMicros(60 * 1000 * 1000);
  ASSERT_TRUE(impl_->DecideOverdueCaches().ok());
  ASSERT_TRUE(JobOf(*job).has_cache_decision());
  EXPECT_EQ(JobOf(*job).cache_decision().cache_point(), 0);
  EXPECT_THAT(JobOf(*job).cache_decision().reason(), HasSubstr("no worker reported a profile"));
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  EXPECT_EQ(EpochOf(*job, 0).cache().mode(), EpochCache::COMPUTE);
}

class DispatcherAutoCacheRestartTest : public DispatcherAutoCacheTest,
                                       public ::testing::WithParamInterface<int64_t> {};

TEST_P(DispatcherAutoCacheRestartTest, TheDecisionSurvivesARestart) {
  OpenCaching(GetParam());
  RegisterWorker("a");
  auto job = CreateAutoJob("auto");
  ASSERT_TRUE(job.ok()) << job.status();
  // A restart while waiting forgets the request (it is not journaled) and asks again.
  EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*job, 0)));
  OpenCaching(GetParam());
  EXPECT_TRUE(ProfileRequests().empty()) << "nobody waits until the client retries";
  EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*job, 0)));
  EXPECT_EQ(ProfileRequests().size(), 1u);
  ASSERT_TRUE(Report(*job, WorthCaching()).ok());
  const std::string decided = SerializeDeterministically(JobOf(*job).cache_decision());
  const std::string before = State();
  OpenCaching(GetParam());
  EXPECT_EQ(State(), before);
  EXPECT_EQ(SerializeDeterministically(JobOf(*job).cache_decision()), decided);
  // The restarted dispatcher starts the epoch at once, as decided.
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  EXPECT_EQ(EpochOf(*job, 0).cache().mode(), EpochCache::PUT);
  EXPECT_TRUE(ProfileRequests().empty());
}

INSTANTIATE_TEST_SUITE_P(SnapshotIntervals, DispatcherAutoCacheRestartTest,
                         ::testing::Values(10000, 2));

TEST_F(DispatcherAutoCacheTest, EvictionMakesRoomFromIdleCachesButNeverFromOneBeingRead) {
  cache_capacity_bytes_ = 5000;
  OpenCaching();
  RegisterWorker("a");
  // Job "old" caches 4000 bytes at the mark and is reading them in its epoch 1.
  auto old_job = CreateAutoJob("old", /*seed=*/1);
  ASSERT_TRUE(old_job.ok()) << old_job.status();
  EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*old_job, 0)));
  ASSERT_EQ(Report(*old_job, WorthCaching())->cache_point(), kMarkPoint);
  ASSERT_TRUE(StartEpoch(*old_job, 0).ok());
  FinishEpoch(*old_job, 0, /*bytes=*/2000);
  const std::string old_key = CacheKey(CachedDef(), kMarkPoint, 1);
  ASSERT_TRUE(StartEpoch(*old_job, 1).ok());
  ASSERT_EQ(EpochOf(*old_job, 1).cache().mode(), EpochCache::GET);
  const std::string old_dir = CacheRoot() + "/" + old_key;
  ASSERT_TRUE(clock_.FileExists(old_dir));

  // Job "new" would cache 64 bytes a sample × 100/64 records... × 30: 3000 bytes. With old's
  // 4000 being read, that does not fit: compute.
  auto new_job = CreateAutoJob("new", /*seed=*/2);
  ASSERT_TRUE(new_job.ok()) << new_job.status();
  EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*new_job, 0)));
  absl::StatusOr<CacheDecision> decision = Report(*new_job, WorthCaching(64 * 30));
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->cache_point(), 0) << decision->reason();
  EXPECT_THAT(decision->reason(), HasSubstr("no room"));
  ASSERT_TRUE(CacheOf(old_key).has_value()) << "read by a running epoch: never evicted";

  // Its epoch's tasks finished but not yet read to their end: a lost worker's task would run
  // again, reading the cache — still in use.
  for (const TaskDef& task : TaskDefs(*old_job, 1)) {
    ASSERT_TRUE(Finish(task.task_id(), task.generation(), 50, {}).ok());
  }
  ASSERT_TRUE(EpochOf(*old_job, 1).finished());
  auto waiting = CreateAutoJob("waiting", /*seed=*/5);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*waiting, 0)));
  decision = Report(*waiting, WorthCaching(64 * 30));
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->cache_point(), 0) << decision->reason();
  ASSERT_TRUE(CacheOf(old_key).has_value());

  // Once its consumer has read the epoch, its cache is idle and the least recently used: a
  // third job's cache evicts it, and its directory goes.
  FinishEpoch(*old_job, 1);
  auto third = CreateAutoJob("third", /*seed=*/4);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(absl::IsUnavailable(StartEpoch(*third, 0)));
  decision = Report(*third, WorthCaching(64 * 30));
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->cache_point(), kMarkPoint) << decision->reason();
  EXPECT_FALSE(CacheOf(old_key).has_value());
  EXPECT_FALSE(clock_.FileExists(old_dir));
  // The old job's next epoch has no cache to read: it writes it again.
  ASSERT_TRUE(StartEpoch(*old_job, 2).ok());
  EXPECT_EQ(EpochOf(*old_job, 2).cache().mode(), EpochCache::PUT);
}

TEST_F(DispatcherAutoCacheTest, ACompletedCacheDeletesItsStrayChunksAndEvictsOverCapacity) {
  cache_capacity_bytes_ = 5000;
  OpenCaching();
  RegisterWorker("a");
  // Two full-policy jobs (two seeds, two caches of 4000 bytes) write at once; the second
  // started last finishes first, and a run of it that lost its task left a chunk.
  auto first = CreateCachingJob(RegisterCachedDataset(), "first", CACHE_FULL, /*seed=*/1);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(StartEpoch(*first, 0).ok());
  auto second = CreateCachingJob(RegisterCachedDataset(), "second", CACHE_FULL, /*seed=*/2);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(StartEpoch(*second, 0).ok());
  const std::string first_key = CacheKey(CachedDef(), 3, 1);
  const std::string second_key = CacheKey(CachedDef(), 3, 2);
  const std::string second_dir = EpochOf(*second, 0).cache().cache_dir();
  const std::string stray = second_dir + "/t99-g1-i0-n5.chunk";
  ASSERT_TRUE(WriteStringToFile(&clock_, stray, "lost run", false).ok());
  std::vector<std::string> manifest;
  for (const TaskDef& task : TaskDefs(*second, 0)) {
    const CacheChunk chunk = Chunk(task.cache_dir(), task.task_id(), 0, 50);
    ASSERT_TRUE(WriteStringToFile(&clock_, chunk.path(), "chunk", false).ok());
    manifest.push_back(chunk.path());
  }
  FinishEpoch(*second, 0, /*bytes=*/2000);
  // Complete, within capacity: its stray chunk is deleted, its manifest's chunks kept.
  ASSERT_TRUE(CacheOf(second_key).has_value());
  EXPECT_FALSE(clock_.FileExists(stray));
  for (const std::string& path : manifest) EXPECT_TRUE(clock_.FileExists(path)) << path;

  // The first completes: 8000 > 5000. The least recently used idle cache goes — the second,
  // completed before — not the one just completed, though its Put started earlier.
  FinishEpoch(*first, 0, /*bytes=*/2000);
  EXPECT_TRUE(CacheOf(first_key).has_value());
  EXPECT_FALSE(CacheOf(second_key).has_value());
  EXPECT_FALSE(clock_.FileExists(second_dir));
  for (const std::string& path : manifest) EXPECT_FALSE(clock_.FileExists(path)) << path;
  // Nothing of the eviction is left in the cache root but the first cache's directory (and
  // the file naming the cluster).
  auto entries = clock_.GetChildren(CacheRoot());
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_THAT(*entries, ::testing::UnorderedElementsAre(first_key, kCacheRootOwnerFileName));
}

// Issue 30: a journal lost while the dispatcher was down (no lost-journal marker) must not
// silently become a new cluster over the old cluster's caches (which it would delete as
// garbage): the cache root's owner file names the old cluster.
TEST_F(DispatcherCacheTest, ANewJournalOverAnotherClustersCacheRootIsRefusedUnlessNewCluster) {
  OpenCaching();
  const std::string owner_file = CacheRoot() + "/" + kCacheRootOwnerFileName;
  const absl::StatusOr<std::string> old_cluster = ReadFileToString(&clock_, owner_file);
  ASSERT_TRUE(old_cluster.ok()) << old_cluster.status();
  EXPECT_EQ(*old_cluster, ClusterId() + "\n");
  Open(10000, CacheRoot());  // Its own journal: no objection.
  impl_.reset();

  std::filesystem::remove_all(dir_.path() + "/journal");
  const absl::StatusOr<std::unique_ptr<DispatcherImpl>> refused =
      DispatcherImpl::Open(Options(10000, CacheRoot()));
  ASSERT_FALSE(refused.ok()) << "a new cluster started silently over the old one's caches";
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(owner_file));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("holds the caches of cluster " + old_cluster->substr(0, 32)));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--new_cluster"));

  DispatcherOptions new_cluster = Options(10000, CacheRoot());
  new_cluster.new_cluster = true;
  absl::StatusOr<std::unique_ptr<DispatcherImpl>> started = DispatcherImpl::Open(new_cluster);
  ASSERT_TRUE(started.ok()) << started.status();
  impl_ = *std::move(started);
  EXPECT_NE(ClusterId() + "\n", *old_cluster);
  EXPECT_EQ(*ReadFileToString(&clock_, owner_file), ClusterId() + "\n");
}

TEST_F(DispatcherCacheTest, AnEpochStartedBeforeItsJobsPutCompletedWaitsForItThenGets) {
  // The trainer has read epoch 0 to its end; the last task's TaskFinished, which completes the
  // cache, is still on its way when the trainer starts epoch 1.
  cache_wait_ms_ = 10000;
  OpenCaching();
  RegisterWorker("a");
  auto job = CreateCachingJob(RegisterCachedDataset(), "full", CACHE_FULL);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  const std::vector<TaskDef> tasks = TaskDefs(*job, 0);
  ASSERT_EQ(tasks.size(), 2u);
  const std::vector<std::vector<CacheChunk>> chunks = PutChunks(tasks);
  ASSERT_TRUE(Finish(tasks[0].task_id(), 1, 55, chunks[0]).ok());
  absl::Status started;
  std::thread trainer([&] { started = StartEpoch(*job, 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(Finish(tasks[1].task_id(), 1, 45, chunks[1]).ok());
  trainer.join();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(EpochOf(*job, 1).cache().mode(), EpochCache::GET) << "not computed for nothing";
}

TEST_F(DispatcherCacheTest, AnEpochWhosePutDoesNotCompleteInTimeComputes) {
  OpenCaching();  // cache_wait_ms 20.
  RegisterWorker("a");
  auto job = CreateCachingJob(RegisterCachedDataset(), "full", CACHE_FULL);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(StartEpoch(*job, 0).ok());
  ASSERT_TRUE(StartEpoch(*job, 1).ok());
  const EpochState computing = EpochOf(*job, 1);
  EXPECT_EQ(computing.cache().mode(), EpochCache::COMPUTE);
  EXPECT_EQ(computing.cache().cached_prefix_ops(), 3) << "the prefix pinned all the same";
}

TEST_F(DispatcherImplTest, ErrorAfterAJournalWriteStopsTheDispatcherWithoutHangingWriters) {
  // The record is durable but cannot be applied: the dispatcher must refuse further changes
  // (naming the failure), release every writer queued behind it, and apply the record when
  // restarted.
  Open();
  ASSERT_TRUE(ConfigureFailpoints("journal.after_write_before_apply=after(3):error").ok());
  constexpr int kWriters = 8;
  std::vector<std::thread> writers;
  std::vector<std::string> registered(kWriters);
  std::atomic<int> failed{0};
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      RegisterWorkerRequest request;
      request.set_worker_id(absl::StrCat("w", i));
      request.set_address(absl::StrCat("w", i, ".local:7000"));
      RegisterWorkerResponse response;
      if (impl_->RegisterWorker(request, &response).ok()) {
        registered[i] = request.worker_id();
      } else {
        ++failed;
      }
    });
  }
  for (std::thread& t : writers) t.join();  // Hangs here if a queued writer is never released.
  ASSERT_TRUE(ConfigureFailpoints("").ok());
  EXPECT_GE(failed.load(), 1);
  RegisterWorkerRequest late;
  late.set_worker_id("late");
  late.set_address("late.local:7000");
  RegisterWorkerResponse response;
  const absl::Status refused = impl_->RegisterWorker(late, &response);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("journal.after_write_before_apply"));

  Open();  // The restart applies every durable record: the acknowledged ones and the failed one.
  GetStatusResponse status;
  ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
  std::set<std::string> workers;
  for (const WorkerState& w : status.state().workers()) workers.insert(w.worker_id());
  int acknowledged = 0;
  for (const std::string& id : registered) {
    if (id.empty()) continue;
    ++acknowledged;
    EXPECT_TRUE(workers.count(id)) << id << " was acknowledged but lost";
  }
  EXPECT_GE(static_cast<int>(workers.size()), acknowledged + 1);
}

TEST_F(DispatcherImplTest, AFinishedTaskIsListedAgainWhenItsConsumerResumesFromAnOlderPosition) {
  // A consumer read a finished task to its end, then was killed and resumed from a position it
  // had saved earlier: the task's worker must be told to serve it again (found by `granary
  // chaos --scenario random --seed 11`, where the worker answered NotFound for a minute).
  Open();
  RegisterWorker("a");
  const int64_t job = CreateJob(RegisterRangeDataset(10, 5), "j");
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  const auto listed = [&] {
    WorkerHeartbeatRequest request;
    request.set_worker_id("a");
    request.set_incarnation(1);
    WorkerHeartbeatResponse response;
    EXPECT_TRUE(impl_->WorkerHeartbeat(request, &response).ok());
    return response;
  };
  const WorkerHeartbeatResponse first = listed();
  ASSERT_EQ(first.tasks_size(), 1);
  const int64_t task = first.tasks(0).task_id();
  TaskFinishedRequest finished;
  finished.set_task_id(task);
  finished.set_generation(first.tasks(0).generation());
  finished.set_num_elements(10);
  TaskFinishedResponse ignored;
  ASSERT_TRUE(impl_->TaskFinished(finished, &ignored).ok());
  const auto consumer_needs = [&](int64_t next_index) {
    ClientHeartbeatRequest request;
    request.set_job_id(job);
    request.set_epoch(0);
    request.set_consumer(0);
    (*request.mutable_next_index())[task] = next_index;
    ClientHeartbeatResponse response;
    EXPECT_TRUE(impl_->ClientHeartbeat(request, &response).ok());
  };
  consumer_needs(10);
  EXPECT_EQ(listed().tasks_size(), 0) << "read to its end: no longer listed";
  consumer_needs(4);
  EXPECT_EQ(listed().tasks_size(), 1) << "the consumer resumed from element 4";
}

}  // namespace
}  // namespace granary
