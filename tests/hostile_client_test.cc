// Hostile clients against real `granary dispatcher` and `granary worker` processes (issue 13,
// safety nets): while a legitimate `granary run` job reads its epochs, out-of-range ids, counts
// and indices, oversized messages and pipelines, foreign tasks, heartbeats from strangers and
// random bytes are sent with the generated stubs. Each must be answered with a clear error (a
// status code and a message naming what is wrong), every server must stay up and answer, its
// memory must stay bounded under floods, and the legitimate job's exactly-once digests must
// equal `granary local`'s. Afterwards the dispatcher is SIGKILLed and must restart on the same
// journal (issue 13, defect 1: one request bricked it for good).
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/sanitizers.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline_loader.h"
#include "proto/dispatcher.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "testing/scoped_temp_dir.h"
#include "tests/local_cluster.h"
#include "tests/run_outputs.h"

namespace granary {
namespace {

using testing::DigestLine;
using ::testing::HasSubstr;
using testing::ReadDigests;
using testing::RpcContext;

// 200 splits of 500 values, shuffled, batched: 100000 rows per epoch.
constexpr char kPipeline[] = R"({
  "source": {"type": "range",
             "params": {"stop": 100000, "elements_per_split": 500, "shuffle_splits": true}},
  "ops": [{"op": "shuffle", "params": {"buffer_size": 64}},
          {"op": "batch", "params": {"batch_size": 16}}]})";
constexpr int64_t kRows = 100000;
constexpr int kEpochs = 3;
constexpr uint32_t kSeed = 20261125;

// Everything a flood may add to a server's resident memory.
constexpr int64_t kMaxGrowthKb = 64 << 10;

// A /proc/<pid>/status field in kB (VmRSS), or a letter (State); "" if absent.
std::string ProcStatusField(pid_t pid, const std::string& name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, name + ":")) {
      std::string value = line.substr(name.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

int64_t RssKb(pid_t pid) {
  int64_t kb = -1;
  const std::string value = ProcStatusField(pid, "VmRSS");
  EXPECT_TRUE(absl::SimpleAtoi(value.substr(0, value.find(' ')), &kb))
      << "no VmRSS for pid " << pid << ": '" << value << "'";
  return kb;
}

// Running (not exited, not a zombie).
bool Alive(pid_t pid) {
  const std::string state = ProcStatusField(pid, "State");
  return !state.empty() && state[0] != 'Z' && state[0] != 'X';
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

PipelineDef Pipeline(const std::string& json) {
  auto def = ParsePipelineJson(json, "hostile.json");
  EXPECT_TRUE(def.ok()) << def.status() << "\n" << json;
  return def.ok() ? *def : PipelineDef();
}

// `status` is the error `code` and its message contains every one of `names`.
void ExpectError(const std::string& what, const grpc::Status& status, grpc::StatusCode code,
                 std::vector<std::string> names) {
  EXPECT_EQ(status.error_code(), code) << what << ": " << status.error_message();
  EXPECT_LT(status.error_message().size(), 2048u) << what << ": a message too long to read";
  for (const std::string& name : names) {
    EXPECT_THAT(status.error_message(), HasSubstr(name)) << what;
  }
}

class HostileClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pipeline_ = dir_.Join("pipeline.json");
    ASSERT_TRUE(WriteStringToFile(Env::Default(), pipeline_, kPipeline, false).ok());
    Subprocess local(
        {GRANARY_BINARY, "local", "--pipeline=" + pipeline_, absl::StrCat("--epochs=", kEpochs),
         "--seed=7", "--digest_out=" + dir_.Join("local.digest")},
        Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = local.ReadAll();
    ASSERT_EQ(local.Wait(), 0) << output;
    local_ = ReadDigests(dir_.Join("local.digest"));
    ASSERT_EQ(local_.size(), static_cast<size_t>(kEpochs));
  }

  // Every server is running and answers.
  void ExpectServersUp(testing::LocalCluster& cluster, int workers, const std::string& when) {
    EXPECT_TRUE(Alive(cluster.dispatcher_pid())) << "the dispatcher died " << when;
    std::fprintf(stderr, "%.1f s: servers up %s?\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(),
                 when.c_str());
    GetStatusResponse status;
    grpc::Status s;
    // A connection to a dispatcher that was restarted fails once ("Socket closed").
    for (int attempt = 0; attempt < 3; ++attempt) {
      s = dispatcher_->GetStatus(RpcContext().get(), {}, &status);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    }
    EXPECT_TRUE(s.ok()) << "GetStatus " << when << ": " << s.error_message();
    for (int i = 0; i < workers; ++i) {
      EXPECT_TRUE(Alive(cluster.worker_pid(i))) << "worker " << i << " died " << when;
      GetWorkerStatusResponse ws;
      const grpc::Status w = cluster.WorkerStub(i)->GetWorkerStatus(RpcContext().get(), {}, &ws);
      EXPECT_TRUE(w.ok()) << "GetWorkerStatus of worker " << i << " " << when << ": "
                          << w.error_message();
    }
  }

  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  testing::ScopedTempDir dir_;
  std::string pipeline_;
  std::map<int64_t, DigestLine> local_;
  std::unique_ptr<Dispatcher::Stub> dispatcher_;
};

TEST_F(HostileClientTest, HostileRequestsDuringARunChangeNothing) {
  constexpr int kWorkers = 2;
  testing::LocalCluster cluster(dir_.Join("cluster"), {.workers = kWorkers});
  ASSERT_TRUE(cluster.ok());
  dispatcher_ = Dispatcher::NewStub(Channel(cluster.dispatcher_address()));
  auto worker = Worker::NewStub(Channel(cluster.worker_address(0)));

  // The legitimate job, slowed down by a simulated training step of 1 ms per batch (about 7 s
  // per epoch) so that it runs throughout.
  Subprocess run(
      {GRANARY_BINARY, "run", "--insecure", "--dispatcher=" + cluster.dispatcher_address(),
       "--pipeline=" + pipeline_, absl::StrCat("--epochs=", kEpochs), "--seed=7",
       "--job_name=legit", "--position_file=" + dir_.Join("position"),
       "--digest_out=" + dir_.Join("run.digest"), "--step_ms=1", "--stall_timeout_ms=30000"},
      Subprocess::Stderr::kMergeIntoStdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (testing::PositionRows(dir_.Join("position")) == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the run delivered nothing: " << run.ReadAll(std::chrono::seconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // The legitimate job, a task of its epoch 0 (with its generation), and a dataset.
  GetStatusResponse status;
  ASSERT_TRUE(dispatcher_->GetStatus(RpcContext().get(), {}, &status).ok());
  int64_t legit_job = -1;
  std::string legit_dataset;
  for (const JobState& job : status.state().jobs()) {
    if (job.name() == "legit") legit_job = job.job_id(), legit_dataset = job.dataset_id();
  }
  ASSERT_GE(legit_job, 0);
  TaskState legit_task;
  for (const TaskState& task : status.state().tasks()) {
    if (task.job_id() == legit_job && task.epoch() == 0) legit_task = task;
  }
  ASSERT_GT(legit_task.task_id(), 0);
  int64_t max_task_id = status.state().next_task_id() + 1000000;

  // ---- The fixed list of hostile dispatcher requests. ----
  const int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  const int32_t kInt32Max = std::numeric_limits<int32_t>::max();
  {
    // Defect 1: counts of 2^31-1 (and a product of counts) are refused before journaling.
    GetOrCreateJobRequest request;
    request.set_dataset_id(legit_dataset);
    request.mutable_options()->set_num_consumers(kInt32Max);
    request.mutable_options()->set_num_worker_slots(kInt32Max);
    GetOrCreateJobResponse job;
    grpc::Status s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob 2^31-1 x 2^31-1", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"num_consumers", "2147483647"});
    StartEpochRequest start;
    start.set_job_id(s.ok() ? job.job_id() : status.state().next_job_id());
    StartEpochResponse started;
    s = dispatcher_->StartEpoch(RpcContext().get(), start, &started);
    EXPECT_FALSE(s.ok()) << "StartEpoch of a job that should not exist";

    request.mutable_options()->set_num_consumers(1);
    s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob slots 2^31-1", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"num_worker_slots", "2147483647"});
    request.mutable_options()->set_num_consumers(4096);
    request.mutable_options()->set_num_worker_slots(4096);
    s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob 4096 x 4096", s, grpc::StatusCode::INVALID_ARGUMENT, {"16777216"});
    request.mutable_options()->set_num_consumers(-5);
    request.mutable_options()->set_num_worker_slots(1);
    s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob -5 consumers", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"num_consumers", "-5"});
    request.mutable_options()->set_num_consumers(1);
    request.mutable_options()->set_num_epochs(-1);
    s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob -1 epochs", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"num_epochs", "-1"});
    request.mutable_options()->set_num_epochs(0);
    request.set_dataset_id("no-such-dataset");
    s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob unknown dataset", s, grpc::StatusCode::NOT_FOUND,
                {"no-such-dataset"});
    // Once answered with an error quoting the whole id: a 1 MiB header that gRPC refused, which
    // also broke the channel for every later call ("received initial metadata size exceeds
    // limit"). Ids are bounded now, and any error message is cut to fit on the wire.
    request.set_dataset_id(std::string(1 << 20, 'd'));
    s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob with a 1 MiB dataset id", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"dataset id", "1024"});
    request.set_dataset_id(legit_dataset);
    request.set_name(std::string(2000, 'n'));
    s = dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job);
    ExpectError("GetOrCreateJob 2000-byte name", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"job name", "1024"});

    start.set_job_id(kInt64Max);
    s = dispatcher_->StartEpoch(RpcContext().get(), start, &started);
    EXPECT_FALSE(s.ok()) << "StartEpoch of job INT64_MAX";
    start.set_job_id(legit_job);
    start.set_epoch(kInt64Max);
    s = dispatcher_->StartEpoch(RpcContext().get(), start, &started);
    ExpectError("StartEpoch epoch INT64_MAX", s, grpc::StatusCode::FAILED_PRECONDITION,
                {std::to_string(kInt64Max)});
    start.set_epoch(-1);
    s = dispatcher_->StartEpoch(RpcContext().get(), start, &started);
    EXPECT_FALSE(s.ok()) << "StartEpoch epoch -1";
  }
  {
    // Defect 8: GetSplits with max INT64_MAX on a private one-task job of 10 splits returns all
    // of them, then end of splits.
    RegisterDatasetRequest dataset;
    *dataset.mutable_pipeline() = Pipeline(
        R"({"source": {"type": "range", "params": {"stop": 100, "elements_per_split": 10}}})");
    RegisterDatasetResponse registered;
    ASSERT_TRUE(dispatcher_->RegisterDataset(RpcContext().get(), dataset, &registered).ok());
    GetOrCreateJobRequest request;
    request.set_dataset_id(registered.dataset_id());
    request.mutable_options()->set_num_consumers(1);
    request.mutable_options()->set_num_worker_slots(1);
    GetOrCreateJobResponse job;
    ASSERT_TRUE(dispatcher_->GetOrCreateJob(RpcContext().get(), request, &job).ok());
    StartEpochRequest start;
    start.set_job_id(job.job_id());
    StartEpochResponse started;
    ASSERT_TRUE(dispatcher_->StartEpoch(RpcContext().get(), start, &started).ok());
    ClientHeartbeatRequest heartbeat;
    heartbeat.set_job_id(job.job_id());
    ClientHeartbeatResponse tasks;
    ASSERT_TRUE(dispatcher_->ClientHeartbeat(RpcContext().get(), heartbeat, &tasks).ok());
    ASSERT_EQ(tasks.tasks_size(), 1);
    GetSplitsRequest splits;
    splits.set_task_id(tasks.tasks(0).task_id());
    splits.set_max(kInt64Max);
    GetSplitsResponse leased;
    grpc::Status s = dispatcher_->GetSplits(RpcContext().get(), splits, &leased);
    ASSERT_TRUE(s.ok()) << "GetSplits max INT64_MAX: " << s.error_message();
    EXPECT_EQ(leased.splits_size(), 10) << "GetSplits max INT64_MAX";
    splits.set_from_seq(10);
    s = dispatcher_->GetSplits(RpcContext().get(), splits, &leased);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(leased.end_of_splits());
    EXPECT_EQ(leased.splits_size(), 0);
    splits.set_from_seq(kInt64Max);
    s = dispatcher_->GetSplits(RpcContext().get(), splits, &leased);
    ExpectError("GetSplits from_seq INT64_MAX", s, grpc::StatusCode::OUT_OF_RANGE,
                {std::to_string(kInt64Max)});
    splits.set_from_seq(-1);
    s = dispatcher_->GetSplits(RpcContext().get(), splits, &leased);
    ExpectError("GetSplits from_seq -1", s, grpc::StatusCode::OUT_OF_RANGE, {"-1"});
    splits.set_from_seq(0);
    splits.set_max(-7);
    s = dispatcher_->GetSplits(RpcContext().get(), splits, &leased);
    ExpectError("GetSplits max -7", s, grpc::StatusCode::INVALID_ARGUMENT, {"max"});
    splits.set_max(1);
    splits.set_task_id(max_task_id);
    s = dispatcher_->GetSplits(RpcContext().get(), splits, &leased);
    ExpectError("GetSplits unknown task", s, grpc::StatusCode::NOT_FOUND,
                {std::to_string(max_task_id)});
    splits.set_task_id(-3);
    s = dispatcher_->GetSplits(RpcContext().get(), splits, &leased);
    ExpectError("GetSplits task -3", s, grpc::StatusCode::NOT_FOUND, {"-3"});
  }
  {
    // Defect 11 and 7: client heartbeats naming tasks the consumer does not own, negative
    // indices, and unknown jobs, epochs and consumers.
    ClientHeartbeatRequest request;
    request.set_job_id(legit_job);
    (*request.mutable_next_index())[max_task_id] = 5;
    ClientHeartbeatResponse response;
    grpc::Status s = dispatcher_->ClientHeartbeat(RpcContext().get(), request, &response);
    ExpectError("ClientHeartbeat fake task", s, grpc::StatusCode::INVALID_ARGUMENT,
                {std::to_string(max_task_id)});
    request.mutable_next_index()->clear();
    (*request.mutable_next_index())[legit_task.task_id()] = -1;
    s = dispatcher_->ClientHeartbeat(RpcContext().get(), request, &response);
    ExpectError("ClientHeartbeat negative index", s, grpc::StatusCode::INVALID_ARGUMENT,
                {std::to_string(legit_task.task_id()), "-1"});
    request.mutable_next_index()->clear();
    // The private job's task is foreign to the legitimate job's consumer.
    (*request.mutable_next_index())[status.state().next_task_id()] = 1;
    s = dispatcher_->ClientHeartbeat(RpcContext().get(), request, &response);
    ExpectError("ClientHeartbeat foreign task", s, grpc::StatusCode::INVALID_ARGUMENT,
                {std::to_string(status.state().next_task_id())});
    request.mutable_next_index()->clear();
    request.set_consumer(7);
    s = dispatcher_->ClientHeartbeat(RpcContext().get(), request, &response);
    ExpectError("ClientHeartbeat consumer 7", s, grpc::StatusCode::INVALID_ARGUMENT, {"7"});
    request.set_consumer(-1);
    s = dispatcher_->ClientHeartbeat(RpcContext().get(), request, &response);
    ExpectError("ClientHeartbeat consumer -1", s, grpc::StatusCode::INVALID_ARGUMENT, {"-1"});
    request.set_consumer(0);
    request.set_epoch(kInt64Max);
    s = dispatcher_->ClientHeartbeat(RpcContext().get(), request, &response);
    ExpectError("ClientHeartbeat epoch INT64_MAX", s, grpc::StatusCode::NOT_FOUND,
                {std::to_string(kInt64Max)});
    request.set_epoch(0);
    request.set_job_id(-9);
    s = dispatcher_->ClientHeartbeat(RpcContext().get(), request, &response);
    ExpectError("ClientHeartbeat job -9", s, grpc::StatusCode::NOT_FOUND, {"-9"});
  }
  {
    // TaskFinished for unknown tasks, at a wrong generation, with a negative count.
    TaskFinishedRequest request;
    request.set_task_id(max_task_id);
    TaskFinishedResponse response;
    grpc::Status s = dispatcher_->TaskFinished(RpcContext().get(), request, &response);
    ExpectError("TaskFinished unknown task", s, grpc::StatusCode::NOT_FOUND,
                {std::to_string(max_task_id)});
    request.set_task_id(legit_task.task_id());
    request.set_generation(legit_task.generation());
    request.set_num_elements(-1);
    s = dispatcher_->TaskFinished(RpcContext().get(), request, &response);
    ExpectError("TaskFinished -1 elements", s, grpc::StatusCode::INVALID_ARGUMENT,
                {std::to_string(legit_task.task_id()), "-1"});
    request.set_generation(legit_task.generation() + 1000);
    request.set_num_elements(3);
    s = dispatcher_->TaskFinished(RpcContext().get(), request, &response);
    // Refused, unless the task already finished (a repeated report is acknowledged).
    if (!s.ok()) {
      ExpectError("TaskFinished wrong generation", s, grpc::StatusCode::FAILED_PRECONDITION,
                  {std::to_string(legit_task.task_id()), "generation"});
    }
  }
  {
    // Reports that change nothing are not journaled: 1000 reports of a task at a wrong
    // generation leave (almost: the run's own leases go on) no record in the journal.
    TaskFinishedRequest request;
    request.set_task_id(legit_task.task_id());
    request.set_generation(legit_task.generation() + 1000);
    request.set_num_elements(3);
    GetStatusResponse before, after;
    ASSERT_TRUE(dispatcher_->GetStatus(RpcContext().get(), {}, &before).ok());
    for (int i = 0; i < 1000; ++i) {
      TaskFinishedResponse response;
      const grpc::Status s = dispatcher_->TaskFinished(RpcContext().get(), request, &response);
      if (!s.ok() && s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
        ADD_FAILURE() << "TaskFinished at a wrong generation: " << s.error_message();
        break;
      }
    }
    ASSERT_TRUE(dispatcher_->GetStatus(RpcContext().get(), {}, &after).ok());
    EXPECT_LT(after.state().applied_seq() - before.state().applied_seq(), 250u)
        << "journal records for 1000 TaskFinished reports at a wrong generation";
  }
  {
    // Worker heartbeats from strangers and stale incarnations; registrations with empty and
    // huge ids.
    WorkerHeartbeatRequest request;
    request.set_worker_id("stranger");
    WorkerHeartbeatResponse response;
    grpc::Status s = dispatcher_->WorkerHeartbeat(RpcContext().get(), request, &response);
    ExpectError("WorkerHeartbeat stranger", s, grpc::StatusCode::FAILED_PRECONDITION, {"stranger"});
    request.set_worker_id(cluster.worker_id(0));
    request.set_incarnation(kInt64Max);
    s = dispatcher_->WorkerHeartbeat(RpcContext().get(), request, &response);
    ExpectError("WorkerHeartbeat stale incarnation", s, grpc::StatusCode::FAILED_PRECONDITION,
                {cluster.worker_id(0), std::to_string(kInt64Max)});
    request.set_worker_id(std::string(1 << 20, 'w'));
    request.set_incarnation(1);
    s = dispatcher_->WorkerHeartbeat(RpcContext().get(), request, &response);
    EXPECT_FALSE(s.ok()) << "WorkerHeartbeat with a 1 MiB id";
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_LT(s.error_message().size(), 2048u) << "WorkerHeartbeat with a 1 MiB id";

    RegisterWorkerRequest registration;
    registration.set_worker_id(std::string(2000, 'w'));
    registration.set_address("127.0.0.1:1");
    RegisterWorkerResponse registered;
    s = dispatcher_->RegisterWorker(RpcContext().get(), registration, &registered);
    ExpectError("RegisterWorker 2000-byte id", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"worker id", "1024"});
    registration.set_worker_id("");
    s = dispatcher_->RegisterWorker(RpcContext().get(), registration, &registered);
    ExpectError("RegisterWorker empty id", s, grpc::StatusCode::INVALID_ARGUMENT, {"worker_id"});
    registration.set_worker_id("w-no-address");
    registration.set_address("");
    s = dispatcher_->RegisterWorker(RpcContext().get(), registration, &registered);
    ExpectError("RegisterWorker empty address", s, grpc::StatusCode::INVALID_ARGUMENT, {"address"});
    registration.set_address(std::string(3000, 'a'));
    s = dispatcher_->RegisterWorker(RpcContext().get(), registration, &registered);
    ExpectError("RegisterWorker 3000-byte address", s, grpc::StatusCode::INVALID_ARGUMENT,
                {"address", "1024"});
  }
  {
    // Defect 2 and 12: pipelines that are invalid or would allocate without bound are refused
    // at registration; a request above gRPC's 4 MiB limit is refused by the transport.
    const struct {
      const char* ops;
      const char* message;
    } cases[] = {
        {R"({"op": "no_such_op"})", "no_such_op"},
        {R"({"op": "batch", "params": {"batch_size": 1e11}})", "batch_size"},
        {R"({"op": "batch", "params": {"batch_size": 0}})", "batch_size"},
        {R"({"op": "shuffle", "params": {"buffer_size": 0}})", "buffer_size"},
        {R"({"op": "map", "udf": "fill_bytes", "udfParams": {"bytes": 3}},
            {"op": "map", "udf": "resize", "udfParams": {"height": 1e6, "width": 1e6}})",
         "height"},
    };
    for (const auto& c : cases) {
      RegisterDatasetRequest request;
      *request.mutable_pipeline() = Pipeline(absl::StrCat(
          R"({"source": {"type": "range", "params": {"stop": 10}}, "ops": [)", c.ops, "]}"));
      RegisterDatasetResponse response;
      const grpc::Status s = dispatcher_->RegisterDataset(RpcContext().get(), request, &response);
      ExpectError(absl::StrCat("RegisterDataset ", c.ops), s, grpc::StatusCode::INVALID_ARGUMENT,
                  {c.message});
      if (s.ok()) {
        // Accepted: an epoch of it must still not kill a worker.
        GetOrCreateJobRequest job_request;
        job_request.set_dataset_id(response.dataset_id());
        job_request.mutable_options()->set_num_consumers(1);
        job_request.mutable_options()->set_num_worker_slots(1);
        GetOrCreateJobResponse job;
        if (dispatcher_->GetOrCreateJob(RpcContext().get(), job_request, &job).ok()) {
          StartEpochRequest start;
          start.set_job_id(job.job_id());
          StartEpochResponse started;
          dispatcher_->StartEpoch(RpcContext().get(), start, &started);
        }
      }
    }
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = Pipeline(absl::StrCat(
        R"({"source": {"type": "range", "params": {"stop": 10}}, "ops": [)",
        R"({"op": "mark", "params": {"name": ")", std::string(5 << 20, 'x'), R"("}}]})"));
    RegisterDatasetResponse response;
    const grpc::Status s = dispatcher_->RegisterDataset(RpcContext().get(), request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << "RegisterDataset of 5 MiB: " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("message larger than max"));
  }
  {
    // The worker: unknown tasks, a wrong generation, a negative index, huge byte counts.
    GetElementsRequest request;
    request.set_task_id(max_task_id);
    request.set_max_bytes(kInt64Max);
    GetElementsResponse response;
    grpc::Status s = worker->GetElements(RpcContext().get(), request, &response);
    ExpectError("GetElements unknown task", s, grpc::StatusCode::NOT_FOUND,
                {std::to_string(max_task_id)});
    request.set_task_id(-1);
    request.set_from_index(-5);
    s = worker->GetElements(RpcContext().get(), request, &response);
    EXPECT_FALSE(s.ok()) << "GetElements task -1 from -5";
    EXPECT_THAT(s.error_message(), HasSubstr("-")) << "GetElements task -1 from -5";
    // A legitimate task at a generation it does not run (on whichever worker runs it).
    for (int i = 0; i < kWorkers; ++i) {
      request.set_task_id(legit_task.task_id());
      request.set_generation(legit_task.generation() + 1000);
      request.set_from_index(kInt64Max);
      s = cluster.WorkerStub(i)->GetElements(RpcContext().get(), request, &response);
      EXPECT_FALSE(s.ok()) << "GetElements at generation +1000 on worker " << i;
      EXPECT_TRUE(s.error_code() == grpc::StatusCode::NOT_FOUND ||
                  s.error_code() == grpc::StatusCode::FAILED_PRECONDITION)
          << "worker " << i << ": " << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr(std::to_string(legit_task.task_id())));
    }
  }
  ExpectServersUp(cluster, kWorkers, "after the fixed hostile requests");

  // ---- Floods: memory stays bounded. ----
  {
    const int64_t dispatcher_before = RssKb(cluster.dispatcher_pid());
    const int64_t worker_before = RssKb(cluster.worker_pid(0));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        auto stub = Dispatcher::NewStub(Channel(cluster.dispatcher_address()));
        auto worker_stub = Worker::NewStub(Channel(cluster.worker_address(0)));
        // 250 x 1000 fake task ids per thread: 1 M fake ids in all.
        for (int i = 0; i < 250; ++i) {
          ClientHeartbeatRequest request;
          request.set_job_id(legit_job);
          for (int k = 0; k < 1000; ++k) {
            (*request.mutable_next_index())[max_task_id + (int64_t{t} * 250 + i) * 1000 + k] = k;
          }
          ClientHeartbeatResponse response;
          const grpc::Status s = stub->ClientHeartbeat(RpcContext().get(), request, &response);
          if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
            ADD_FAILURE() << "flood ClientHeartbeat: " << s.error_code() << " "
                          << s.error_message();
            return;
          }
        }
        // Strangers' heartbeats, each with a new id, and unknown tasks at the worker.
        for (int i = 0; i < 2500; ++i) {
          WorkerHeartbeatRequest request;
          request.set_worker_id(absl::StrCat("stranger-", t, "-", i, std::string(200, 's')));
          WorkerHeartbeatResponse response;
          const grpc::Status s = stub->WorkerHeartbeat(RpcContext().get(), request, &response);
          if (s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
            ADD_FAILURE() << "flood WorkerHeartbeat: " << s.error_code() << " "
                          << s.error_message();
            return;
          }
          GetElementsRequest get;
          get.set_task_id(max_task_id + t * 2500 + i);
          GetElementsResponse elements;
          const grpc::Status g = worker_stub->GetElements(RpcContext().get(), get, &elements);
          if (g.error_code() != grpc::StatusCode::NOT_FOUND) {
            ADD_FAILURE() << "flood GetElements: " << g.error_code() << " " << g.error_message();
            return;
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    const int64_t dispatcher_after = RssKb(cluster.dispatcher_pid());
    const int64_t worker_after = RssKb(cluster.worker_pid(0));
    // Under AddressSanitizer freed memory waits in its quarantine (256 MiB) and every byte has
    // shadow memory: resident memory says nothing of Granary's bounds there.
    if (!GRANARY_ASAN) {
      EXPECT_LT(dispatcher_after - dispatcher_before, kMaxGrowthKb)
          << "dispatcher VmRSS " << dispatcher_before << " kB -> " << dispatcher_after
          << " kB after 1 M fake task ids and 10 000 strangers' heartbeats";
      EXPECT_LT(worker_after - worker_before, kMaxGrowthKb)
          << "worker VmRSS " << worker_before << " kB -> " << worker_after
          << " kB after 10 000 GetElements of unknown tasks";
    }
  }
  ExpectServersUp(cluster, kWorkers, "after the floods");

  // ---- Random bytes as the body of every method. ----
  {
    const std::vector<std::string> dispatcher_methods = {
        "RegisterDataset", "GetOrCreateJob", "StartEpoch",   "RegisterWorker", "WorkerHeartbeat",
        "ClientHeartbeat", "GetSplits",      "TaskFinished", "GetStatus"};
    const std::vector<std::string> worker_methods = {"GetElements", "GetWorkerStatus"};
    grpc::GenericStub dispatcher_generic(Channel(cluster.dispatcher_address()));
    grpc::GenericStub worker_generic(Channel(cluster.worker_address(0)));
    std::mt19937_64 random(kSeed);
    std::map<int, int> accepted, refused;
    bool failed = false;
    auto send = [&](grpc::GenericStub& stub, const std::string& method, int round) {
      // Short bodies, long ones, and ones of valid-looking tags with random values.
      const size_t size = round % 3 == 0 ? random() % 16 : random() % 4096;
      std::string body(size, '\0');
      for (char& c : body) c = static_cast<char>(random());
      if (round % 3 == 2) {
        // Fields 1..5 as varints of random 64-bit values: a request of the method's type when
        // its fields are integers (ids far from any real one: no real task is touched).
        body.clear();
        for (int field = 1; field <= 5; ++field) {
          body.push_back(static_cast<char>(field << 3));
          for (uint64_t v = random() | (uint64_t{1} << 40);; v >>= 7) {
            if (v < 0x80) {
              body.push_back(static_cast<char>(v));
              break;
            }
            body.push_back(static_cast<char>((v & 0x7f) | 0x80));
          }
        }
      }
      grpc::Slice slice(body);
      grpc::ByteBuffer request(&slice, 1);
      grpc::ByteBuffer response;
      auto context = RpcContext();
      grpc::Status status;
      bool done = false;
      absl::Mutex mu;
      stub.UnaryCall(context.get(), method, grpc::StubOptions(), &request, &response,
                     [&](grpc::Status s) {
                       absl::MutexLock lock(&mu);
                       status = std::move(s);
                       done = true;
                     });
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&done));
      failed |= status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                (!status.ok() && status.error_code() != grpc::StatusCode::INTERNAL &&
                 status.error_message().empty());
      EXPECT_NE(status.error_code(), grpc::StatusCode::UNAVAILABLE)
          << method << " round " << round << " (seed " << kSeed << "): " << status.error_message();
      EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
          << method << " round " << round << " (seed " << kSeed << ")";
      // A body that is no message of the method's request type is INTERNAL from gRPC itself
      // (with no message); anything that parses must be answered as the request it is.
      if (!status.ok() && status.error_code() != grpc::StatusCode::INTERNAL) {
        EXPECT_FALSE(status.error_message().empty()) << method << " round " << round << " (seed "
                                                     << kSeed << "): code " << status.error_code();
      }
      ++(status.ok() ? accepted : refused)[status.error_code()];
    };
    // Stop at the first round that fails.
    for (int round = 0; round < 600; ++round) {
      for (const std::string& m : dispatcher_methods) {
        send(dispatcher_generic, "/granary.Dispatcher/" + m, round);
      }
      for (const std::string& m : worker_methods)
        send(worker_generic, "/granary.Worker/" + m, round);
      if (failed) break;
    }
    for (const auto& [code, n] : refused)
      std::fprintf(stderr, "random bytes: %d x code %d\n", n, code);
    std::fprintf(stderr, "random bytes: %d accepted\n", accepted[0]);
  }
  ExpectServersUp(cluster, kWorkers, "after random bytes (seed " + std::to_string(kSeed) + ")");

  // ---- The legitimate job saw none of it. ----
  EXPECT_TRUE(Alive(run.pid())) << "the run ended before the hostile requests did";
  const std::string output = run.ReadAll(std::chrono::seconds(60));
  std::fprintf(stderr, "%.1f s: the run ended\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  ASSERT_EQ(run.Wait(), 0) << output;
  const auto digests = ReadDigests(dir_.Join("run.digest"));
  ASSERT_EQ(digests.size(), static_cast<size_t>(kEpochs)) << output;
  for (const auto& [epoch, d] : digests) {
    EXPECT_EQ(d.rows, kRows) << "epoch " << epoch;
    EXPECT_EQ(d.multiset, local_.at(epoch).multiset) << "epoch " << epoch;
  }
  ExpectServersUp(cluster, kWorkers, "after the run");

  // ---- The dispatcher restarts on its journal (defect 1), with none of the hostile jobs. ----
  cluster.StopDispatcher(SIGKILL);
  ASSERT_TRUE(cluster.RestartDispatcher()) << "the dispatcher did not restart on its journal";
  ExpectServersUp(cluster, kWorkers, "after the dispatcher's restart");
  ASSERT_TRUE(dispatcher_->GetStatus(RpcContext().get(), {}, &status).ok());
  bool found = false;
  for (const JobState& job : status.state().jobs()) {
    EXPECT_LE(int64_t{job.options().num_consumers()} * job.options().num_worker_slots(), 65536)
        << "job " << job.job_id();
    if (job.job_id() == legit_job) {
      found = true;
      EXPECT_EQ(job.epochs_started(), kEpochs);
    }
  }
  EXPECT_TRUE(found) << "the legitimate job is gone after the restart";
  cluster.StopDispatcher(SIGTERM);
  ASSERT_TRUE(cluster.RestartDispatcher()) << "no restart after SIGTERM";
  ExpectServersUp(cluster, kWorkers, "after the dispatcher's second restart");
}

// A `udfParams` value nested 60 levels deep parsed from JSON, and then the dispatcher's gRPC
// server could not parse the request (protobuf parses 100 message levels): `granary run` and
// the client library got INTERNAL with an empty message. They refuse it now, naming the op, the
// UDF and the limit, before anything is sent; the dispatcher keeps serving.
TEST(HostilePipelineTest, ParamsNestedTooDeepAreRefusedNamingTheOpAndTheLimit) {
  testing::ScopedTempDir dir;
  testing::LocalCluster cluster(dir.Join("cluster"), {.workers = 1});
  ASSERT_TRUE(cluster.ok());
  constexpr int kDepth = 60;
  std::string nested = "1";
  for (int i = 0; i < kDepth; ++i) nested = absl::StrCat(R"({"n": )", nested, "}");
  const std::string json =
      absl::StrCat(R"({"source": {"type": "range", "params": {"stop": 10}}, "ops": [)",
                   R"({"op": "map", "udf": "add", "udfParams": {"value": )", nested, "}}]}");
  const std::vector<std::string> names = {"op 0 (map, udf 'add')", "udfParams 'value'", "16 levels",
                                          "kMaxParamNesting"};

  // `granary run` with the pipeline file.
  const std::string path = dir.Join("deep.json");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, json, false).ok());
  Subprocess run(
      {GRANARY_BINARY, "run", "--insecure", "--dispatcher=" + cluster.dispatcher_address(),
       "--pipeline=" + path, "--epochs=1"},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = run.ReadAll(std::chrono::seconds(30));
  EXPECT_NE(run.Wait(), 0) << output;
  EXPECT_THAT(output, HasSubstr("INVALID_ARGUMENT")) << output;
  for (const std::string& name : names) EXPECT_THAT(output, HasSubstr(name)) << output;

  // The client library, with the same pipeline built in code (no JSON on the way).
  PipelineDef def = Pipeline(R"({"source": {"type": "range", "params": {"stop": 10}},
                                 "ops": [{"op": "map", "udf": "add"}]})");
  google::protobuf::Value value;
  value.set_number_value(1);
  for (int i = 0; i < kDepth; ++i) {
    google::protobuf::Value outer;
    (*outer.mutable_struct_value()->mutable_fields())["n"] = std::move(value);
    value = std::move(outer);
  }
  (*def.mutable_ops(0)->mutable_udf_params()->mutable_fields())["value"] = std::move(value);
  auto client =
      Client::Connect({.dispatcher_address = cluster.dispatcher_address(), .insecure = true});
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::StatusOr<std::string> dataset = (*client)->RegisterPipeline(def);
  EXPECT_TRUE(absl::IsInvalidArgument(dataset.status())) << dataset.status();
  for (const std::string& name : names) {
    EXPECT_THAT(std::string(dataset.status().message()), HasSubstr(name));
  }

  // The dispatcher is up and registers a sane pipeline.
  EXPECT_TRUE(Alive(cluster.dispatcher_pid()));
  const absl::StatusOr<std::string> sane = (*client)->RegisterPipeline(
      Pipeline(R"({"source": {"type": "range", "params": {"stop": 10}}})"));
  EXPECT_TRUE(sane.ok()) << sane.status();
}

}  // namespace
}  // namespace granary
