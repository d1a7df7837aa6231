// DispatcherImpl over a real RocksDB journal: recovery reproduces the state exactly (across
// snapshot boundaries), split leases are idempotent and hand out every split of an epoch
// exactly once, also across reassignment and restart.
#include "dispatcher/dispatcher_impl.h"

#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/deterministic_serialization.h"
#include "common/manual_clock_env.h"
#include "common/scoped_temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline_loader.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kTimeoutMs = 1000;

class DispatcherImplTest : public ::testing::Test {
 protected:
  void Open(int64_t snapshot_every = 10000) {
    impl_.reset();
    DispatcherOptions options;
    options.journal_dir = dir_.path() + "/journal";
    options.snapshot_every = snapshot_every;
    // The failure detector's own thread polls every timeout/4 of the machine's time, but this
    // test's clock only moves when the test says so.
    options.worker_timeout_ms = kTimeoutMs;
    options.env = &clock_;
    options.udfs = &udfs_;
    auto impl = DispatcherImpl::Open(options);
    ASSERT_TRUE(impl.ok()) << impl.status();
    impl_ = std::move(impl).value();
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
  UdfRegistry udfs_ = UdfRegistry::WithBuiltins();
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
        jobs.push_back(CreateJob(dataset, rng() % 2 ? absl::StrCat("job", rng() % 3) : "",
                                 1 + rng() % 2));
        break;
      case 2:
        if (!jobs.empty()) {
          const int64_t job = jobs[rng() % jobs.size()];
          GetStatusResponse s;
          ASSERT_TRUE(impl_->GetStatus({}, &s).ok());
          for (const JobState& j : s.state().jobs()) {
            if (j.job_id() == job) ASSERT_TRUE(StartEpoch(job, j.epochs_started()).ok());
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
  WorkerHeartbeatRequest stale;
  stale.set_worker_id("a");
  stale.set_incarnation(7);
  WorkerHeartbeatResponse hb;
  EXPECT_TRUE(absl::IsFailedPrecondition(impl_->WorkerHeartbeat(stale, &hb)));
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
