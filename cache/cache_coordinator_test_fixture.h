// DispatcherCacheTest: DispatcherImplTest (dispatcher/dispatcher_impl_test_fixture.h) with a
// cache root, a cached pipeline and the helpers the caching jobs' tests share
// (cache_coordinator_test.cc, cache_coordinator_auto_test.cc).
#ifndef GRANARY_CACHE_CACHE_COORDINATOR_TEST_FIXTURE_H_
#define GRANARY_CACHE_CACHE_COORDINATOR_TEST_FIXTURE_H_

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dispatcher/dispatcher_impl_test_fixture.h"

namespace granary {

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

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_COORDINATOR_TEST_FIXTURE_H_
