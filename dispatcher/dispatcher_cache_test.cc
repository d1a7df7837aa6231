// Caching jobs through DispatcherImpl and its cache coordinator (cache/cache_coordinator.h):
// the mode each epoch gets, the manifest, cache_policy auto's profiles and decisions, eviction
// and the cache root, also across restarts.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "dispatcher/dispatcher_impl_test_fixture.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// Caching jobs (DESIGN.md §5) through DispatcherImpl: validation at job creation, the mode each
// epoch gets (PUT, GET or COMPUTE), what its tasks are told to run, the manifest, and all of it
// across restarts.
class DispatcherCacheTest : public DispatcherImplTest {
 protected:
  std::string CacheRoot() const { return dir_.path() + "/cache"; }

  void OpenCaching(int64_t snapshot_every = 10000) { Open(snapshot_every, CacheRoot()); }

  // range (10 splits of 10) -> shuffle (op 0) -> mark (op 1) -> map add (op 2).
  static PipelineDef CachedDef() {
    auto def = ParsePipelineJson(R"({"source": {"type": "range", "params":
        {"stop": 100, "elements_per_split": 10, "shuffle_splits": true}}, "ops": [
        {"op": "shuffle", "params": {"buffer_size": 16}},
        {"op": "mark"},
        {"op": "map", "udf": "add", "udfParams": {"value": 1}}]})",
                                 "cached.json");
    EXPECT_TRUE(def.ok()) << def.status();
    return def.ok() ? *def : PipelineDef();
  }

  std::string RegisterCachedDataset() {
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = CachedDef();
    RegisterDatasetResponse response;
    const absl::Status status = impl_->RegisterDataset(request, &response);
    EXPECT_TRUE(status.ok()) << status;
    return response.dataset_id();
  }

  absl::StatusOr<int64_t> CreateCachingJob(const std::string& dataset, const std::string& name,
                                           CachePolicy policy, uint64_t seed = 3) {
    GetOrCreateJobRequest request;
    request.set_dataset_id(dataset);
    request.set_name(name);
    request.mutable_options()->set_seed(seed);
    request.mutable_options()->set_num_worker_slots(2);
    request.mutable_options()->set_cache_policy(policy);
    GetOrCreateJobResponse response;
    const absl::Status status = impl_->GetOrCreateJob(request, &response);
    if (!status.ok()) return status;
    return response.job_id();
  }

  GetStatusResponse Status() {
    GetStatusResponse status;
    EXPECT_TRUE(impl_->GetStatus({}, &status).ok());
    return status;
  }

  EpochState EpochOf(int64_t job, int64_t epoch) {
    const GetStatusResponse status = Status();
    for (const EpochState& e : status.state().epochs()) {
      if (e.job_id() == job && e.epoch() == epoch) return e;
    }
    ADD_FAILURE() << "no epoch " << job << "/" << epoch;
    return EpochState();
  }

  std::optional<CacheState> CacheOf(const std::string& key) {
    const GetStatusResponse status = Status();
    for (const CacheState& c : status.state().caches()) {
      if (c.cache_key() == key) return c;
    }
    return std::nullopt;
  }

  // What worker "a" (incarnation `incarnation`, holding no pipeline) is told to run for the
  // epoch, by task id, each with its pipeline (sent once per answer, with the first task
  // naming it).
  std::vector<TaskDef> TaskDefs(int64_t job, int64_t epoch, int64_t incarnation = 1) {
    WorkerHeartbeatRequest request;
    request.set_worker_id("a");
    request.set_incarnation(incarnation);
    WorkerHeartbeatResponse response;
    const absl::Status status = impl_->WorkerHeartbeat(request, &response);
    EXPECT_TRUE(status.ok()) << status;
    std::map<std::string, PipelineDef> pipelines;
    for (const TaskDef& def : response.tasks()) {
      if (def.has_pipeline()) pipelines.emplace(def.pipeline_key(), def.pipeline());
    }
    std::vector<TaskDef> defs;
    for (const TaskDef& def : response.tasks()) {
      if (def.job_id() != job || def.epoch() != epoch) continue;
      defs.push_back(def);
      EXPECT_TRUE(pipelines.count(def.pipeline_key())) << "task " << def.task_id();
      *defs.back().mutable_pipeline() = pipelines[def.pipeline_key()];
    }
    std::sort(defs.begin(), defs.end(),
              [](const TaskDef& x, const TaskDef& y) { return x.task_id() < y.task_id(); });
    return defs;
  }

  static CacheChunk Chunk(const std::string& dir, int64_t task, int64_t first, int64_t n) {
    CacheChunk c;
    c.set_path(absl::StrCat(dir, "/t", task, "-g1-i", first, "-n", n, ".chunk"));
    c.set_task_id(task);
    c.set_generation(1);
    c.set_first_index(first);
    c.set_num_elements(n);
    c.set_mac(absl::StrCat("mac ", task, " ", first));
    return c;
  }

  absl::Status Finish(int64_t task, int64_t generation, int64_t num_elements,
                      const std::vector<CacheChunk>& chunks) {
    TaskFinishedRequest request;
    request.set_task_id(task);
    request.set_generation(generation);
    request.set_num_elements(num_elements);
    for (const CacheChunk& c : chunks) *request.add_cache_chunks() = c;
    TaskFinishedResponse response;
    return impl_->TaskFinished(request, &response);
  }

  // The chunks the tasks of a PUT epoch (two tasks, 100 elements) report, in task order.
  static std::vector<std::vector<CacheChunk>> PutChunks(const std::vector<TaskDef>& tasks) {
    const std::string& dir = tasks[0].cache_dir();
    return {{Chunk(dir, tasks[0].task_id(), 0, 30), Chunk(dir, tasks[0].task_id(), 30, 25)},
            {Chunk(dir, tasks[1].task_id(), 0, 45)}};
  }

  // Finishes every task of a PUT epoch with PutChunks; returns the expected manifest.
  std::vector<CacheChunk> CompletePut(int64_t job, int64_t epoch) {
    const std::vector<TaskDef> tasks = TaskDefs(job, epoch);
    EXPECT_EQ(tasks.size(), 2u);
    if (tasks.size() != 2) return {};
    std::vector<CacheChunk> manifest;
    const std::vector<std::vector<CacheChunk>> chunks = PutChunks(tasks);
    for (size_t i = 0; i < tasks.size(); ++i) {
      int64_t n = 0;
      for (const CacheChunk& c : chunks[i]) {
        n += c.num_elements();
        manifest.push_back(c);
      }
      const absl::Status status = Finish(tasks[i].task_id(), tasks[i].generation(), n, chunks[i]);
      EXPECT_TRUE(status.ok()) << status;
    }
    return manifest;
  }

  static std::vector<std::string> Serialized(
      const google::protobuf::RepeatedPtrField<CacheChunk>& chunks) {
    std::vector<std::string> out;
    for (const CacheChunk& c : chunks) out.push_back(SerializeDeterministically(c));
    return out;
  }
  static std::vector<std::string> Serialized(const std::vector<CacheChunk>& chunks) {
    std::vector<std::string> out;
    for (const CacheChunk& c : chunks) out.push_back(SerializeDeterministically(c));
    return out;
  }

  static int CountOps(const PipelineDef& def, const std::string& op) {
    int n = 0;
    for (const OpDef& o : def.ops()) n += o.op() == op;
    return n;
  }
};

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
  auto pipeline = Pipeline::Create(def, udfs_);
  ASSERT_TRUE(pipeline.ok());
  auto splits = (*pipeline)->EnumerateSplits(&clock_);
  ASSERT_TRUE(splits.ok());
  const std::vector<Split> plan = (*pipeline)->PlanEpoch(*splits, 3, 0);
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
  auto pipeline = Pipeline::Create(def, udfs_);
  ASSERT_TRUE(pipeline.ok());
  auto splits = (*pipeline)->EnumerateSplits(&clock_);
  ASSERT_TRUE(splits.ok());
  std::vector<uint64_t> e0, e1;
  for (const Split& s : (*pipeline)->PlanEpoch(*splits, 3, 0)) e0.push_back(s.id());
  for (const Split& s : (*pipeline)->PlanEpoch(*splits, 3, 1)) e1.push_back(s.id());
  EXPECT_NE(e0, e1);
  // The writer's cache is untouched.
  ASSERT_TRUE(CacheOf(key).has_value());
  EXPECT_FALSE(CacheOf(key)->complete());
  EXPECT_EQ(CacheOf(key)->put_job_id(), *writer);
  EXPECT_EQ(Status().state().caches_size(), 1);
}

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
