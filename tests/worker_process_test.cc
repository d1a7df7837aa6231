// A real worker process serving a task: bad requests get clear gRPC errors while the worker
// keeps serving, and a slow client keeps the worker's buffered bytes within its window.
#include <signal.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "obs/http_get.h"
#include "pipeline/pipeline_loader.h"
#include "testing/exposition_parser.h"
#include "testing/scoped_temp_dir.h"
#include "tests/local_cluster.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using testing::RpcContext;

// Registers `pipeline_json` as a job of one task and starts epoch 0; returns the task id once
// the worker runs it.
int64_t StartSingleTaskJob(testing::LocalCluster& cluster, const std::string& pipeline_json) {
  auto def = ParsePipelineJson(pipeline_json, "test pipeline");
  EXPECT_TRUE(def.ok()) << def.status();
  RegisterDatasetRequest dataset_request;
  *dataset_request.mutable_pipeline() = *def;
  RegisterDatasetResponse dataset;
  EXPECT_TRUE(cluster.dispatcher().RegisterDataset(RpcContext().get(), dataset_request, &dataset).ok());
  GetOrCreateJobRequest job_request;
  job_request.set_dataset_id(dataset.dataset_id());
  job_request.mutable_options()->set_num_worker_slots(1);
  GetOrCreateJobResponse job;
  EXPECT_TRUE(cluster.dispatcher().GetOrCreateJob(RpcContext().get(), job_request, &job).ok());
  StartEpochRequest epoch_request;
  epoch_request.set_job_id(job.job_id());
  StartEpochResponse epoch;
  EXPECT_TRUE(cluster.dispatcher().StartEpoch(RpcContext().get(), epoch_request, &epoch).ok());
  GetStatusResponse status;
  EXPECT_TRUE(cluster.dispatcher().GetStatus(RpcContext().get(), {}, &status).ok());
  const int64_t task = status.state().tasks(0).task_id();
  auto worker = cluster.WorkerStub(0);
  for (int i = 0; i < 100; ++i) {
    GetWorkerStatusResponse ws;
    if (worker->GetWorkerStatus(RpcContext().get(), {}, &ws).ok() && ws.tasks_size() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return task;
}

GetElementsRequest Request(int64_t task, int64_t generation, int64_t from, int64_t max_bytes) {
  GetElementsRequest r;
  r.set_task_id(task);
  r.set_generation(generation);
  r.set_from_index(from);
  r.set_max_bytes(max_bytes);
  return r;
}

TEST(WorkerProcessTest, BadRequestsGetClearErrorsAndTheWorkerKeepsServing) {
  testing::ScopedTempDir dir;
  testing::LocalCluster cluster(dir.path(), {});
  ASSERT_TRUE(cluster.ok());
  const int64_t task = StartSingleTaskJob(
      cluster, R"({"source": {"type": "range", "params": {"stop": 100, "elements_per_split": 10}}})");
  auto worker = cluster.WorkerStub(0);
  GetElementsResponse response;

  grpc::Status s = worker->GetElements(RpcContext().get(), Request(task + 100, 1, 0, 1 << 20),
                                       &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("task ", task + 100,
                                                        " does not run on worker worker-0")));

  s = worker->GetElements(RpcContext().get(), Request(task, 7, 0, 1 << 20), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("at generation 1, not 7"));

  // Far past the task's 100 elements: once the task has ended, OUT_OF_RANGE names its size.
  for (int i = 0; i < 50; ++i) {
    s = worker->GetElements(RpcContext().get(), Request(task, 1, 1000, 1 << 20), &response);
    if (s.error_code() == grpc::StatusCode::OUT_OF_RANGE) break;
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(), HasSubstr("has only 100 elements; from_index 1000"));

  // The worker still serves the task: the elements come back from 0 (recomputed).
  int64_t next = 0;
  for (int i = 0; i < 200 && next < 100; ++i) {
    GetElementsResponse r;
    ASSERT_TRUE(worker->GetElements(RpcContext().get(), Request(task, 1, next, 1 << 20), &r).ok());
    for (const IndexedElement& e : r.elements()) {
      ASSERT_EQ(e.index(), next);
      ElementProto element;
      ASSERT_TRUE(element.ParseFromString(e.payload()));
      ++next;
    }
  }
  EXPECT_EQ(next, 100);
}

TEST(WorkerProcessTest, SlowClientKeepsBufferedBytesWithinTheWindow) {
  testing::ScopedTempDir dir;
  constexpr int64_t kWindow = 16 * 1024;
  testing::LocalClusterOptions options;
  options.worker_flags = {absl::StrCat("--window_bytes=", kWindow)};
  testing::LocalCluster cluster(dir.path(), options);
  ASSERT_TRUE(cluster.ok());
  // 10 000 batches of 64 int64 values: about 600 B each, 6 MB in all.
  const int64_t task = StartSingleTaskJob(
      cluster, R"({"source": {"type": "range", "params": {"stop": 640000}},
                  "ops": [{"op": "batch", "params": {"batch_size": 64}}]})");
  auto worker = cluster.WorkerStub(0);
  int64_t next = 0;
  int64_t max_element = 0;
  // The first request starts the task (tasks start lazily).
  GetElementsResponse first;
  ASSERT_TRUE(worker->GetElements(RpcContext().get(), Request(task, 1, 0, 1), &first).ok());
  for (int round = 0; round < 5; ++round) {
    // The client is slow: the worker runs ahead until its window is full, then waits.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    GetWorkerStatusResponse status;
    ASSERT_TRUE(worker->GetWorkerStatus(RpcContext().get(), {}, &status).ok());
    ASSERT_EQ(status.tasks_size(), 1);
    EXPECT_GT(status.tasks(0).buffered_bytes(), kWindow / 2) << "round " << round;
    EXPECT_LE(status.tasks(0).buffered_bytes(), kWindow + 1024) << "round " << round;
    // Elements are over 500 bytes: the worker is at most a window of them ahead.
    EXPECT_LE(status.tasks(0).produced(), next + kWindow / 500 + 1) << "round " << round;
    GetElementsResponse r;
    ASSERT_TRUE(worker->GetElements(RpcContext().get(), Request(task, 1, next, 4096), &r).ok());
    ASSERT_GT(r.elements_size(), 0);
    for (const IndexedElement& e : r.elements()) {
      ASSERT_EQ(e.index(), next++);
      max_element = std::max<int64_t>(max_element, e.payload().size());
    }
  }
  EXPECT_LT(max_element, 1024);
}

// `granary worker` with the id `id` (the cluster's flags otherwise, and `extra_flags`): its log
// in stdout when `log` is empty, else in that file.
std::unique_ptr<Subprocess> StartWorker(const testing::LocalCluster& cluster,
                                        const std::string& data_root, const std::string& id,
                                        int64_t register_timeout_ms, const std::string& log = "",
                                        const std::vector<std::string>& extra_flags = {}) {
  std::vector<std::string> argv = {GRANARY_BINARY,
                                   "worker",
                                   "--dispatcher=" + cluster.dispatcher_address(),
                                   "--worker_id=" + id,
                                   "--port=0",
                                   "--insecure",
                                   "--data_roots=" + data_root,
                                   absl::StrCat("--register_timeout_ms=", register_timeout_ms)};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  return std::make_unique<Subprocess>(
      argv, log.empty() ? Subprocess::Stderr::kMergeIntoStdout : Subprocess::Stderr::kToFile, log);
}

// worker-0's registration in the dispatcher's state.
WorkerState RegisteredWorker(testing::LocalCluster& cluster, const std::string& id) {
  GetStatusResponse status;
  EXPECT_TRUE(cluster.dispatcher().GetStatus(RpcContext().get(), {}, &status).ok());
  for (const WorkerState& worker : status.state().workers()) {
    if (worker.worker_id() == id) return worker;
  }
  ADD_FAILURE() << "no worker " << id;
  return {};
}

// Two workers started with the same id took it from each other at every heartbeat, silently
// (hundreds of re-registrations a minute). The second is refused while the first is live, and
// exits naming the id and the first's address; a worker restarted at a new address after the
// first died still gets the id.
TEST(WorkerProcessTest, ASecondWorkerWithALiveWorkersIdIsRefusedARestartedOneIsNot) {
  testing::ScopedTempDir dir;
  testing::LocalCluster cluster(dir.Join("cluster"), {.dispatcher_flags = {"--metrics_port=0"}});
  ASSERT_TRUE(cluster.ok());
  const std::string first = cluster.worker_address(0);
  ASSERT_EQ(RegisteredWorker(cluster, "worker-0").incarnation(), 1);

  // The duplicate keeps being refused for its 5 s (the first heartbeats all along), then exits.
  std::unique_ptr<Subprocess> duplicate = StartWorker(cluster, dir.path(), "worker-0", 5000);
  const std::string output = duplicate->ReadAll(std::chrono::seconds(30));
  EXPECT_EQ(duplicate->WaitFor(std::chrono::seconds(5)), 1) << output;
  if (duplicate->running()) duplicate->Kill(SIGKILL);
  EXPECT_THAT(output, HasSubstr("registering with the dispatcher: gave up"));
  EXPECT_THAT(output, HasSubstr(absl::StrCat("worker id 'worker-0' is registered by the live "
                                             "worker at ",
                                             first)));
  EXPECT_THAT(output, HasSubstr("same --worker_id"));
  // The first kept its registration all along.
  WorkerState registered = RegisteredWorker(cluster, "worker-0");
  EXPECT_EQ(registered.address(), first);
  EXPECT_EQ(registered.incarnation(), 1);
  EXPECT_FALSE(registered.lost());
  absl::StatusOr<HttpGetResult> metrics =
      HttpGet("127.0.0.1", cluster.dispatcher_metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  absl::StatusOr<Exposition> exposition = ParseExposition(metrics->body);
  ASSERT_TRUE(exposition.ok()) << exposition.status();
  EXPECT_GE(exposition->Sum("granary_dispatcher_duplicate_workers_refused_total"), 2);

  // The first dies; a worker restarted with its id at a new address registers once the dead
  // one's registration times out (2 s), as the next incarnation.
  cluster.KillWorker(0);
  const std::string log = dir.Join("restarted.log");
  std::unique_ptr<Subprocess> restarted = StartWorker(cluster, dir.path(), "worker-0", 20000, log);
  const std::string address = restarted->ReadListenAddress(std::chrono::seconds(30));
  ASSERT_FALSE(address.empty()) << ReadFileToString(Env::Default(), log).value_or("");
  EXPECT_NE(address, first);
  registered = RegisteredWorker(cluster, "worker-0");
  EXPECT_EQ(registered.address(), address);
  EXPECT_EQ(registered.incarnation(), 2);
  restarted->Kill(SIGTERM);
  restarted->Wait();
}

// --advertise_address: the worker registers with the dispatcher at that address (where a proxy in
// front of it is reached), not at the one it listens on; a malformed value is refused at start,
// naming the flag and the value.
TEST(WorkerProcessTest, AdvertiseAddressIsWhatTheDispatcherHandsOutAndIsChecked) {
  testing::ScopedTempDir dir;
  testing::LocalCluster cluster(dir.Join("cluster"), {});
  ASSERT_TRUE(cluster.ok());

  for (const std::string bad : {"no-port", "127.0.0.1:", ":7000", "127.0.0.1:0",
                                "127.0.0.1:65536", "127.0.0.1:http"}) {
    std::unique_ptr<Subprocess> worker =
        StartWorker(cluster, dir.path(), "worker-9", 5000, "", {"--advertise_address=" + bad});
    const std::string output = worker->ReadAll(std::chrono::seconds(30));
    EXPECT_EQ(worker->WaitFor(std::chrono::seconds(5)), 1) << bad << ": " << output;
    if (worker->running()) worker->Kill(SIGKILL);
    EXPECT_THAT(output, HasSubstr("--advertise_address=" + bad + ": expected HOST:PORT")) << bad;
  }

  const std::string advertised = "127.0.0.1:61234";
  const std::string log = dir.Join("advertised.log");
  std::unique_ptr<Subprocess> worker = StartWorker(cluster, dir.path(), "worker-9", 20000, log,
                                                   {"--advertise_address=" + advertised});
  const std::string listening = worker->ReadListenAddress(std::chrono::seconds(30));
  ASSERT_FALSE(listening.empty()) << ReadFileToString(Env::Default(), log).value_or("");
  EXPECT_NE(listening, advertised);
  // Registered once it logged so; poll the dispatcher's state for it.
  WorkerState registered;
  for (int i = 0; i < 100 && registered.address().empty(); ++i) {
    GetStatusResponse status;
    ASSERT_TRUE(cluster.dispatcher().GetStatus(RpcContext().get(), {}, &status).ok());
    for (const WorkerState& w : status.state().workers()) {
      if (w.worker_id() == "worker-9") registered = w;
    }
    if (registered.address().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(registered.address(), advertised);
  worker->Kill(SIGTERM);
  worker->Wait();
}

}  // namespace
}  // namespace granary
