// cache_policy auto through DispatcherImpl and its cache coordinator
// (cache/cache_coordinator.h): the profile round trip, the journaled decision, eviction, also
// across restarts.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "cache/cache_coordinator_test_fixture.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

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

// Issue 31: an epoch past the job's num_epochs is refused (DispatcherState::Validate) before
// its files are listed, a cache directory is made or anything is journaled.
TEST_F(DispatcherAutoCacheTest, AnEpochPastNumEpochsIsRefusedBeforeAnythingIsJournaled) {
  cache_capacity_bytes_ = 5000;
  OpenCaching();
  RegisterWorker("a");
  const std::string dataset = RegisterCachedDataset();
  GetOrCreateJobRequest request;
  request.set_dataset_id(dataset);
  request.set_name("once");
  request.mutable_options()->set_seed(2);
  request.mutable_options()->set_num_worker_slots(2);
  request.mutable_options()->set_cache_policy(CACHE_FULL);
  request.mutable_options()->set_num_epochs(1);
  GetOrCreateJobResponse created;
  ASSERT_TRUE(impl_->GetOrCreateJob(request, &created).ok());
  const int64_t once = created.job_id();
  ASSERT_TRUE(StartEpoch(once, 0).ok());
  const std::string once_dir = EpochOf(once, 0).cache().cache_dir();
  FinishEpoch(once, 0, /*bytes=*/6000);
  // Another job's cache completing over capacity evicts the idle one: the next epoch of the
  // job would Put its cache again, into a new directory.
  auto other = CreateCachingJob(dataset, "other", CACHE_FULL, /*seed=*/1);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(StartEpoch(*other, 0).ok());
  FinishEpoch(*other, 0, /*bytes=*/100);
  ASSERT_FALSE(CacheOf(CacheKey(CachedDef(), 3, 2)).has_value());
  ASSERT_FALSE(clock_.FileExists(once_dir));

  const uint64_t seq = Status().state().applied_seq();
  const absl::Status past = StartEpoch(once, 1);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_EQ(Status().state().applied_seq(), seq) << "nothing journaled";
  EXPECT_FALSE(clock_.FileExists(once_dir)) << "no cache directory made";
}

}  // namespace
}  // namespace granary
