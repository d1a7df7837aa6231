// DispatcherImpl over a real RocksDB journal: recovery reproduces the state exactly (across
// snapshot boundaries), split leases are idempotent and hand out every split of an epoch
// exactly once, also across reassignment and restart, and what the client heartbeats keep.
// (Registration, requests, status and provisioning: dispatcher_impl_requests_test.cc; caching
// jobs: cache/cache_coordinator_test.cc.)
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
#include "cache/cache_op_declarations.h"
#include "cache/cache_policy.h"
#include "common/deterministic_serialization.h"
#include "common/failpoint.h"
#include "common/status_macros.h"
#include "dispatcher/dispatcher_impl_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "testing/exposition_parser.h"
#include "testing/manual_clock_env.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

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
        if (rng() % 2) {
          // Every open of a named job gives the job's options (others are refused).
          const int name = rng() % 3;
          jobs.push_back(CreateJob(dataset, absl::StrCat("job", name), 1 + name % 2));
        } else {
          jobs.push_back(CreateJob(dataset, "", 1 + rng() % 2));
        }
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
