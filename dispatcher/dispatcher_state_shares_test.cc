// DispatcherState and consumer shares (DESIGN.md §6, "Consumers and shares"): equal-shares
// epochs deal their plan to the consumers, tasks lease only from their consumer's share, and an
// elastic resume deals the rest of an epoch to another number of consumers.
#include <map>
#include <set>

#include "common/read_stride.h"
#include "dispatcher/dispatcher_state_test_fixture.h"
#include "gmock/gmock.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class DispatcherStateSharesTest : public DispatcherStateTest {
 protected:
  // Creates dataset "d" and job 1 with `options`.
  void CreateJob(const JobOptions& options) {
    Update d;
    d.mutable_register_dataset()->set_dataset_id("d");
    ASSERT_TRUE(Apply(d).ok());
    Update j;
    j.mutable_create_job()->set_dataset_id("d");
    j.mutable_create_job()->set_name("ddp");
    *j.mutable_create_job()->mutable_options() = options;
    ASSERT_TRUE(Apply(j).ok());
  }

  absl::Status StartEpoch(int64_t epoch, int splits) {
    Update e;
    e.mutable_start_epoch()->set_job_id(1);
    e.mutable_start_epoch()->set_epoch(epoch);
    for (int i = 0; i < splits; ++i) e.mutable_start_epoch()->add_plan()->set_id(i);
    return Apply(e);
  }

  // The split ids task `id` holds.
  std::vector<uint64_t> Held(int64_t id) {
    std::vector<uint64_t> ids;
    for (const Split& split : state_.FindTask(id)->leased()) ids.push_back(split.id());
    return ids;
  }

  // Task `id` finishes, having produced `num_elements`.
  absl::Status FinishTask(int64_t id, int64_t num_elements) {
    Update f;
    f.mutable_task_finished()->set_task_id(id);
    f.mutable_task_finished()->set_generation(state_.FindTask(id)->generation());
    f.mutable_task_finished()->set_num_elements(num_elements);
    return Apply(f);
  }

  // The task ids of `consumer` in `epoch`.
  std::vector<int64_t> TasksOf(int64_t epoch, int32_t consumer) {
    std::vector<int64_t> ids;
    for (const TaskState* task : state_.TasksOfConsumer(1, epoch, consumer)) {
      ids.push_back(task->task_id());
    }
    return ids;
  }

  // Job 1's epoch 0, saved by `from` consumers, resumes at `to` (no positions yet).
  static Update Resume(int32_t from, int32_t to) {
    Update u;
    ResumeAtConsumersUpdate& r = *u.mutable_resume_at_consumers();
    r.set_job_id(1);
    r.set_epoch(0);
    r.set_from_consumers(from);
    r.set_num_consumers(to);
    return u;
  }

  static JobOptions Options(int consumers, int slots, Sharding sharding = SHARDING_AUTO) {
    JobOptions options;
    options.set_num_consumers(consumers);
    options.set_num_worker_slots(slots);
    options.set_sharding(sharding);
    return options;
  }
};

TEST_F(DispatcherStateSharesTest, EachConsumerLeasesOnlyItsOwnShare) {
  Register("w1");
  CreateJob(Options(2, 1));
  ASSERT_TRUE(StartEpoch(0, 5).ok());
  const int64_t c0 = TasksOf(0, 0).at(0), c1 = TasksOf(0, 1).at(0);
  // Consumer 1 asks first and for everything: it gets its share (splits 1, 3) only.
  ASSERT_TRUE(Lease(c1, 0, 10).ok());
  EXPECT_THAT(Held(c1), ::testing::ElementsAre(1, 3));
  ASSERT_TRUE(Lease(c0, 0, 10).ok());
  EXPECT_THAT(Held(c0), ::testing::ElementsAre(0, 2, 4));
  EXPECT_EQ(state_.FindEpoch(1, 0)->next_split(), 5);
}

TEST_F(DispatcherStateSharesTest, DynamicShardingLetsTheFirstConsumerTakeAll) {
  Register("w1");
  CreateJob(Options(2, 1, SHARDING_DYNAMIC));
  ASSERT_TRUE(StartEpoch(0, 5).ok());
  EXPECT_EQ(state_.FindEpoch(1, 0)->shares_size(), 0);
  const int64_t c1 = TasksOf(0, 1).at(0);
  ASSERT_TRUE(Lease(c1, 0, 10).ok());
  EXPECT_EQ(Held(c1).size(), 5u);
}

TEST_F(DispatcherStateSharesTest, AnEpochWithFewerSplitsThanConsumersIsRefusedNamingBoth) {
  Register("w1");
  CreateJob(Options(3, 1));
  const absl::Status refused = StartEpoch(0, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("2 splits for 3 consumers"));
  EXPECT_EQ(state_.FindEpoch(1, 0), nullptr);
  // Uneven shares accept it; so does an empty epoch.
  JobOptions uneven = Options(3, 1);
  uneven.set_remainder(REMAINDER_UNEVEN);
  DispatcherState other;
  std::swap(other, state_);
  CreateJob(uneven);
  EXPECT_TRUE(StartEpoch(0, 2).ok());
}

TEST_F(DispatcherStateSharesTest, SharesSurviveASnapshot) {
  Register("w1");
  CreateJob(Options(2, 1));
  ASSERT_TRUE(StartEpoch(0, 4).ok());
  ASSERT_TRUE(Lease(TasksOf(0, 1).at(0), 0, 1).ok());
  const absl::StatusOr<DispatcherState> loaded = DispatcherState::FromProto(state_.ToProto());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->ToProto().SerializeAsString(), state_.ToProto().SerializeAsString());
  EXPECT_EQ(loaded->FindEpoch(1, 0)->shares(1).leased(), 1);
}

TEST_F(DispatcherStateSharesTest, ResumingAtFewerConsumersDealsTheRestToThem) {
  Register("w1");
  CreateJob(Options(4, 1));
  ASSERT_TRUE(StartEpoch(0, 8).ok());  // shares: c0 {0,4}, c1 {1,5}, c2 {2,6}, c3 {3,7}
  std::vector<int64_t> old;
  for (int c = 0; c < 4; ++c) old.push_back(TasksOf(0, c).at(0));
  ASSERT_TRUE(Lease(old[0], 0, 1).ok());  // holds split 0
  ASSERT_TRUE(Lease(old[2], 0, 2).ok());  // holds splits 2, 6
  Update u = Resume(4, 2);
  ResumeAtConsumersUpdate& r = *u.mutable_resume_at_consumers();
  (*r.mutable_next_index())[old[0]] = 3;
  (*r.mutable_next_index())[old[2]] = 5;
  const int64_t generation = state_.FindTask(old[2])->generation();
  ASSERT_TRUE(Apply(u).ok());
  EXPECT_EQ(state_.FindJob(1)->options().num_consumers(), 2);
  // Old tasks by old consumer, round robin: 0 -> 0, 1 -> 1, 2 -> 0, 3 -> 1.
  EXPECT_EQ(state_.FindTask(old[0])->consumer(), 0);
  EXPECT_EQ(state_.FindTask(old[1])->consumer(), 1);
  EXPECT_EQ(state_.FindTask(old[2])->consumer(), 0);
  EXPECT_EQ(state_.FindTask(old[3])->consumer(), 1);
  EXPECT_EQ(state_.FindTask(old[0])->start_index(), 3);
  EXPECT_EQ(state_.FindTask(old[2])->start_index(), 5);
  EXPECT_EQ(state_.FindTask(old[1])->start_index(), 0);
  EXPECT_EQ(state_.FindTask(old[2])->generation(), generation + 1);
  // The 5 unleased splits (1, 3, 4, 5, 7) are dealt to the 2 consumers; leases go on from them.
  const EpochState& epoch = *state_.FindEpoch(1, 0);
  ASSERT_EQ(epoch.shares_size(), 2);
  std::set<uint64_t> leased_after;
  for (int64_t id : {old[0], old[1], old[2], old[3]}) {
    const int64_t from = state_.FindTask(id)->leased_size();
    ASSERT_TRUE(Lease(id, from, 10).ok());
  }
  for (int64_t id : {old[0], old[1], old[2], old[3]}) {
    for (uint64_t split : Held(id)) EXPECT_TRUE(leased_after.insert(split).second) << split;
  }
  EXPECT_EQ(leased_after.size(), 8u);  // every split exactly once
  EXPECT_EQ(state_.FindEpoch(1, 0)->next_split(), 8);
}

TEST_F(DispatcherStateSharesTest, ResumingAtMoreConsumersGivesTheNewOnesTasks) {
  Register("w1");
  CreateJob(Options(2, 1));
  ASSERT_TRUE(StartEpoch(0, 6).ok());
  Update u = Resume(2, 3);
  ResumeAtConsumersUpdate& r = *u.mutable_resume_at_consumers();
  ASSERT_TRUE(Apply(u).ok());
  ASSERT_EQ(TasksOf(0, 2).size(), 1u);
  const int64_t fresh = TasksOf(0, 2).at(0);
  // Unleased splits are left for it: no task is shared.
  for (const auto& [id, task] : state_.tasks()) EXPECT_EQ(task.copy_of(), 0) << id;
  ASSERT_TRUE(Lease(fresh, 0, 10).ok());
  EXPECT_EQ(Held(fresh).size(), 2u);
  // A second resume from the old count is refused as done already; from another count too.
  EXPECT_TRUE(absl::IsAlreadyExists(state_.Validate(u)));
  r.set_from_consumers(5);
  r.set_num_consumers(4);
  EXPECT_THAT(state_.Validate(u).message(), HasSubstr("has 3 consumers, not 5"));
}

TEST_F(DispatcherStateSharesTest, AnEpochWhoseTasksAllFinishedIsDealtToo) {
  // The workers produced the whole epoch, but the consumers had read only part of it when they
  // saved their positions: the resumed consumers must read the rest, from the positions.
  Register("w1");
  CreateJob(Options(2, 1));
  ASSERT_TRUE(StartEpoch(0, 4).ok());
  const int64_t c0 = TasksOf(0, 0).at(0), c1 = TasksOf(0, 1).at(0);
  for (int64_t id : {c0, c1}) {
    ASSERT_TRUE(Lease(id, 0, 10).ok());
    ASSERT_TRUE(FinishTask(id, 20).ok());
  }
  ASSERT_TRUE(state_.FindEpoch(1, 0)->finished());
  Update u = Resume(2, 1);
  (*u.mutable_resume_at_consumers()->mutable_next_index())[c0] = 7;
  (*u.mutable_resume_at_consumers()->mutable_next_index())[c1] = 3;
  ASSERT_TRUE(Apply(u).ok());
  EXPECT_THAT(TasksOf(0, 0), ::testing::UnorderedElementsAre(c0, c1));
  EXPECT_EQ(state_.FindTask(c0)->start_index(), 7);
  EXPECT_EQ(state_.FindTask(c1)->start_index(), 3);
}

TEST_F(DispatcherStateSharesTest, ResumingWhereTheWorkersHadLeasedEverythingSharesTheOldTasks) {
  // Two consumers' workers leased the whole plan ahead and produced it; the consumers had read
  // part of it. Resumed at three, the third would have nothing to read (and nothing to pad
  // with): every consumer reads a part of each old task instead, through the task or a copy.
  Register("w1");
  CreateJob(Options(2, 1));
  ASSERT_TRUE(StartEpoch(0, 4).ok());
  const int64_t a = TasksOf(0, 0).at(0), b = TasksOf(0, 1).at(0);
  const std::map<int64_t, int64_t> produced = {{a, 20}, {b, 16}};
  const std::map<int64_t, int64_t> read = {{a, 7}, {b, 3}};
  for (int64_t id : {a, b}) {
    ASSERT_TRUE(Lease(id, 0, 10).ok());
    ASSERT_TRUE(FinishTask(id, produced.at(id)).ok());
  }
  Update u = Resume(2, 3);
  for (int64_t id : {a, b}) (*u.mutable_resume_at_consumers()->mutable_next_index())[id] = read.at(id);
  ASSERT_TRUE(Apply(u).ok());  // the fixture checks the state's invariants too
  EXPECT_FALSE(state_.FindEpoch(1, 0)->finished()) << "the copies have their elements to compute";
  // Each unread (task, index) is read by exactly one consumer, and each consumer reads some.
  std::map<std::pair<int64_t, int64_t>, int> readers;
  for (int32_t c = 0; c < 3; ++c) {
    int64_t count = 0;
    for (int64_t id : TasksOf(0, c)) {
      const TaskState& task = *state_.FindTask(id);
      const int64_t original = task.copy_of() != 0 ? task.copy_of() : id;
      ASSERT_TRUE(original == a || original == b) << id;
      EXPECT_EQ(task.start_index(), read.at(original)) << id;
      EXPECT_TRUE(task.draining()) << "task " << id << " must lease nothing more";
      EXPECT_EQ(Held(id), Held(original)) << id;
      const ReadStride stride(task.read_stride(), task.read_offset());
      for (int64_t i = task.start_index(); i < produced.at(original); ++i) {
        if (stride.Reads(i)) {
          ++readers[{original, i}];
          ++count;
        }
      }
    }
    EXPECT_GE(count, 5) << "consumer " << c << " reads " << count << " of the 26 unread";
  }
  for (int64_t id : {a, b}) {
    for (int64_t i = read.at(id); i < produced.at(id); ++i) {
      EXPECT_EQ((readers[{id, i}]), 1) << "task " << id << " index " << i;
    }
  }
  EXPECT_EQ(readers.size(), 13u + 13u);
  // A copy leases nothing of its own: it ends with its original's splits.
  for (int64_t id : TasksOf(0, 2)) {
    const int64_t held = state_.FindTask(id)->leased_size();
    ASSERT_TRUE(Lease(id, held, 10).ok());
    EXPECT_EQ(state_.FindTask(id)->leased_size(), held);
  }
}

TEST_F(DispatcherStateSharesTest, ResumingAtMoreConsumersSharesWhatTheOldTasksLeased) {
  // The old tasks hold splits (still producing) and other splits are unleased: the new
  // consumers share the old tasks' elements (whole tasks would give them unequal shares) and
  // lease the rest from their shares through new tasks.
  Register("w1");
  CreateJob(Options(2, 1));
  ASSERT_TRUE(StartEpoch(0, 12).ok());
  const int64_t a = TasksOf(0, 0).at(0), b = TasksOf(0, 1).at(0);
  ASSERT_TRUE(Lease(a, 0, 2).ok());
  ASSERT_TRUE(Lease(b, 0, 2).ok());
  ASSERT_TRUE(Apply(Resume(2, 3)).ok());
  for (int32_t c = 0; c < 3; ++c) {
    std::set<int64_t> originals;
    bool leases = false;
    for (int64_t id : TasksOf(0, c)) {
      const TaskState& task = *state_.FindTask(id);
      if (task.copy_of() != 0 || task.read_stride() > 1) {
        EXPECT_EQ(task.read_stride(), 3) << id;
        EXPECT_TRUE(task.draining()) << id;
        originals.insert(task.copy_of() != 0 ? task.copy_of() : id);
      } else {
        leases = leases || !task.draining();
      }
    }
    EXPECT_EQ(originals, (std::set<int64_t>{a, b})) << "consumer " << c << " reads a part of each";
    EXPECT_TRUE(leases) << "consumer " << c << " has a task to lease its share with";
  }
}

TEST_F(DispatcherStateSharesTest, ResumePositionsOutsideATasksRangeAreRefused) {
  Register("w1");
  CreateJob(Options(2, 1));
  ASSERT_TRUE(StartEpoch(0, 4).ok());
  Update u = Resume(2, 1);
  ResumeAtConsumersUpdate& r = *u.mutable_resume_at_consumers();
  (*r.mutable_next_index())[999] = 1;
  EXPECT_THAT(state_.Validate(u).message(), HasSubstr("task 999, not one of epoch 0's"));
  r.clear_next_index();
  (*r.mutable_next_index())[TasksOf(0, 0).at(0)] = -2;
  EXPECT_TRUE(absl::IsInvalidArgument(state_.Validate(u)));
  r.set_epoch(3);
  r.clear_next_index();
  EXPECT_TRUE(state_.Validate(u).ok());  // an epoch not started: only the count changes
}

}  // namespace
}  // namespace granary
