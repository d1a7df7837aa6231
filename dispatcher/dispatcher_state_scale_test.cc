// DispatcherState::Apply for elastic tasks (ScaleJobUpdate) and local workers: which tasks
// are added or shed, and where each runs.
#include "absl/strings/str_cat.h"
#include "common/deterministic_serialization.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/dispatcher_state_test_fixture.h"
#include "dispatcher/request_limits.h"
#include "dispatcher/state_invariants.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;

// Elastic tasks (issue 17): ScaleJobUpdate adds tasks to a running epoch's consumers or sheds
// them; shed tasks lease nothing more.
class ScaleJobTest : public DispatcherStateTest {
 protected:
  absl::Status Scale(int32_t slots, const std::string& reason = "test") {
    Update u;
    u.mutable_scale_job()->set_job_id(1);
    u.mutable_scale_job()->set_num_worker_slots(slots);
    u.mutable_scale_job()->set_reason(reason);
    return Apply(u);
  }
  // consumer -> the worker of each task still leasing, by slot.
  std::map<int32_t, std::vector<std::string>> Leasing() const {
    std::map<int32_t, std::vector<std::string>> out;
    for (const auto& [id, task] : state_.tasks()) {
      if (!task.finished() && !task.draining()) out[task.consumer()].push_back(task.worker_id());
    }
    return out;
  }
};

TEST_F(ScaleJobTest, ScalingUpAddsTasksToEachConsumerOnStandbysThenTheLeastLoaded) {
  Register("a");
  Register("b");
  Register("s", /*standby=*/true);
  StartJob(/*consumers=*/2, /*slots=*/1, /*splits=*/10);
  ASSERT_THAT(Leasing(), (std::map<int32_t, std::vector<std::string>>{{0, {"a"}}, {1, {"b"}}}));
  ASSERT_TRUE(Scale(2, "autoscale: 2 workers").ok());
  // Consumer 0's new task takes the idle standby; consumer 1's the least-loaded, lowest id.
  EXPECT_THAT(Leasing(),
              (std::map<int32_t, std::vector<std::string>>{{0, {"a", "s"}}, {1, {"b", "a"}}}));
  EXPECT_EQ(state_.FindEpoch(1, 0)->task_ids_size(), 4);
  const JobState* job = state_.FindJob(1);
  EXPECT_EQ(job->options().num_worker_slots(), 2);
  EXPECT_EQ(job->scaling_steps(), 1);
  EXPECT_EQ(job->last_scaling(), "autoscale: 2 workers");
  for (const auto& [id, task] : state_.tasks()) EXPECT_EQ(task.generation(), 1) << id;
}

TEST_F(ScaleJobTest, ScalingDownShedsTheHighestSlotsWhichLeaseNothingMore) {
  Register("a");
  Register("b");
  Register("c");
  StartJob(/*consumers=*/1, /*slots=*/3, /*splits=*/10);
  ASSERT_TRUE(Lease(3, 0, 1).ok());
  ASSERT_TRUE(Scale(1).ok());
  const TaskState* kept = state_.FindTask(1);
  EXPECT_FALSE(kept->draining());
  EXPECT_TRUE(state_.FindTask(2)->draining());
  EXPECT_TRUE(state_.FindTask(3)->draining());
  // The shed task keeps its lease and gets no more; the kept one leases on.
  ASSERT_TRUE(Lease(3, 1, 4).ok());
  EXPECT_EQ(state_.FindTask(3)->leased_size(), 1);
  ASSERT_TRUE(Lease(1, 0, 4).ok());
  EXPECT_EQ(kept->leased_size(), 4);
  EXPECT_EQ(state_.FindEpoch(1, 0)->next_split(), 5);
  // Growing again adds new tasks (slots 3, 4): a shed task is never revived.
  ASSERT_TRUE(Scale(3).ok());
  EXPECT_EQ(state_.FindEpoch(1, 0)->task_ids_size(), 5);
  EXPECT_TRUE(state_.FindTask(2)->draining());
  EXPECT_EQ(state_.FindTask(5)->slot(), 4);
}

TEST_F(ScaleJobTest, AFullyLeasedEpochIsLeftAloneOnlyLaterEpochsChange) {
  Register("a");
  StartJob(/*consumers=*/1, /*slots=*/1, /*splits=*/2);
  ASSERT_TRUE(Lease(1, 0, 2).ok());
  ASSERT_TRUE(Scale(4).ok());
  EXPECT_EQ(state_.FindEpoch(1, 0)->task_ids_size(), 1);
  EXPECT_EQ(state_.FindJob(1)->options().num_worker_slots(), 4);
}

TEST_F(ScaleJobTest, OutOfRangeCountsAndUnknownJobsChangeNothing) {
  Register("a");
  StartJob(/*consumers=*/1, /*slots=*/1, /*splits=*/2);
  const std::string before = SerializeDeterministically(state_.ToProto());
  EXPECT_TRUE(absl::IsInvalidArgument(Scale(0)));
  EXPECT_TRUE(absl::IsInvalidArgument(Scale(kMaxWorkerSlots + 1)));
  Update other;
  other.mutable_scale_job()->set_job_id(9);
  other.mutable_scale_job()->set_num_worker_slots(2);
  EXPECT_TRUE(absl::IsNotFound(Apply(other)));
  DispatcherStateProto after = state_.ToProto();
  after.set_applied_seq(0);
  DispatcherStateProto was;
  ASSERT_TRUE(was.ParseFromString(before));
  was.set_applied_seq(0);
  EXPECT_EQ(SerializeDeterministically(after), SerializeDeterministically(was));
}

TEST_F(ScaleJobTest, TasksAddedWithNoLiveWorkerWaitForOne) {
  Register("a");
  StartJob(/*consumers=*/1, /*slots=*/1, /*splits=*/4);
  ASSERT_TRUE(Lose("a", 1).ok());
  ASSERT_TRUE(Scale(2).ok());
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "");
  EXPECT_EQ(state_.FindTask(2)->generation(), 0);
  Register("b");  // takes both unassigned tasks
  EXPECT_EQ(state_.FindTask(1)->worker_id(), "b");
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "b");
}

// Local workers (issue 17): a worker local to one consumer of one job runs only that
// consumer's local tasks; remote tasks never go to it.
class LocalWorkerTest : public ScaleJobTest {
 protected:
  void RegisterLocal(const std::string& id, int64_t job, int32_t consumer,
                     bool take_over_load = false) {
    Update u;
    u.mutable_register_worker()->set_worker_id(id);
    u.mutable_register_worker()->set_address(id + ":1");
    u.mutable_register_worker()->set_local_job_id(job);
    u.mutable_register_worker()->set_local_consumer(consumer);
    u.mutable_register_worker()->set_take_over_load(take_over_load);
    ASSERT_TRUE(Apply(u).ok());
  }
  absl::Status ScaleBoth(int32_t remote, int32_t local) {
    Update u;
    u.mutable_scale_job()->set_job_id(1);
    u.mutable_scale_job()->set_num_worker_slots(remote);
    u.mutable_scale_job()->set_num_local_slots(local);
    return Apply(u);
  }
  // (worker, local) of each task still leasing, by task id.
  std::vector<std::pair<std::string, bool>> Placement() const {
    std::vector<std::pair<std::string, bool>> out;
    for (const auto& [id, task] : state_.tasks()) {
      if (!task.finished() && !task.draining()) out.emplace_back(task.worker_id(), task.local());
    }
    return out;
  }
};

TEST_F(LocalWorkerTest, LocalTasksRunOnTheirConsumersLocalWorkersAndRemoteOnesNever) {
  Register("r1");
  StartJob(/*consumers=*/2, /*slots=*/1, /*splits=*/20);  // job 1, epoch 0
  RegisterLocal("l0", /*job=*/1, /*consumer=*/0);
  RegisterLocal("l1", /*job=*/1, /*consumer=*/1);
  // Slots from the worker count count remote workers only: still 1 task per consumer.
  EXPECT_EQ(state_.FindEpoch(1, 0)->task_ids_size(), 2);
  for (const auto& [id, task] : state_.tasks()) EXPECT_EQ(task.worker_id(), "r1") << id;
  ASSERT_TRUE(ScaleBoth(/*remote=*/2, /*local=*/1).ok());
  // Per consumer: a second remote task (r1 again: local workers take no remote task) and a
  // local one on its own consumer's local worker.
  EXPECT_THAT(Placement(), ElementsAre(std::pair<std::string, bool>{"r1", false},
                                       std::pair<std::string, bool>{"r1", false},
                                       std::pair<std::string, bool>{"r1", false},
                                       std::pair<std::string, bool>{"l0", true},
                                       std::pair<std::string, bool>{"r1", false},
                                       std::pair<std::string, bool>{"l1", true}));
  // Local only: the remote tasks are shed, the local ones lease on.
  ASSERT_TRUE(ScaleBoth(0, 1).ok());
  EXPECT_THAT(Placement(), ElementsAre(std::pair<std::string, bool>{"l0", true},
                                       std::pair<std::string, bool>{"l1", true}));
  EXPECT_TRUE(absl::IsInvalidArgument(ScaleBoth(0, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(ScaleBoth(-1, 2)));
}

TEST_F(LocalWorkerTest, ALostLocalWorkersTaskFallsBackToARemoteWorker) {
  Register("r1");
  Update d;
  d.mutable_register_dataset()->set_dataset_id("d");
  ASSERT_TRUE(Apply(d).ok());
  Update j;
  j.mutable_create_job()->set_dataset_id("d");
  j.mutable_create_job()->mutable_options()->set_num_worker_slots(1);
  j.mutable_create_job()->mutable_options()->set_num_local_slots(1);
  ASSERT_TRUE(Apply(j).ok());
  RegisterLocal("l0", 1, 0);
  RegisterLocal("other", 7, 0);  // local to another job: never used here
  Update e;
  e.mutable_start_epoch()->set_job_id(1);
  for (int i = 0; i < 8; ++i) e.mutable_start_epoch()->add_plan()->set_id(i);
  ASSERT_TRUE(Apply(e).ok());
  EXPECT_THAT(Placement(), ElementsAre(std::pair<std::string, bool>{"r1", false},
                                       std::pair<std::string, bool>{"l0", true}));
  ASSERT_TRUE(Lose("l0", 1).ok());
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "r1");
  EXPECT_EQ(state_.FindTask(2)->generation(), 2);
  // Only local workers left: the remote tasks wait unassigned rather than run on them.
  ASSERT_TRUE(Lose("r1", 1).ok());
  EXPECT_EQ(state_.FindTask(1)->worker_id(), "");
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "");
  // The local worker back: it takes its local task, not the remote one.
  RegisterLocal("l0", 1, 0);
  EXPECT_EQ(state_.FindTask(1)->worker_id(), "");
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "l0");
}

TEST_F(LocalWorkerTest, AWorkerReRegisteringAsLocalGivesUpTheRemoteTasksItHeld) {
  Register("a");
  Register("b");
  StartJob(/*consumers=*/1, /*slots=*/2, /*splits=*/8);
  ASSERT_EQ(state_.FindTask(2)->worker_id(), "b");
  RegisterLocal("b", 1, 0);
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "a");
  EXPECT_EQ(state_.FindTask(2)->generation(), 2);
}

TEST_F(LocalWorkerTest, AProvisionedWorkerTakesTheLeastLeasedTaskOfTheBusiestWorker) {
  Register("a");
  StartJob(/*consumers=*/1, /*slots=*/3, /*splits=*/30);  // all three on a
  ASSERT_TRUE(Lease(1, 0, 4).ok());
  ASSERT_TRUE(Lease(2, 0, 1).ok());
  ASSERT_TRUE(Lease(3, 0, 2).ok());
  Update u;
  u.mutable_register_worker()->set_worker_id("p1");
  u.mutable_register_worker()->set_address("p1:1");
  u.mutable_register_worker()->set_take_over_load(true);
  ASSERT_TRUE(Apply(u).ok());
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "p1");
  EXPECT_EQ(state_.FindTask(2)->generation(), 2);
  EXPECT_EQ(state_.FindTask(1)->worker_id(), "a");
  EXPECT_EQ(state_.FindTask(3)->worker_id(), "a");
  // A plain registration takes nothing; nor does one when no worker holds two tasks.
  Register("c");
  EXPECT_EQ(state_.UnfinishedTasksOfWorker("c").size(), 0u);
  u.mutable_register_worker()->set_worker_id("p2");
  ASSERT_TRUE(Apply(u).ok());
  EXPECT_EQ(state_.UnfinishedTasksOfWorker("p2").size(), 1u);  // a still had two
  u.mutable_register_worker()->set_worker_id("p3");
  ASSERT_TRUE(Apply(u).ok());
  EXPECT_EQ(state_.UnfinishedTasksOfWorker("p3").size(), 0u);
}

}  // namespace
}  // namespace granary
