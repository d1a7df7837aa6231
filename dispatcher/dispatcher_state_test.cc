// DispatcherState::Apply and Validate for jobs, epochs, leases and workers, update by update:
// what each command does to the state, and that a command which no longer applies changes
// nothing. (Elastic tasks and local workers: dispatcher_state_scale_test.cc; caches:
// dispatcher_state_cache_test.cc.)
#include "dispatcher/dispatcher_state.h"

#include "absl/strings/str_cat.h"
#include "common/deterministic_serialization.h"
#include "dispatcher/dispatcher_state_test_fixture.h"
#include "dispatcher/request_limits.h"
#include "dispatcher/state_invariants.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

TEST_F(DispatcherStateTest, ARecordWithHostileCountsAppliesAsARefusedNoOp) {
  // Issue 13, defect 1: a job of 2^31-1 consumers x 2^31-1 slots was journaled, and starting
  // its epoch threw std::length_error from Apply, on the live dispatcher and on every replay.
  Register("w");
  Update d;
  d.mutable_register_dataset()->set_dataset_id("d");
  ASSERT_TRUE(Apply(d).ok());
  Update j;
  j.mutable_create_job()->set_dataset_id("d");
  j.mutable_create_job()->mutable_options()->set_num_consumers(2147483647);
  j.mutable_create_job()->mutable_options()->set_num_worker_slots(2147483647);
  const absl::Status created = Apply(j);
  EXPECT_TRUE(absl::IsInvalidArgument(created)) << created;
  EXPECT_THAT(std::string(created.message()), HasSubstr("num_consumers is 2147483647"));
  EXPECT_EQ(state_.FindJob(1), nullptr);
  Update e;
  e.mutable_start_epoch()->set_job_id(1);
  e.mutable_start_epoch()->add_plan()->set_id(0);
  EXPECT_TRUE(absl::IsNotFound(Apply(e)));
  EXPECT_TRUE(state_.tasks().empty());
  EXPECT_EQ(state_.applied_seq(), 4u);
}

TEST_F(DispatcherStateTest, SlotsFromTheWorkerCountAreCappedAtTheTaskLimit) {
  // num_worker_slots 0 takes one slot per live worker: the epoch's tasks stay bounded however
  // many workers registered.
  for (int i = 0; i < 20; ++i) Register(absl::StrCat("w", i));
  StartJob(kMaxConsumers, 0, 1);
  EXPECT_EQ(state_.FindEpoch(1, 0)->task_ids_size(), kMaxTasksPerEpoch);
}

TEST_F(DispatcherStateTest, RetiringAFinishedJobRemovesItsEpochsAndTasksAndFreesItsName) {
  Register("w");
  StartJob(1, 2, 3);
  Update retire;
  retire.mutable_retire_job()->set_job_id(1);
  EXPECT_TRUE(absl::IsFailedPrecondition(Apply(retire))) << "epoch 0 is not finished";
  for (int64_t task : {1, 2}) {
    Update f;
    f.mutable_task_finished()->set_task_id(task);
    f.mutable_task_finished()->set_generation(1);
    ASSERT_TRUE(Apply(f).ok());
  }
  ASSERT_TRUE(Apply(retire).ok());
  EXPECT_EQ(state_.FindJob(1), nullptr);
  EXPECT_EQ(state_.FindEpoch(1, 0), nullptr);
  EXPECT_TRUE(state_.tasks().empty());
  EXPECT_TRUE(absl::IsNotFound(Apply(retire)));
  // The dataset stays; a new job gets a new id.
  Update j;
  j.mutable_create_job()->set_dataset_id("d");
  ASSERT_TRUE(Apply(j).ok());
  EXPECT_NE(state_.FindJob(2), nullptr);
}

// Job names are per owner: two owners each have a "train"; one owner's second "train" is an
// AlreadyExists no-op. Records are the same as when names were global (CreateJobUpdate has
// carried the owner since jobs were owned), so a journal of then replays unchanged: its names
// were unique, and they stay unique per owner.
TEST_F(DispatcherStateTest, JobNamesArePerOwnerAndSurviveASnapshot) {
  Update d;
  d.mutable_register_dataset()->set_dataset_id("d");
  ASSERT_TRUE(Apply(d).ok());
  const auto create = [&](const std::string& owner, const std::string& name) {
    Update j;
    j.mutable_create_job()->set_dataset_id("d");
    j.mutable_create_job()->set_owner(owner);
    j.mutable_create_job()->set_name(name);
    return Apply(j);
  };
  ASSERT_TRUE(create("mallory", "train").ok());
  ASSERT_TRUE(create("alice", "train").ok());
  ASSERT_TRUE(create("", "train").ok()) << "an unowned job has its own scope";
  const absl::Status again = create("alice", "train");
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(again.message(), HasSubstr("job 'train' of owner 'alice' exists"));
  EXPECT_EQ(state_.jobs().size(), 3u);
  ASSERT_NE(state_.FindJobByName("alice", "train"), nullptr);
  EXPECT_EQ(state_.FindJobByName("alice", "train")->owner(), "alice");
  EXPECT_EQ(state_.FindJobByName("mallory", "train")->job_id(), 1);
  EXPECT_EQ(state_.FindJobByName("bob", "train"), nullptr);
  ASSERT_NE(state_.FindJobByName("", "train"), nullptr);
  EXPECT_EQ(state_.FindJobByName("", "train")->job_id(), 3);
  EXPECT_EQ(state_.FindJobByName("alice", "other"), nullptr);

  auto copy = DispatcherState::FromProto(state_.ToProto());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->FindJobByName("alice", "train")->job_id(),
            state_.FindJobByName("alice", "train")->job_id());
  for (const std::string owner : {"mallory", "alice", ""}) {
    ASSERT_NE(copy->FindJobByName(owner, "train"), nullptr) << "owner '" << owner << "'";
    EXPECT_EQ(copy->FindJobByName(owner, "train")->job_id(),
              state_.FindJobByName(owner, "train")->job_id());
  }
}

TEST_F(DispatcherStateTest, TheWorkerIndexFollowsAssignmentFinishingAndLoss) {
  Register("a");
  Register("b");
  StartJob(1, 4, 4);  // Tasks 1, 3 on a; 2, 4 on b.
  const auto ids = [&](const std::string& worker) {
    std::vector<int64_t> out;
    for (const TaskState* t : state_.UnfinishedTasksOfWorker(worker)) out.push_back(t->task_id());
    return out;
  };
  EXPECT_THAT(ids("a"), ElementsAre(1, 3));
  Update f;
  f.mutable_task_finished()->set_task_id(3);
  f.mutable_task_finished()->set_generation(1);
  ASSERT_TRUE(Apply(f).ok());
  EXPECT_THAT(ids("a"), ElementsAre(1));
  ASSERT_TRUE(Lose("a", 1).ok());
  EXPECT_THAT(ids("a"), ElementsAre());
  EXPECT_THAT(ids("b"), ElementsAre(1, 2, 4));
  ASSERT_TRUE(Lose("b", 1).ok());
  EXPECT_THAT(ids(""), ElementsAre(1, 2, 4));
  Register("c");
  EXPECT_THAT(ids("c"), ElementsAre(1, 2, 4));
  // Rebuilt from a snapshot.
  auto copy = DispatcherState::FromProto(state_.ToProto());
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->UnfinishedTasksOfWorker("c").size(), 3u);
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

// Found by the chaos soak (scale scenario, seed 441731): all workers lost at once left a
// finished task its consumer had not read to the end without a worker; a worker registering
// must take it, as WorkerLost moves finished tasks.
TEST_F(DispatcherStateTest, AFinishedTaskLeftWithoutAWorkerGoesToTheNextToRegister) {
  Register("a");
  StartJob(/*consumers=*/1, /*slots=*/2, /*splits=*/4);
  Update f;
  f.mutable_task_finished()->set_task_id(1);
  f.mutable_task_finished()->set_generation(1);
  f.mutable_task_finished()->set_num_elements(3);
  ASSERT_TRUE(Apply(f).ok());
  ASSERT_TRUE(Lose("a", 1).ok());
  EXPECT_EQ(state_.FindTask(1)->worker_id(), "");
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "");
  Register("b");
  EXPECT_EQ(state_.FindTask(1)->worker_id(), "b") << "the finished task still has a reader";
  EXPECT_TRUE(state_.FindTask(1)->finished());
  EXPECT_EQ(state_.FindTask(2)->worker_id(), "b");
}

// Validate: each refusal, with Apply's code, and nothing changes (not even applied_seq).
TEST_F(DispatcherStateTest, ValidateRefusesWhatApplyWouldWithoutChangingTheState) {
  Register("a");
  Update d;
  d.mutable_register_dataset()->set_dataset_id("d");
  ASSERT_TRUE(Apply(d).ok());
  Update j;
  j.mutable_create_job()->set_dataset_id("d");
  j.mutable_create_job()->set_name("train");
  j.mutable_create_job()->mutable_options()->set_num_epochs(1);
  ASSERT_TRUE(Apply(j).ok());
  Update e;
  e.mutable_start_epoch()->set_job_id(1);
  e.mutable_start_epoch()->add_plan()->set_id(0);
  ASSERT_TRUE(state_.Validate(e).ok());
  ASSERT_TRUE(Apply(e).ok());
  const int64_t task = state_.tasks().begin()->first;

  Update past_num_epochs = e;
  past_num_epochs.mutable_start_epoch()->set_epoch(1);
  Update skipped_epoch = e;
  skipped_epoch.mutable_start_epoch()->set_epoch(2);
  Update unknown_job = e;
  unknown_job.mutable_start_epoch()->set_job_id(9);
  Update put_of_unknown_state = e;
  put_of_unknown_state.mutable_start_epoch()->mutable_cache()->set_mode(EpochCache::GET);
  put_of_unknown_state.mutable_start_epoch()->mutable_cache()->set_cache_key("k");
  put_of_unknown_state.mutable_start_epoch()->set_epoch(1);
  Update same_name = j;
  Update unknown_dataset = j;
  unknown_dataset.mutable_create_job()->set_name("");
  unknown_dataset.mutable_create_job()->set_dataset_id("x");
  Update stale_lease;
  stale_lease.mutable_lease_splits()->set_task_id(task);
  stale_lease.mutable_lease_splits()->set_from_seq(3);
  Update wrong_generation;
  wrong_generation.mutable_task_finished()->set_task_id(task);
  wrong_generation.mutable_task_finished()->set_generation(7);
  Update stale_loss;
  stale_loss.mutable_worker_lost()->set_worker_id("a");
  stale_loss.mutable_worker_lost()->set_incarnation(2);
  Update retire_running;
  retire_running.mutable_retire_job()->set_job_id(1);
  Update evict_unknown;
  evict_unknown.mutable_evict_cache()->set_cache_key("k");
  Update scale_too_far;
  scale_too_far.mutable_scale_job()->set_job_id(1);
  scale_too_far.mutable_scale_job()->set_num_worker_slots(-1);
  const struct {
    const Update& update;
    absl::StatusCode code;
  } refusals[] = {
      {d, absl::StatusCode::kAlreadyExists},
      {e, absl::StatusCode::kAlreadyExists},
      {past_num_epochs, absl::StatusCode::kOutOfRange},
      {skipped_epoch, absl::StatusCode::kFailedPrecondition},
      {unknown_job, absl::StatusCode::kNotFound},
      {same_name, absl::StatusCode::kAlreadyExists},
      {unknown_dataset, absl::StatusCode::kNotFound},
      {stale_lease, absl::StatusCode::kAlreadyExists},
      {wrong_generation, absl::StatusCode::kFailedPrecondition},
      {stale_loss, absl::StatusCode::kFailedPrecondition},
      {retire_running, absl::StatusCode::kFailedPrecondition},
      {evict_unknown, absl::StatusCode::kNotFound},
      {scale_too_far, absl::StatusCode::kInvalidArgument},
      {Update(), absl::StatusCode::kInvalidArgument},
  };
  const std::string before = SerializeDeterministically(state_.ToProto());
  const uint64_t seq = state_.applied_seq();
  for (const auto& [update, code] : refusals) {
    EXPECT_EQ(state_.Validate(update).code(), code) << update.ShortDebugString();
  }
  EXPECT_EQ(state_.Validate(put_of_unknown_state).code(), absl::StatusCode::kOutOfRange)
      << "past num_epochs comes before the cache check";
  EXPECT_EQ(SerializeDeterministically(state_.ToProto()), before);
  EXPECT_EQ(state_.applied_seq(), seq);
  // Apply refuses the same (as a journaled record it changes nothing but applied_seq).
  for (const auto& [update, code] : refusals) {
    EXPECT_EQ(Apply(update).code(), code) << update.ShortDebugString();
  }
  EXPECT_EQ(state_.applied_seq(), seq + std::size(refusals));
  DispatcherStateProto after = state_.ToProto();
  after.set_applied_seq(seq);
  EXPECT_EQ(SerializeDeterministically(after), before);
}

}  // namespace
}  // namespace granary
