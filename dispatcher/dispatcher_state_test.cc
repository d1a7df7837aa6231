// DispatcherState::Apply, update by update: what each command does to the state, and that a
// command which no longer applies changes nothing.
#include "dispatcher/dispatcher_state.h"

#include "absl/strings/str_cat.h"
#include "common/deterministic_serialization.h"
#include "dispatcher/request_limits.h"
#include "dispatcher/state_invariants.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Applies `u` as the next record; the state must stay consistent whatever `u` was.
absl::Status ApplyNext(DispatcherState& state, const Update& u) {
  const absl::Status status = state.Apply(state.applied_seq() + 1, u);
  const absl::Status consistent = CheckStateInvariants(state);
  EXPECT_TRUE(consistent.ok()) << consistent << " after " << u.ShortDebugString();
  return status;
}

class DispatcherStateTest : public ::testing::Test {
 protected:
  absl::Status Apply(const Update& u) { return ApplyNext(state_, u); }

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

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// The cache records (DESIGN.md §5): how StartEpoch with a cache mode and TaskFinished of a PUT
// epoch's tasks change them. Every update goes through Log, which keeps it for replay.
class DispatcherStateCacheTest : public ::testing::Test {
 protected:
  absl::Status Log(const Update& u) {
    log_.push_back(u);
    return ApplyNext(state_, u);
  }

  void Register(const std::string& id) {
    Update u;
    u.mutable_register_worker()->set_worker_id(id);
    u.mutable_register_worker()->set_address(id + ":1");
    ASSERT_TRUE(Log(u).ok());
  }

  // Registers dataset "d" (once) and creates a job over it; job ids count from 1.
  void CreateJob(int slots) {
    if (state_.FindDataset("d") == nullptr) {
      Update d;
      d.mutable_register_dataset()->set_dataset_id("d");
      ASSERT_TRUE(Log(d).ok());
    }
    Update j;
    j.mutable_create_job()->set_dataset_id("d");
    j.mutable_create_job()->mutable_options()->set_num_worker_slots(slots);
    ASSERT_TRUE(Log(j).ok());
  }

  absl::Status StartEpoch(int64_t job, int64_t epoch, EpochCache::Mode mode, const std::string& key,
                          int splits = 4) {
    Update e;
    e.mutable_start_epoch()->set_job_id(job);
    e.mutable_start_epoch()->set_epoch(epoch);
    for (int i = 0; i < splits; ++i) e.mutable_start_epoch()->add_plan()->set_id(i);
    e.mutable_start_epoch()->mutable_cache()->set_mode(mode);
    e.mutable_start_epoch()->mutable_cache()->set_cache_key(key);
    e.mutable_start_epoch()->mutable_cache()->set_cached_prefix_ops(2);
    return Log(e);
  }

  static CacheChunk Chunk(int64_t task, int64_t generation, int64_t first, int64_t n) {
    CacheChunk c;
    c.set_path(absl::StrCat("/cache/k/t", task, "-g", generation, "-i", first, "-n", n, ".chunk"));
    c.set_task_id(task);
    c.set_generation(generation);
    c.set_first_index(first);
    c.set_num_elements(n);
    c.set_mac(absl::StrCat("mac ", task, " ", generation, " ", first));
    return c;
  }

  absl::Status Finish(int64_t task, int64_t generation, const std::vector<CacheChunk>& chunks) {
    Update f;
    f.mutable_task_finished()->set_task_id(task);
    f.mutable_task_finished()->set_generation(generation);
    int64_t n = 0;
    for (const CacheChunk& c : chunks) {
      *f.mutable_task_finished()->add_cache_chunks() = c;
      n += c.num_elements();
    }
    f.mutable_task_finished()->set_num_elements(n);
    return Log(f);
  }

  static std::vector<std::string> Paths(const CacheState& cache) {
    std::vector<std::string> paths;
    for (const CacheChunk& c : cache.chunks()) paths.push_back(c.path());
    return paths;
  }

  DispatcherState state_;
  std::vector<Update> log_;
};

TEST_F(DispatcherStateCacheTest, PutOpensAnIncompleteCacheSecondPutAndEarlyGetAreAbortedNoOps) {
  Register("w");
  CreateJob(2);  // job 1
  CreateJob(2);  // job 2
  ASSERT_TRUE(StartEpoch(1, 0, EpochCache::PUT, "k").ok());
  const CacheState* cache = state_.FindCache("k");
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->cache_key(), "k");
  EXPECT_FALSE(cache->complete());
  EXPECT_EQ(cache->put_job_id(), 1);
  EXPECT_EQ(cache->put_epoch(), 0);
  EXPECT_EQ(cache->chunks_size(), 0);
  EXPECT_EQ(state_.FindEpoch(1, 0)->cache().mode(), EpochCache::PUT);
  ASSERT_EQ(state_.tasks().size(), 2u);

  const std::string before_second_put = SerializeDeterministically(state_.ToProto());
  // Another job's PUT for the same key: Aborted, and nothing changes (no epoch, no tasks).
  const absl::Status second = StartEpoch(2, 0, EpochCache::PUT, "k");
  EXPECT_TRUE(absl::IsAborted(second)) << second;
  EXPECT_EQ(state_.FindEpoch(2, 0), nullptr);
  EXPECT_EQ(state_.FindJob(2)->epochs_started(), 0);
  EXPECT_EQ(state_.tasks().size(), 2u);
  EXPECT_EQ(state_.FindCache("k")->put_job_id(), 1);
  // The same job's next epoch can't PUT it again either.
  EXPECT_TRUE(absl::IsAborted(StartEpoch(1, 1, EpochCache::PUT, "k")));
  EXPECT_EQ(state_.FindEpoch(1, 1), nullptr);

  // GET of the incomplete cache (and of an unknown one): Aborted, no epoch.
  const absl::Status get = StartEpoch(2, 0, EpochCache::GET, "k");
  EXPECT_TRUE(absl::IsAborted(get)) << get;
  EXPECT_TRUE(absl::IsAborted(StartEpoch(2, 0, EpochCache::GET, "unknown")));
  EXPECT_EQ(state_.FindEpoch(2, 0), nullptr);
  EXPECT_EQ(state_.FindCache("unknown"), nullptr);

  // Apart from applied_seq, the refused updates changed nothing.
  DispatcherStateProto after = state_.ToProto();
  after.set_applied_seq(DispatcherStateProto().applied_seq());
  DispatcherStateProto before;
  ASSERT_TRUE(before.ParseFromString(before_second_put));
  before.set_applied_seq(DispatcherStateProto().applied_seq());
  EXPECT_EQ(SerializeDeterministically(after), SerializeDeterministically(before));

  // COMPUTE for the same key (another epoch is writing it) starts normally.
  EXPECT_TRUE(StartEpoch(2, 0, EpochCache::COMPUTE, "k").ok());
  EXPECT_NE(state_.FindEpoch(2, 0), nullptr);
}

TEST_F(DispatcherStateCacheTest, CacheCompletesWhenTheLastPutTaskFinishesWithChunksInTaskOrder) {
  Register("w");
  CreateJob(3);
  ASSERT_TRUE(StartEpoch(1, 0, EpochCache::PUT, "k").ok());
  ASSERT_EQ(state_.tasks().size(), 3u);  // Tasks 1, 2, 3.
  // Finished out of task order: 3, 1, then 2.
  ASSERT_TRUE(Finish(3, 1, {Chunk(3, 1, 0, 4)}).ok());
  EXPECT_FALSE(state_.FindCache("k")->complete());
  EXPECT_EQ(state_.FindCache("k")->chunks_size(), 0);
  ASSERT_TRUE(Finish(1, 1, {Chunk(1, 1, 0, 5), Chunk(1, 1, 5, 2)}).ok());
  EXPECT_FALSE(state_.FindCache("k")->complete());
  EXPECT_EQ(state_.FindCache("k")->chunks_size(), 0);
  EXPECT_EQ(state_.FindCache("k")->num_elements(), 0);
  EXPECT_FALSE(state_.FindEpoch(1, 0)->finished());
  ASSERT_TRUE(Finish(2, 1, {Chunk(2, 1, 0, 3)}).ok());

  const CacheState* cache = state_.FindCache("k");
  EXPECT_TRUE(state_.FindEpoch(1, 0)->finished());
  EXPECT_TRUE(cache->complete());
  const std::vector<CacheChunk> expected = {Chunk(1, 1, 0, 5), Chunk(1, 1, 5, 2), Chunk(2, 1, 0, 3),
                                            Chunk(3, 1, 0, 4)};
  ASSERT_EQ(cache->chunks_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(SerializeDeterministically(cache->chunks(i)), SerializeDeterministically(expected[i]))
        << "manifest chunk " << i;
  }
  EXPECT_EQ(cache->num_elements(), 5 + 2 + 3 + 4);
  // Now a GET of it starts.
  CreateJob(1);
  EXPECT_TRUE(StartEpoch(2, 0, EpochCache::GET, "k").ok());
}

TEST_F(DispatcherStateCacheTest, StaleGenerationsChunksNeverEnterTheManifest) {
  Register("a");
  Register("b");
  CreateJob(2);
  ASSERT_TRUE(StartEpoch(1, 0, EpochCache::PUT, "k").ok());
  ASSERT_EQ(state_.FindTask(1)->worker_id(), "a");
  ASSERT_EQ(state_.FindTask(2)->worker_id(), "b");
  Update lost;
  lost.mutable_worker_lost()->set_worker_id("a");
  lost.mutable_worker_lost()->set_incarnation(1);
  ASSERT_TRUE(Log(lost).ok());
  ASSERT_EQ(state_.FindTask(1)->generation(), 2);

  // Generation 1 of task 1 (on the lost worker) reports its chunks: refused.
  EXPECT_TRUE(absl::IsFailedPrecondition(Finish(1, 1, {Chunk(1, 1, 0, 6)})));
  EXPECT_FALSE(state_.FindTask(1)->finished());
  EXPECT_EQ(state_.FindTask(1)->cache_chunks_size(), 0);
  ASSERT_TRUE(Finish(2, 1, {Chunk(2, 1, 0, 3)}).ok());
  EXPECT_FALSE(state_.FindCache("k")->complete());
  ASSERT_TRUE(Finish(1, 2, {Chunk(1, 2, 0, 2), Chunk(1, 2, 2, 4)}).ok());
  // And once more after the task finished: still refused, nothing added.
  EXPECT_FALSE(Finish(1, 1, {Chunk(1, 1, 0, 6)}).ok());

  const CacheState* cache = state_.FindCache("k");
  ASSERT_TRUE(cache->complete());
  EXPECT_THAT(Paths(*cache), ElementsAre(Chunk(1, 2, 0, 2).path(), Chunk(1, 2, 2, 4).path(),
                                         Chunk(2, 1, 0, 3).path()));
  for (const CacheChunk& c : cache->chunks()) {
    EXPECT_FALSE(c.task_id() == 1 && c.generation() == 1) << c.path();
  }
  EXPECT_EQ(cache->num_elements(), 9);
}

TEST_F(DispatcherStateCacheTest, CachesRoundTripThroughProtoAndReplayIsExact) {
  Register("a");
  Register("b");
  CreateJob(2);  // job 1: PUTs "k1", completed.
  CreateJob(2);  // job 2: PUTs "k2", left incomplete.
  CreateJob(1);  // job 3: GETs "k1".
  ASSERT_TRUE(StartEpoch(1, 0, EpochCache::PUT, "k1").ok());
  ASSERT_TRUE(StartEpoch(2, 0, EpochCache::PUT, "k2").ok());
  ASSERT_TRUE(Finish(1, 1, {Chunk(1, 1, 0, 5)}).ok());
  Update lost;
  lost.mutable_worker_lost()->set_worker_id("b");
  lost.mutable_worker_lost()->set_incarnation(1);
  ASSERT_TRUE(Log(lost).ok());
  const auto generation = [this](int64_t task) { return state_.FindTask(task)->generation(); };
  ASSERT_TRUE(
      Finish(2, generation(2), {Chunk(2, generation(2), 0, 7), Chunk(2, generation(2), 7, 1)})
          .ok());
  ASSERT_TRUE(Finish(3, generation(3), {Chunk(3, generation(3), 0, 2)}).ok());
  ASSERT_TRUE(StartEpoch(3, 0, EpochCache::GET, "k1").ok());
  EXPECT_FALSE(StartEpoch(1, 1, EpochCache::PUT, "k2").ok());  // A no-op, replayed too.
  ASSERT_NE(state_.FindCache("k1"), nullptr);
  ASSERT_TRUE(state_.FindCache("k1")->complete());
  ASSERT_NE(state_.FindCache("k2"), nullptr);
  ASSERT_FALSE(state_.FindCache("k2")->complete());

  const DispatcherStateProto proto = state_.ToProto();
  ASSERT_EQ(proto.caches_size(), 2);
  auto copy = DispatcherState::FromProto(proto);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(SerializeDeterministically(copy->ToProto()), SerializeDeterministically(proto));
  ASSERT_NE(copy->FindCache("k1"), nullptr);
  EXPECT_EQ(SerializeDeterministically(*copy->FindCache("k1")),
            SerializeDeterministically(*state_.FindCache("k1")));

  DispatcherState replayed;
  for (size_t i = 0; i < log_.size(); ++i) {
    // Refused updates are refused again on replay; only the order matters.
    replayed.Apply(i + 1, log_[i]).IgnoreError();
  }
  EXPECT_EQ(SerializeDeterministically(replayed.ToProto()), SerializeDeterministically(proto));

  // A snapshot listing a cache twice is refused.
  DispatcherStateProto twice = proto;
  *twice.add_caches() = proto.caches(0);
  EXPECT_TRUE(absl::IsInvalidArgument(DispatcherState::FromProto(twice).status()));
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
