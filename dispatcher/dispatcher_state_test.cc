// DispatcherState::Apply, update by update: what each command does to the state, and that a
// command which no longer applies changes nothing.
#include "dispatcher/dispatcher_state.h"

#include "common/deterministic_serialization.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;

class DispatcherStateTest : public ::testing::Test {
 protected:
  absl::Status Apply(const Update& u) { return state_.Apply(state_.applied_seq() + 1, u); }

  void Register(const std::string& id, bool standby = false) {
    Update u;
    u.mutable_register_worker()->set_worker_id(id);
    u.mutable_register_worker()->set_address(id + ":1");
    u.mutable_register_worker()->set_standby(standby);
    ASSERT_TRUE(Apply(u).ok());
  }

  // Creates dataset "d", a job and starts its epoch 0 with `splits` splits.
  void StartJob(int consumers, int slots, int splits) {
    Update d;
    d.mutable_register_dataset()->set_dataset_id("d");
    ASSERT_TRUE(Apply(d).ok());
    Update j;
    j.mutable_create_job()->set_dataset_id("d");
    j.mutable_create_job()->mutable_options()->set_num_consumers(consumers);
    j.mutable_create_job()->mutable_options()->set_num_worker_slots(slots);
    ASSERT_TRUE(Apply(j).ok());
    Update e;
    e.mutable_start_epoch()->set_job_id(1);
    for (int i = 0; i < splits; ++i) e.mutable_start_epoch()->add_plan()->set_id(i);
    ASSERT_TRUE(Apply(e).ok());
  }

  absl::Status Lease(int64_t task, int64_t from, int64_t max) {
    Update u;
    u.mutable_lease_splits()->set_task_id(task);
    u.mutable_lease_splits()->set_from_seq(from);
    u.mutable_lease_splits()->set_max(max);
    return Apply(u);
  }

  absl::Status Lose(const std::string& id, int64_t incarnation) {
    Update u;
    u.mutable_worker_lost()->set_worker_id(id);
    u.mutable_worker_lost()->set_incarnation(incarnation);
    return Apply(u);
  }

  DispatcherState state_;
};

TEST_F(DispatcherStateTest, StartEpochCreatesTasksRoundRobinOverActiveWorkers) {
  Register("b");
  Register("a");
  Register("s", /*standby=*/true);
  StartJob(/*consumers=*/2, /*slots=*/0, /*splits=*/5);
  // slots = 2 live non-standby workers; 2 consumers x 2 slots.
  std::vector<std::string> owners;
  for (const auto& [id, task] : state_.tasks()) {
    owners.push_back(task.worker_id());
    EXPECT_EQ(task.generation(), 1);
  }
  EXPECT_THAT(owners, ElementsAre("a", "b", "a", "b"));
  EXPECT_EQ(state_.TasksOfConsumer(1, 0, 1).size(), 2u);
}

TEST_F(DispatcherStateTest, TasksWaitUnassignedUntilAWorkerRegisters) {
  StartJob(1, 2, 3);
  for (const auto& [id, task] : state_.tasks()) EXPECT_EQ(task.worker_id(), "");
  Register("w");
  for (const auto& [id, task] : state_.tasks()) {
    EXPECT_EQ(task.worker_id(), "w");
    EXPECT_EQ(task.generation(), 1);
  }
}

TEST_F(DispatcherStateTest, LeasesHandOutThePlanInOrderAndStaleLeasesAreNoOps) {
  Register("w");
  StartJob(1, 2, 5);
  ASSERT_TRUE(Lease(1, 0, 2).ok());
  ASSERT_TRUE(Lease(2, 0, 2).ok());
  // Task 1 asks again from seq 0: it already has 2 leased; nothing changes.
  EXPECT_TRUE(absl::IsAlreadyExists(Lease(1, 0, 2)));
  ASSERT_TRUE(Lease(1, 2, 4).ok());
  std::vector<uint64_t> task1, task2;
  for (const Split& s : state_.FindTask(1)->leased()) task1.push_back(s.id());
  for (const Split& s : state_.FindTask(2)->leased()) task2.push_back(s.id());
  EXPECT_THAT(task1, ElementsAre(0, 1, 4));
  EXPECT_THAT(task2, ElementsAre(2, 3));
  EXPECT_EQ(state_.FindEpoch(1, 0)->next_split(), 5);
}

TEST_F(DispatcherStateTest, LostWorkersTasksGoToAnIdleStandbyAsANewGeneration) {
  Register("a");
  Register("b");
  Register("s", /*standby=*/true);
  StartJob(1, 0, 4);
  ASSERT_TRUE(Lose("a", 1).ok());
  EXPECT_TRUE(state_.FindWorker("a")->lost());
  const TaskState* moved = state_.FindTask(1);
  EXPECT_EQ(moved->worker_id(), "s");
  EXPECT_EQ(moved->generation(), 2);
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "b");
  EXPECT_EQ(state_.FindTask(2)->generation(), 1);
}

TEST_F(DispatcherStateTest, LossOfAStaleIncarnationIsANoOp) {
  Register("a");
  Register("a");  // Restarted before being declared lost: incarnation 2, keeps its tasks.
  StartJob(1, 1, 2);
  EXPECT_EQ(state_.FindWorker("a")->incarnation(), 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(Lose("a", 1)));
  EXPECT_FALSE(state_.FindWorker("a")->lost());
  EXPECT_EQ(state_.FindTask(1)->worker_id(), "a");
}

TEST_F(DispatcherStateTest, EpochFinishesWhenEveryTaskHas) {
  Register("w");
  StartJob(1, 2, 2);
  Update f;
  f.mutable_task_finished()->set_task_id(1);
  f.mutable_task_finished()->set_generation(1);
  f.mutable_task_finished()->set_num_elements(7);
  ASSERT_TRUE(Apply(f).ok());
  EXPECT_FALSE(state_.FindEpoch(1, 0)->finished());
  // A report from another generation is refused.
  f.mutable_task_finished()->set_task_id(2);
  f.mutable_task_finished()->set_generation(5);
  EXPECT_TRUE(absl::IsFailedPrecondition(Apply(f)));
  f.mutable_task_finished()->set_generation(1);
  ASSERT_TRUE(Apply(f).ok());
  EXPECT_TRUE(state_.FindEpoch(1, 0)->finished());
  EXPECT_EQ(state_.FindTask(1)->num_elements(), 7);
}

TEST_F(DispatcherStateTest, EpochsStartInOrderOnly) {
  Register("w");
  StartJob(1, 1, 1);
  Update e;
  e.mutable_start_epoch()->set_job_id(1);
  e.mutable_start_epoch()->set_epoch(2);
  EXPECT_TRUE(absl::IsFailedPrecondition(Apply(e)));
  e.mutable_start_epoch()->set_epoch(0);
  EXPECT_TRUE(absl::IsAlreadyExists(Apply(e)));
  e.mutable_start_epoch()->set_epoch(1);
  EXPECT_TRUE(Apply(e).ok());
}

TEST_F(DispatcherStateTest, OutOfOrderSequenceNumberIsRefused) {
  Update d;
  d.mutable_register_dataset()->set_dataset_id("d");
  EXPECT_TRUE(absl::IsFailedPrecondition(state_.Apply(2, d)));
  EXPECT_EQ(state_.applied_seq(), 0u);
}

TEST_F(DispatcherStateTest, ProtoRoundTripIsExact) {
  Register("a");
  Register("s", true);
  StartJob(2, 0, 6);
  ASSERT_TRUE(Lease(1, 0, 3).ok());
  ASSERT_TRUE(Lose("a", 1).ok());
  const DispatcherStateProto proto = state_.ToProto();
  auto copy = DispatcherState::FromProto(proto);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(SerializeDeterministically(copy->ToProto()), SerializeDeterministically(proto));
}

}  // namespace
}  // namespace granary
