// Caching jobs through DispatcherImpl and its cache coordinator (cache/cache_coordinator.h):
// the mode each epoch gets, the manifest, jobs sharing a cache, waiting for a job's own put,
// and the cache root, also across restarts. (cache_policy auto: cache_coordinator_auto_test.cc.)
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "cache/cache_coordinator_test_fixture.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

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
  auto pipeline = PipelineSpec::Create(def, registries_);
  ASSERT_TRUE(pipeline.ok());
  auto splits = pipeline->EnumerateSplits(&clock_);
  ASSERT_TRUE(splits.ok());
  const std::vector<Split> plan = pipeline->PlanEpoch(*splits, 3, 0);
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

TEST_F(DispatcherCacheTest, JobsSharingACacheStartingEpochsAtOnceAllStartOneOfThemPuts) {
  OpenCaching();
  RegisterWorker("a");
  const PipelineDef def = CachedDef();
  const std::string dataset = RegisterCachedDataset();
  constexpr int kJobs = 6;
  std::vector<int64_t> jobs;
  for (int i = 0; i < kJobs; ++i) {
    auto job = CreateCachingJob(dataset, absl::StrCat("job", i), CACHE_FULL);
    ASSERT_TRUE(job.ok()) << job.status();
    jobs.push_back(*job);
  }
  // Each foresees a PUT, lists its splits, then proposes: all but the first decide again under
  // the core's lock, and compute.
  std::vector<std::thread> starters;
  for (int64_t job : jobs) {
    starters.emplace_back([this, job] {
      for (int64_t epoch : {0, 1}) {
        const absl::Status status = StartEpoch(job, epoch);
        EXPECT_TRUE(status.ok()) << "job " << job << " epoch " << epoch << ": " << status;
      }
    });
  }
  for (std::thread& t : starters) t.join();
  const std::string key = CacheKey(def, 3, 3);
  ASSERT_TRUE(CacheOf(key).has_value());
  const int64_t writer = CacheOf(key)->put_job_id();
  const EpochState put = EpochOf(writer, 0);
  EXPECT_EQ(put.cache().mode(), EpochCache::PUT);
  for (int64_t job : jobs) {
    for (int64_t epoch : {0, 1}) {
      if (job == writer && epoch == 0) continue;
      SCOPED_TRACE(absl::StrCat("job ", job, " epoch ", epoch));
      const EpochState computing = EpochOf(job, epoch);
      EXPECT_EQ(computing.cache().mode(), EpochCache::COMPUTE);
      EXPECT_EQ(computing.cache().cache_key(), key);
      ASSERT_EQ(computing.plan_size(), put.plan_size());
      for (int i = 0; i < put.plan_size(); ++i) {
        EXPECT_EQ(computing.plan(i).id(), put.plan(i).id()) << "plan " << i;
      }
    }
  }
  EXPECT_EQ(Status().state().caches_size(), 1);
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
  auto pipeline = PipelineSpec::Create(def, registries_);
  ASSERT_TRUE(pipeline.ok());
  auto splits = pipeline->EnumerateSplits(&clock_);
  ASSERT_TRUE(splits.ok());
  std::vector<uint64_t> e0, e1;
  for (const Split& s : pipeline->PlanEpoch(*splits, 3, 0)) e0.push_back(s.id());
  for (const Split& s : pipeline->PlanEpoch(*splits, 3, 1)) e1.push_back(s.id());
  EXPECT_NE(e0, e1);
  // The writer's cache is untouched.
  ASSERT_TRUE(CacheOf(key).has_value());
  EXPECT_FALSE(CacheOf(key)->complete());
  EXPECT_EQ(CacheOf(key)->put_job_id(), *writer);
  EXPECT_EQ(Status().state().caches_size(), 1);
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

}  // namespace
}  // namespace granary
