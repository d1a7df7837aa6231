// DispatcherState::Apply for the cache records: how StartEpoch with a cache mode and
// TaskFinished of a PUT epoch's tasks change them, and their round trip and replay.
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

}  // namespace
}  // namespace granary
