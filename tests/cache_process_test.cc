// The Put/Get cache end to end (DESIGN.md §5) over a LocalCluster of real processes and real
// TFRecord files of JPEGs: a `full` and an `at_mark` job over three epochs read epochs 1–2 from
// the cache (the source files are moved away after epoch 0, so opening them would fail), all
// workers SIGKILLed mid-Put and mid-Get and restarted; every epoch's digest equals
// `granary local --cache_policy` and the cache's manifest holds every element exactly once. The
// same through the in-memory Redis tier (one server, and a three-master Redis Cluster), and with
// Redis restarted (losing the cache) between the Put and the Get.
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache/cache_gc.h"
#include "cache/cache_tier_env.h"
#include "cache/local_redis_server.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/core/element.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/sources/tfrecord_reader.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "proto/cache.pb.h"
#include "testing/redis_test_cluster.h"
#include "testing/scoped_temp_dir.h"
#include "tests/local_cluster.h"
#include "tests/run_outputs.h"

namespace granary {
namespace {

using testing::DigestLine;
using testing::ReadDigests;
using testing::ReadRunPosition;

constexpr int64_t kImages = 1600;
// cache_policy auto's pipeline: 1 ms a record before the mark, so that reading the cache wins.
constexpr int kAutoPrefixCostUs = 1000;
// The mark is op 4 of that pipeline: the cache point 5.
constexpr int kAutoMarkPoint = 5;

// Decode up to the mark; random augmentations after it (redrawn every epoch under at_mark).
// `prefix_cost_us`: a simulated cost per element before the mark (simulate_cost, op 3), which
// makes caching at the mark worth it for cache_policy auto's planner.
std::string PipelineJson(const std::string& data_dir, int prefix_cost_us) {
  return absl::StrCat(R"({
    "source": {"type": "tfrecord",
               "params": {"files": [")",
                      data_dir, R"(/*.tfrecord"], "records_per_split": 50,
                          "shuffle_splits": true}},
    "ops": [
      {"op": "shuffle", "params": {"buffer_size": 16}},
      {"op": "map", "udf": "parse_example",
       "udfParams": {"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]}},
      {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_jpeg"},)",
                      prefix_cost_us == 0 ? ""
                                          : absl::StrCat(R"(
      {"op": "map", "udf": "simulate_cost", "udfParams": {"us_per_element": )",
                                                         prefix_cost_us, "}},"),
                      R"(
      {"op": "mark", "params": {"name": "decoded"}},
      {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.75}},
      {"op": "map", "udf": "random_flip"}
    ]})");
}

// A simulated training step per element and small worker windows keep epochs slow enough to
// act in (about 1.6 s each).
const std::vector<std::string> kSlowRun = {"--step_ms=1", "--max_request_bytes=20000"};

class CacheProcessTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    data_ = dir_.Join("data");
    ASSERT_TRUE(testing::GenerateImagenet(data_, kImages));
    pipeline_ = dir_.Join("pipeline.json");
    ASSERT_TRUE(WriteStringToFile(Env::Default(), pipeline_,
                                  PipelineJson(data_, policy() == "auto" ? kAutoPrefixCostUs : 0),
                                  false)
                    .ok());
    local_ = testing::LocalDigests(pipeline_, 3, 11, policy(), dir_.Join("local.digest"));
    ASSERT_EQ(local_.size(), 3u);
    ASSERT_EQ(local_.at(0).rows, kImages);
  }

  const std::string& policy() const { return GetParam(); }

  // `granary run` of the named job "j" up to `epochs`, resuming from the position file.
  std::vector<std::string> RunArgs(const testing::LocalCluster& cluster, int epochs,
                                   bool slow) const {
    std::vector<std::string> argv = {GRANARY_BINARY,
                                     "run",
                                     "--insecure",
                                     "--dispatcher=" + cluster.dispatcher_address(),
                                     "--pipeline=" + pipeline_,
                                     absl::StrCat("--epochs=", epochs),
                                     "--seed=11",
                                     "--cache_policy=" + policy(),
                                     "--job_name=j",
                                     "--position_file=" + dir_.Join("position"),
                                     "--digest_out=" + dir_.Join("run.digest"),
                                     "--stall_timeout_ms=30000"};
    if (slow) argv.insert(argv.end(), kSlowRun.begin(), kSlowRun.end());
    return argv;
  }

  void RunToCompletion(const std::vector<std::string>& argv) const {
    Subprocess run(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = run.ReadAll(std::chrono::seconds(180));
    ASSERT_EQ(run.Wait(), 0) << output;
  }

  // Moves the source files away: an epoch that opened them would fail.
  void HideSource() const {
    ASSERT_TRUE(Env::Default()->RenameFile(data_, data_ + ".hidden").ok());
  }

  // Every epoch's digest equals local's.
  void ExpectDigestsMatchLocal() const {
    const auto digests = ReadDigests(dir_.Join("run.digest"));
    ASSERT_EQ(digests.size(), 3u);
    for (const auto& [epoch, d] : digests) {
      EXPECT_EQ(d.rows, kImages) << policy() << " epoch " << epoch;
      EXPECT_EQ(d.multiset, local_.at(epoch).multiset) << policy() << " epoch " << epoch;
    }
  }

  // Waits until the run position is in `epoch` with at least `rows` delivered.
  static void AwaitPosition(const std::string& position, int64_t epoch, int64_t rows) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (true) {
      const testing::RunPosition at = ReadRunPosition(position);
      if (at.epoch > epoch || (at.epoch == epoch && at.rows >= rows)) return;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "run stuck at epoch " << at.epoch << " row " << at.rows;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  static void KillAndRestartAllWorkers(testing::LocalCluster& cluster, int workers) {
    for (int i = 0; i < workers; ++i) cluster.KillWorker(i);
    for (int i = 0; i < workers; ++i) ASSERT_TRUE(cluster.RestartWorker(i)) << "worker " << i;
  }

  // Once `run` is a third into epoch 1 (a Get epoch), SIGKILLs and restarts both workers, then
  // waits for `run` to end, successfully.
  static void KillBothWorkersMidGetThenFinish(testing::LocalCluster& cluster, Subprocess& run,
                                              const std::string& position) {
    AwaitPosition(position, 1, kImages / 3);
    ASSERT_EQ(ReadRunPosition(position).epoch, 1) << "the Get epoch ended before the kill";
    KillAndRestartAllWorkers(cluster, 2);
    const std::string output = run.ReadAll(std::chrono::seconds(180));
    ASSERT_EQ(run.Wait(), 0) << output;
  }

  static GetStatusResponse Status(testing::LocalCluster& cluster) {
    GetStatusResponse status;
    const grpc::Status rpc =
        cluster.dispatcher().GetStatus(testing::RpcContext().get(), GetStatusRequest(), &status);
    EXPECT_TRUE(rpc.ok()) << rpc.error_message();
    return status;
  }

  // The dispatcher's status once its one cache is complete. A run can end before its tasks'
  // last chunks are committed: the client has every element when the worker's TaskFinished,
  // which commits them, is still on its way to the dispatcher.
  static GetStatusResponse AwaitCompleteCache(testing::LocalCluster& cluster) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      GetStatusResponse status = Status(cluster);
      if (status.state().caches_size() == 1 && status.state().caches(0).complete()) return status;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "no complete cache 10 s after the run ended: "
                      << status.state().ShortDebugString();
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  testing::ScopedTempDir dir_;
  std::string data_;
  std::string pipeline_;
  std::map<int64_t, DigestLine> local_;
};

std::vector<std::string> WorkerFlags(const std::string& checkpoints) {
  return {"--window_bytes=16384", "--checkpoint_dir=" + checkpoints, "--checkpoint_interval_ms=30"};
}

TEST_P(CacheProcessTest, LaterEpochsReadTheCacheAndMatchLocal) {
  testing::LocalCluster cluster(dir_.Join("cluster"),
                                {.workers = 2, .worker_flags = WorkerFlags(dir_.Join("ckpt"))});
  ASSERT_TRUE(cluster.ok());
  RunToCompletion(RunArgs(cluster, 1, false));
  const GetStatusResponse status = AwaitCompleteCache(cluster);
  ASSERT_EQ(status.state().caches_size(), 1);
  ASSERT_TRUE(status.state().caches(0).complete());
  HideSource();
  RunToCompletion(RunArgs(cluster, 3, false));
  ExpectDigestsMatchLocal();
  // `granary status` shows which epoch wrote the cache and which read it.
  Subprocess status_command(
      {GRANARY_BINARY, "status", "--insecure", "--dispatcher=" + cluster.dispatcher_address()},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string shown = status_command.ReadAll();
  ASSERT_EQ(status_command.Wait(), 0) << shown;
  const std::string key = status.state().caches(0).cache_key();
  EXPECT_THAT(shown, ::testing::HasSubstr("writes cache " + key));
  EXPECT_THAT(shown, ::testing::HasSubstr("reads cache " + key));
  EXPECT_THAT(shown, ::testing::HasSubstr(
                         absl::StrCat("cache ", key, ": written by job 1 epoch 0, complete: ")));
  EXPECT_THAT(shown, ::testing::HasSubstr(absl::StrCat(kImages, " elements")));
  // Ops after the mark run every epoch (their draws change); a full cache replays epoch 0.
  const auto digests = ReadDigests(dir_.Join("run.digest"));
  if (policy() == "full") {
    EXPECT_EQ(digests.at(1).multiset, digests.at(0).multiset);
  } else {
    EXPECT_NE(digests.at(1).multiset, digests.at(0).multiset);
  }
}

// The manifest's chunks, read back from their tier: each task's elements 0..n-1 exactly once,
// in order.
void ExpectManifestExactlyOnce(const CacheState& cache, int64_t rows, uint64_t multiset,
                               bool compare_multiset) {
  ASSERT_TRUE(cache.complete());
  CacheTierEnv tiers(Env::Default());
  std::map<int64_t, int64_t> next_index;  // task -> next expected index
  EpochDigest digest(false);
  int64_t records = 0;
  for (const CacheChunk& chunk : cache.chunks()) {
    auto file = tiers.NewSequentialFile(chunk.path());
    ASSERT_TRUE(file.ok()) << file.status();
    TfRecordReader reader(std::move(file).value(), chunk.path(), 0);
    int64_t in_chunk = 0;
    while (true) {
      std::string record;
      bool end = false;
      ASSERT_TRUE(reader.ReadRecord(&record, &end).ok()) << chunk.path();
      if (end) break;
      CachedElement cached;
      ASSERT_TRUE(cached.ParseFromString(record)) << chunk.path();
      EXPECT_EQ(cached.index(), next_index[chunk.task_id()])
          << "task " << chunk.task_id() << " in " << chunk.path();
      next_index[chunk.task_id()] = cached.index() + 1;
      auto element = Element::FromProto(cached.element());
      ASSERT_TRUE(element.ok()) << element.status();
      digest.Add(*element);
      ++in_chunk;
    }
    EXPECT_EQ(in_chunk, chunk.num_elements()) << chunk.path();
    records += in_chunk;
  }
  EXPECT_EQ(records, rows);
  EXPECT_EQ(cache.num_elements(), rows);
  if (compare_multiset) {
    EXPECT_EQ(digest.multiset(), multiset);
  }
}

TEST_P(CacheProcessTest, AllWorkersKilledMidPutThenGetMatchesLocal) {
  testing::LocalCluster cluster(dir_.Join("cluster"),
                                {.workers = 2, .worker_flags = WorkerFlags(dir_.Join("ckpt"))});
  ASSERT_TRUE(cluster.ok());
  const std::string position = dir_.Join("position");
  Subprocess run(RunArgs(cluster, 3, true), Subprocess::Stderr::kMergeIntoStdout);
  AwaitPosition(position, 0, kImages / 3);
  // Mid-Put: the cache is being written, not complete.
  GetStatusResponse status = Status(cluster);
  ASSERT_EQ(status.state().caches_size(), 1);
  ASSERT_FALSE(status.state().caches(0).complete()) << "the Put epoch ended before the kill";
  KillAndRestartAllWorkers(cluster, 2);
  const std::string output = run.ReadAll(std::chrono::seconds(180));
  ASSERT_EQ(run.Wait(), 0) << output;
  ExpectDigestsMatchLocal();
  status = AwaitCompleteCache(cluster);
  ASSERT_EQ(status.state().caches_size(), 1);
  // Under `full` the cached elements are epoch 0's output; under at_mark they are the decoded
  // images before augmentation (counted, not digested against the run).
  ExpectManifestExactlyOnce(status.state().caches(0), kImages, local_.at(0).multiset,
                            policy() == "full");
}

TEST_P(CacheProcessTest, AllWorkersKilledMidGetMatchesLocal) {
  testing::LocalCluster cluster(dir_.Join("cluster"),
                                {.workers = 2, .worker_flags = WorkerFlags(dir_.Join("ckpt"))});
  ASSERT_TRUE(cluster.ok());
  RunToCompletion(RunArgs(cluster, 1, false));
  HideSource();
  const std::string position = dir_.Join("position");
  Subprocess run(RunArgs(cluster, 3, true), Subprocess::Stderr::kMergeIntoStdout);
  ASSERT_NO_FATAL_FAILURE(KillBothWorkersMidGetThenFinish(cluster, run, position));
  ExpectDigestsMatchLocal();
}

// Rewrites `chunk`'s file as a tenant with write access to the cache directory but without the
// key could: well framed, the same count and indices, one element's bytes changed.
void ForgeChunk(const CacheChunk& chunk) {
  auto file = Env::Default()->NewSequentialFile(chunk.path());
  ASSERT_TRUE(file.ok()) << file.status();
  TfRecordReader reader(std::move(file).value(), chunk.path(), 0);
  std::vector<std::string> records;
  while (true) {
    std::string record;
    bool end = false;
    ASSERT_TRUE(reader.ReadRecord(&record, &end).ok()) << chunk.path();
    if (end) break;
    records.push_back(std::move(record));
  }
  ASSERT_EQ(static_cast<int64_t>(records.size()), chunk.num_elements());
  CachedElement cached;
  ASSERT_TRUE(cached.ParseFromString(records[0]));
  ASSERT_GT(cached.element().tensors_size(), 0);
  TensorProto* tensor = cached.mutable_element()->mutable_tensors(0);
  ASSERT_FALSE(tensor->content().empty());
  (*tensor->mutable_content())[0] ^= 0x5a;
  records[0] = cached.SerializeAsString();
  auto out = Env::Default()->NewWritableFile(chunk.path());
  ASSERT_TRUE(out.ok()) << out.status();
  TfRecordWriter writer(std::move(out).value());
  for (const std::string& record : records) ASSERT_TRUE(writer.Write(record).ok());
  ASSERT_TRUE(writer.Close().ok());
}

// Issue 15, cache integrity: a chunk forged after the Put epoch fails its MAC on the worker
// before any of it is served; the worker recomputes it from the source, the dispatcher marks the
// cache invalid (named in the status), the next epoch computes instead of reading it, and every
// epoch still equals `granary local`.
TEST_P(CacheProcessTest, ForgedChunkIsRecomputedNeverServedAndTheCacheRetired) {
  testing::LocalCluster cluster(dir_.Join("cluster"),
                                {.workers = 2, .worker_flags = WorkerFlags(dir_.Join("ckpt"))});
  ASSERT_TRUE(cluster.ok());
  RunToCompletion(RunArgs(cluster, 1, false));
  const GetStatusResponse written = AwaitCompleteCache(cluster);
  ASSERT_EQ(written.state().caches_size(), 1);
  const CacheState& cache = written.state().caches(0);
  ASSERT_GT(cache.chunks_size(), 0);
  // The last chunk of a task: recomputing it replays the most of that task's stream.
  const CacheChunk& forged = cache.chunks(cache.chunks_size() - 1);
  ASSERT_NO_FATAL_FAILURE(ForgeChunk(forged));
  RunToCompletion(RunArgs(cluster, 3, false));
  ExpectDigestsMatchLocal();
  const GetStatusResponse status = Status(cluster);
  ASSERT_EQ(status.state().caches_size(), 1);
  EXPECT_TRUE(status.state().caches(0).invalid());
  EXPECT_THAT(status.state().caches(0).invalid_reason(), ::testing::HasSubstr(forged.path()));
  EXPECT_THAT(status.state().caches(0).invalid_reason(), ::testing::HasSubstr("MAC"));
  std::map<int64_t, EpochCache::Mode> modes;
  for (const EpochState& epoch : status.state().epochs())
    modes[epoch.epoch()] = epoch.cache().mode();
  EXPECT_EQ(modes[1], EpochCache::GET);
  EXPECT_EQ(modes[2], EpochCache::COMPUTE) << "an invalid cache is not read again";
  Subprocess status_command(
      {GRANARY_BINARY, "status", "--insecure", "--dispatcher=" + cluster.dispatcher_address()},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string shown = status_command.ReadAll();
  ASSERT_EQ(status_command.Wait(), 0) << shown;
  EXPECT_THAT(shown, ::testing::HasSubstr("INVALID, not served: chunk " + forged.path()));
}

INSTANTIATE_TEST_SUITE_P(Policies, CacheProcessTest, ::testing::Values("full", "at_mark"),
                         [](const auto& info) { return info.param; });

// cache_policy auto (issue 18): a worker profiles the pipeline before the job's first epoch, the
// dispatcher decides to cache at the mark (the simulated cost before it is what reading saves),
// epoch 0 writes the cache and epochs 1–2 read it — and every epoch matches `granary local
// --cache_policy auto`, whose data does not depend on the decision.
class AutoCacheProcessTest : public CacheProcessTest {};

TEST_P(AutoCacheProcessTest, ProfilesDecidesToCacheAtTheMarkAndEveryEpochMatchesLocal) {
  testing::LocalCluster cluster(dir_.Join("cluster"),
                                {.workers = 2, .worker_flags = WorkerFlags(dir_.Join("ckpt"))});
  ASSERT_TRUE(cluster.ok());
  RunToCompletion(RunArgs(cluster, 3, false));
  const GetStatusResponse status = AwaitCompleteCache(cluster);
  ExpectDigestsMatchLocal();
  ASSERT_EQ(status.state().jobs_size(), 1);
  const CacheDecision& decision = status.state().jobs(0).cache_decision();
  EXPECT_EQ(decision.cache_point(), kAutoMarkPoint) << decision.reason();
  EXPECT_EQ(decision.profile().sample_records(), 64);
  ASSERT_EQ(decision.profile().points_size(), 1);
  ASSERT_EQ(status.state().caches_size(), 1);
  const std::string key = status.state().caches(0).cache_key();
  for (const EpochState& epoch : status.state().epochs()) {
    EXPECT_EQ(epoch.cache().mode(), epoch.epoch() == 0 ? EpochCache::PUT : EpochCache::GET)
        << "epoch " << epoch.epoch();
    EXPECT_EQ(epoch.cache().cache_key(), key);
  }
  // The probe's chunks are gone: the cache root holds the cache's directory alone (and the
  // file naming its cluster).
  auto entries = Env::Default()->GetChildren(cluster.cache_root());
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_THAT(*entries, ::testing::UnorderedElementsAre(key, kCacheRootOwnerFileName));
  Subprocess status_command(
      {GRANARY_BINARY, "status", "--insecure", "--dispatcher=" + cluster.dispatcher_address()},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string shown = status_command.ReadAll();
  ASSERT_EQ(status_command.Wait(), 0) << shown;
  // `granary run` leaves the job's num_epochs open (a rerun may read further): the planner
  // counts on kUnboundedEpochs.
  EXPECT_THAT(shown, ::testing::HasSubstr(absl::StrCat("cache_policy auto: cache at op ",
                                                       kAutoMarkPoint, " (over 100 epochs")));
}

INSTANTIATE_TEST_SUITE_P(Auto, AutoCacheProcessTest, ::testing::Values("auto"),
                         [](const auto& info) { return info.param; });

// The in-memory tier (issue 20): the same cache with --cache_root redis://… on a real
// redis-server without persistence, or on a Redis Cluster of three of them.
class RedisTierProcessTest : public CacheProcessTest {
 protected:
  // "redis://HOST:PORT" of the tier (of one of its nodes).
  virtual std::string RedisUrl() const = 0;

  testing::LocalClusterOptions Options() const {
    return {.workers = 2,
            .worker_flags = WorkerFlags(dir_.Join("ckpt")),
            .dispatcher_flags = {"--cache_root=" + RedisUrl() + "/granary"}};
  }

  // Put and Get through Redis, every worker SIGKILLed mid-Put and again mid-Get (the source
  // moved away once the cache is complete): every epoch matches local, epochs 1-2 read the cache
  // and its manifest holds every element once.
  void PutAndGetWithAllWorkersKilledMatchLocal();
};

class RedisCacheProcessTest : public RedisTierProcessTest {
 protected:
  std::string RedisUrl() const override { return redis_.url(); }

  LocalRedisServer redis_;
};

// Chunks spread over the cluster's masters by hash slot (cache/redis_nodes.h).
class RedisClusterCacheProcessTest : public RedisTierProcessTest {
 protected:
  std::string RedisUrl() const override { return redis_.url(); }

  testing::RedisTestCluster redis_{{.masters = 3}, dir_.path()};
};

void RedisTierProcessTest::PutAndGetWithAllWorkersKilledMatchLocal() {
  testing::LocalCluster cluster(dir_.Join("cluster"), Options());
  ASSERT_TRUE(cluster.ok());
  const std::string position = dir_.Join("position");
  Subprocess run(RunArgs(cluster, 3, true), Subprocess::Stderr::kMergeIntoStdout);
  AwaitPosition(position, 0, kImages / 3);
  ASSERT_FALSE(Status(cluster).state().caches(0).complete()) << "the Put ended before the kill";
  KillAndRestartAllWorkers(cluster, 2);
  AwaitPosition(position, 1, 0);
  const GetStatusResponse written = AwaitCompleteCache(cluster);
  ASSERT_EQ(written.state().caches_size(), 1);
  ExpectManifestExactlyOnce(written.state().caches(0), kImages, local_.at(0).multiset,
                            policy() == "full");
  EXPECT_TRUE(absl::StartsWith(written.state().caches(0).chunks(0).path(), RedisUrl()))
      << written.state().caches(0).chunks(0).path();
  HideSource();
  ASSERT_NO_FATAL_FAILURE(KillBothWorkersMidGetThenFinish(cluster, run, position));
  ExpectDigestsMatchLocal();
  const GetStatusResponse status = Status(cluster);
  std::map<int64_t, EpochCache::Mode> modes;
  for (const EpochState& epoch : status.state().epochs())
    modes[epoch.epoch()] = epoch.cache().mode();
  EXPECT_EQ(modes[1], EpochCache::GET);
  EXPECT_EQ(modes[2], EpochCache::GET);
}

TEST_P(RedisCacheProcessTest, AllWorkersKilledMidPutAndMidGetMatchLocal) {
  ASSERT_TRUE(redis_.ok()) << "redis-server did not start";
  PutAndGetWithAllWorkersKilledMatchLocal();
}

TEST_P(RedisClusterCacheProcessTest, AllWorkersKilledMidPutAndMidGetMatchLocal) {
  ASSERT_TRUE(redis_.ok()) << "the Redis Cluster did not form";
  PutAndGetWithAllWorkersKilledMatchLocal();
  if (HasFatalFailure()) return;
  for (int node = 0; node < redis_.size(); ++node) {
    EXPECT_GT(redis_.KeysOn(node), 0) << "no chunk on node " << node;
  }
}

// Redis restarted without persistence between the Put and the Get: every chunk is gone. The Get
// epoch finds the first one missing, the cache is retired and the epoch recomputes — every epoch
// still matches local, nothing is read wrong.
TEST_P(RedisCacheProcessTest, ARestartedRedisLosesTheCacheAndItsEpochsRecompute) {
  ASSERT_TRUE(redis_.ok()) << "redis-server did not start";
  testing::LocalCluster cluster(dir_.Join("cluster"), Options());
  ASSERT_TRUE(cluster.ok());
  RunToCompletion(RunArgs(cluster, 1, false));
  ASSERT_TRUE(AwaitCompleteCache(cluster).state().caches(0).complete());
  ASSERT_TRUE(redis_.Restart());
  RunToCompletion(RunArgs(cluster, 3, false));
  ExpectDigestsMatchLocal();
  const GetStatusResponse status = Status(cluster);
  ASSERT_EQ(status.state().caches_size(), 1);
  EXPECT_TRUE(status.state().caches(0).invalid());
  EXPECT_THAT(status.state().caches(0).invalid_reason(), ::testing::HasSubstr(redis_.url()));
}

INSTANTIATE_TEST_SUITE_P(Policies, RedisCacheProcessTest, ::testing::Values("full", "at_mark"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Policies, RedisClusterCacheProcessTest, ::testing::Values("full"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace granary
