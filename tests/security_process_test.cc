// Security of a shared cluster against real dispatcher and worker processes (issue 15; the
// threat model is SECURITY.md): each attack that worked before now fails.
//  * Sources confined to data roots: a pipeline reading /etc/passwd, a glob climbing out of the
//    data root with "..", and a symlink inside the root that points out are refused at
//    registration (PermissionDenied naming the path), and a worker refuses to open a file
//    outside its own roots even when a dispatcher with wider roots accepted the pipeline. A
//    pipeline cannot name a plugin to load. A line without end or a FIFO inside a root fails its
//    task naming it, and the worker lives on.
//  * TLS with identities (certificates made by the openssl tool): a plain-text peer reaches
//    nothing; a TLS peer without a Granary certificate is Unauthenticated on every RPC; a client
//    certificate cannot register as a worker, a worker's cannot register as another worker, call
//    client RPCs, or lease and finish another worker's task — so a forged TaskFinished no longer
//    empties another job's epoch; and a server refuses to start without a choice of transport
//    security.
//  * Per-job isolation: only a job's owner (by certificate or bearer token) and the clients its
//    ACL names may open it, start its epochs or heartbeat for it; an unknown token is
//    Unauthenticated; a worker serves a task only against the capability the dispatcher gave
//    that task's reader — another job's capability or a forged one reads nothing.
//  * Per-client limits: jobs, consumers, pipeline ops and bytes and message size, each refused
//    as ResourceExhausted naming its flag.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline_loader.h"
#include "proto/dispatcher.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "security/peer_identity.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_certificates.h"
#include "tests/local_cluster.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// Reads `reader` to its end: the elements read, or the first error.
absl::StatusOr<int> ReadToEnd(EpochReader& reader) {
  int elements = 0;
  ElementProto element;
  for (bool end = false;;) {
    if (absl::Status status = reader.Next(&element, &end); !status.ok()) return status;
    if (end) return elements;
    ++elements;
  }
}

// Opens job `spec` of `dataset` and reads its epoch 0 to the end (ReadToEnd).
absl::StatusOr<int> ReadEpochZero(Client& client, const std::string& dataset, const JobSpec& spec) {
  absl::StatusOr<std::unique_ptr<Job>> job = client.OpenJob(dataset, spec);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::unique_ptr<EpochReader>> reader = (*job)->ReadEpoch(0);
  if (!reader.ok()) return reader.status();
  return ReadToEnd(**reader);
}

class DataRootsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.Join("data");
    ASSERT_TRUE(Env::Default()->CreateDirs(data_).ok());
    ASSERT_TRUE(WriteStringToFile(Env::Default(), data_ + "/lines.txt", "a\nb\nc\n", false).ok());
    ASSERT_TRUE(WriteStringToFile(Env::Default(), dir_.Join("outside.txt"), "x\n", false).ok());
  }

  // A cluster whose dispatcher and worker may read `data_` only.
  std::unique_ptr<testing::LocalCluster> StartCluster(std::vector<std::string> worker_flags = {},
                                                      std::vector<std::string> roots = {}) {
    if (roots.empty()) roots = {data_};
    auto cluster = std::make_unique<testing::LocalCluster>(
        dir_.Join("cluster"), testing::LocalClusterOptions{
                                  .workers = 1, .worker_flags = worker_flags, .data_roots = roots});
    EXPECT_TRUE(cluster->ok());
    return cluster;
  }

  std::unique_ptr<Client> Connect(const testing::LocalCluster& cluster) {
    auto client = Client::Connect({.dispatcher_address = cluster.dispatcher_address(),
                                   .stall_timeout_ms = 2000,
                                   .insecure = true});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  testing::ScopedTempDir dir_;
  std::string data_;
};

TEST_F(DataRootsProcessTest, AFileInsideTheDataRootIsRead) {
  auto cluster = StartCluster();
  auto client = Connect(*cluster);
  auto dataset = client->RegisterPipeline(PipelineBuilder::TextLines({data_ + "/*.txt"}).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const absl::StatusOr<int> rows = ReadEpochZero(*client, *dataset, {.name = "inside"});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, 3);
}

TEST_F(DataRootsProcessTest, ReadingEtcPasswdIsRefusedAtRegistration) {
  auto cluster = StartCluster();
  auto client = Connect(*cluster);
  const absl::StatusOr<std::string> dataset =
      client->RegisterPipeline(PipelineBuilder::TextLines({"/etc/passwd"}).Build());
  EXPECT_TRUE(absl::IsPermissionDenied(dataset.status())) << dataset.status();
  EXPECT_THAT(dataset.status().message(),
              AllOf(HasSubstr("'/etc/passwd'"), HasSubstr("outside the data roots")));
}

TEST_F(DataRootsProcessTest, AGlobClimbingOutOfTheRootIsRefusedBeforeListing) {
  auto cluster = StartCluster();
  auto client = Connect(*cluster);
  const std::string pattern = data_ + "/../../*";
  const absl::StatusOr<std::string> dataset =
      client->RegisterPipeline(PipelineBuilder::TextLines({pattern}).Build());
  EXPECT_TRUE(absl::IsPermissionDenied(dataset.status())) << dataset.status();
  EXPECT_THAT(dataset.status().message(), HasSubstr("'" + pattern + "' lists"));
}

TEST_F(DataRootsProcessTest, APathCutShortByANulByteIsRefused) {
  // Checked component by component it names data/lines.txt; opened, it would be outside.txt.
  auto cluster = StartCluster();
  auto client = Connect(*cluster);
  const std::string path = data_ + "/../outside.txt" + std::string(1, '\0') + "/../data/lines.txt";
  const absl::StatusOr<std::string> dataset =
      client->RegisterPipeline(PipelineBuilder::TextLines({path}).Build());
  EXPECT_TRUE(absl::IsPermissionDenied(dataset.status())) << dataset.status();
  EXPECT_THAT(std::string(dataset.status().message()), HasSubstr("holds a NUL byte"));
}

TEST_F(DataRootsProcessTest, ASymlinkOutOfTheRootIsRefused) {
  ASSERT_EQ(::symlink(dir_.Join("outside.txt").c_str(), (data_ + "/link.txt").c_str()), 0);
  auto cluster = StartCluster();
  auto client = Connect(*cluster);
  const absl::StatusOr<std::string> dataset =
      client->RegisterPipeline(PipelineBuilder::TextLines({data_ + "/link.txt"}).Build());
  EXPECT_TRUE(absl::IsPermissionDenied(dataset.status())) << dataset.status();
  EXPECT_THAT(dataset.status().message(), HasSubstr("outside.txt'"));
}

TEST_F(DataRootsProcessTest, AWorkerWithoutRootsReadsNoFileEvenWhenTheDispatcherAccepted) {
  // The dispatcher may read the whole scratch directory; the worker, started without
  // --data_roots (its flags come last and win), may read nothing.
  auto cluster = StartCluster({"--data_roots="}, {dir_.path()});
  auto client = Connect(*cluster);
  auto dataset =
      client->RegisterPipeline(PipelineBuilder::TextLines({dir_.Join("outside.txt")}).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  // The reader retries a failing task (it may move to another worker) until its stall timeout,
  // then gives up naming the worker's error.
  const absl::Status status =
      ReadEpochZero(*client, *dataset, {.name = "refused-by-worker"}).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), AllOf(HasSubstr("PERMISSION_DENIED"), HasSubstr("outside.txt'"),
                                      HasSubstr("no data roots are configured (--data_roots)")));
}

// Hostile files inside a data root fail the task reading them, at once and naming them, and the
// worker keeps serving: an endless line (an 8 GiB sparse file without a newline, which used to
// grow the worker until it was killed) and a FIFO (which used to block the task in open()
// forever).
TEST_F(DataRootsProcessTest, AnEndlessLineOrAFifoFailsItsTaskAndTheWorkerKeepsServing) {
  const std::string endless = data_ + "/endless.txt";
  const int fd = ::open(endless.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{8} << 30), 0);
  ::close(fd);
  const std::string fifo = data_ + "/pipe.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto cluster = StartCluster();
  auto client = Connect(*cluster);
  const pid_t worker = cluster->worker_pid(0);

  const struct {
    std::string job;
    std::string file;
    absl::StatusCode code;
    std::string error;
  } cases[] = {
      {"endless", endless, absl::StatusCode::kDataLoss,
       endless + ": the line at offset 0 has no \"\\n\" within max_record_bytes (256 MiB)"},
      {"fifo", fifo, absl::StatusCode::kInvalidArgument,
       "/pipe.txt is a FIFO (named pipe), not a regular file"},
  };
  for (const auto& c : cases) {
    auto dataset = client->RegisterPipeline(PipelineBuilder::TextLines({c.file}).Build());
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    const absl::Time start = absl::Now();
    const absl::Status status = ReadEpochZero(*client, *dataset, {.name = c.job}).status();
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.error));
    EXPECT_LT(absl::Now() - start, absl::Seconds(60)) << c.file;
    EXPECT_EQ(::kill(worker, 0), 0) << "the worker died reading " << c.file;
  }
  auto dataset =
      client->RegisterPipeline(PipelineBuilder::TextLines({data_ + "/lines.txt"}).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const absl::StatusOr<int> rows = ReadEpochZero(*client, *dataset, {.name = "after"});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, 3);
  EXPECT_EQ(cluster->worker_pid(0), worker);
}

TEST_F(DataRootsProcessTest, APipelineCannotNameAPluginToLoad) {
  // Plugins (native code) load only from the operator's --plugin flags; a pipeline naming one
  // anywhere is refused at registration, naming the parameter.
  auto cluster = StartCluster();
  auto client = Connect(*cluster);
  const std::string library = dir_.Join("evil.so");
  for (const char* json :
       {R"({"source": {"type": "range", "params": {"stop": 10, "plugin": "LIB"}}})",
        R"({"source": {"type": "range", "params": {"stop": 10}},
            "ops": [{"op": "map", "udf": "random_flip", "udfParams": {"plugin": "LIB"}}]})",
        R"({"source": {"type": "range", "params": {"stop": 10}},
            "ops": [{"op": "map", "udf": "random_flip", "params": {"plugin": "LIB"}}]})"}) {
    std::string text = json;
    text.replace(text.find("LIB"), 3, library);
    const absl::StatusOr<PipelineDef> def = ParsePipelineJson(text, "test");
    ASSERT_TRUE(def.ok()) << def.status();
    const absl::StatusOr<std::string> dataset = client->RegisterPipeline(*def);
    EXPECT_TRUE(absl::IsInvalidArgument(dataset.status())) << dataset.status();
    EXPECT_THAT(std::string(dataset.status().message()), HasSubstr("plugin")) << text;
  }
}

constexpr char kAliceToken[] = "alice-0123456789abcdef";
constexpr char kMalloryToken[] = "mallory-0123456789abcdef";

class TlsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("tls")).ok());
    certificates_ = std::make_unique<testing::TestCertificates>(dir_.Join("tls"));
    ASSERT_TRUE(certificates_->ok());
    ASSERT_TRUE(
        WriteStringToFile(Env::Default(), dir_.Join("tokens.txt"),
                          absl::StrCat(kAliceToken, " alice\n", kMalloryToken, " mallory\n"), false)
            .ok());
    cluster_ = std::make_unique<testing::LocalCluster>(
        dir_.Join("cluster"),
        testing::LocalClusterOptions{
            .workers = 2,
            .dispatcher_flags = {"--tokens_file=" + dir_.Join("tokens.txt"),
                                 "--admin_clients=cluster-test,ops", "--python_udf_clients=alice",
                                 "--max_jobs_per_client=2",
                                 "--max_readers_per_client=3", "--max_pipeline_ops=8",
                                 "--max_pipeline_bytes=4096", "--max_message_bytes=65536"},
            .issue_certificate = [this](const std::string& name, const std::string& identity) {
              return certificates_->Issue(name, identity);
            }});
    ASSERT_TRUE(cluster_->ok());
  }

  std::shared_ptr<grpc::Channel> Channel(const std::string& address,
                                         const TransportSecurity& security) {
    return grpc::CreateChannel(address, ChannelCredentialsFor(security).value());
  }
  TransportSecurity ClientCertificate(const std::string& name) {
    return certificates_->Issue(name, ClientIdentityUri(name));
  }
  TransportSecurity WorkerCertificate(const std::string& id) {
    return certificates_->Issue(id, WorkerIdentityUri(id));
  }
  std::unique_ptr<Client> Connect(const TransportSecurity& security,
                                  const std::string& token = "") {
    auto client = Client::Connect({.dispatcher_address = cluster_->dispatcher_address(),
                                   .stall_timeout_ms = 20000,
                                   .tls_ca_file = security.ca_file,
                                   .tls_cert_file = security.cert_file,
                                   .tls_key_file = security.key_file,
                                   .bearer_token = token});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Every dispatcher and worker RPC through `dispatcher` and `worker`, each with an empty or
  // plausible request; returns their statuses by name.
  std::vector<std::pair<std::string, grpc::Status>> CallEveryRpc(Dispatcher::Stub& dispatcher,
                                                                 Worker::Stub& worker) {
    std::vector<std::pair<std::string, grpc::Status>> out;
    const auto call = [&out](const std::string& name,
                             const std::function<grpc::Status(grpc::ClientContext*)>& rpc) {
      out.emplace_back(name, rpc(testing::RpcContext().get()));
    };
    RegisterDatasetResponse dataset;
    call("RegisterDataset", [&](grpc::ClientContext* c) {
      RegisterDatasetRequest request;
      request.mutable_pipeline()->mutable_source()->set_type("range");
      return dispatcher.RegisterDataset(c, request, &dataset);
    });
    GetOrCreateJobResponse job;
    call("GetOrCreateJob",
         [&](grpc::ClientContext* c) { return dispatcher.GetOrCreateJob(c, {}, &job); });
    StartEpochResponse epoch;
    call("StartEpoch",
         [&](grpc::ClientContext* c) { return dispatcher.StartEpoch(c, {}, &epoch); });
    RegisterWorkerResponse registered;
    call("RegisterWorker", [&](grpc::ClientContext* c) {
      RegisterWorkerRequest request;
      request.set_worker_id("worker-0");
      request.set_address("127.0.0.1:1");
      return dispatcher.RegisterWorker(c, request, &registered);
    });
    WorkerHeartbeatResponse heartbeat;
    call("WorkerHeartbeat", [&](grpc::ClientContext* c) {
      WorkerHeartbeatRequest request;
      request.set_worker_id("worker-0");
      return dispatcher.WorkerHeartbeat(c, request, &heartbeat);
    });
    ClientHeartbeatResponse client_heartbeat;
    call("ClientHeartbeat", [&](grpc::ClientContext* c) {
      return dispatcher.ClientHeartbeat(c, {}, &client_heartbeat);
    });
    GetSplitsResponse splits;
    call("GetSplits", [&](grpc::ClientContext* c) {
      GetSplitsRequest request;
      request.set_task_id(1);
      request.set_max(1);
      return dispatcher.GetSplits(c, request, &splits);
    });
    TaskFinishedResponse finished;
    call("TaskFinished", [&](grpc::ClientContext* c) {
      TaskFinishedRequest request;
      request.set_task_id(1);
      return dispatcher.TaskFinished(c, request, &finished);
    });
    RecomputeCacheChunkResponse recompute;
    call("RecomputeCacheChunk", [&](grpc::ClientContext* c) {
      RecomputeCacheChunkRequest request;
      request.set_task_id(1);
      return dispatcher.RecomputeCacheChunk(c, request, &recompute);
    });
    ScaleJobResponse scaled;
    call("ScaleJob", [&](grpc::ClientContext* c) {
      ScaleJobRequest request;
      request.set_job_id(1);
      request.set_num_worker_slots(2);
      return dispatcher.ScaleJob(c, request, &scaled);
    });
    GetStatusResponse status;
    call("GetStatus", [&](grpc::ClientContext* c) { return dispatcher.GetStatus(c, {}, &status); });
    GetElementsResponse elements;
    call("GetElements", [&](grpc::ClientContext* c) {
      GetElementsRequest request;
      request.set_task_id(1);
      request.set_max_bytes(1);
      return worker.GetElements(c, request, &elements);
    });
    GetWorkerStatusResponse worker_status;
    call("GetWorkerStatus",
         [&](grpc::ClientContext* c) { return worker.GetWorkerStatus(c, {}, &worker_status); });
    return out;
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<testing::TestCertificates> certificates_;
  std::unique_ptr<testing::LocalCluster> cluster_;
};

TEST_F(TlsClusterTest, AClientWithItsCertificateReadsEveryElement) {
  auto client = Connect(ClientCertificate("alice"));
  auto dataset = client->RegisterPipeline(PipelineBuilder::Range(1000).Batch(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const absl::StatusOr<int> batches = ReadEpochZero(*client, *dataset, {.name = "tls"});
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(*batches, 100);
}

TEST_F(TlsClusterTest, PlainTextReachesNothing) {
  auto dispatcher = Dispatcher::NewStub(
      grpc::CreateChannel(cluster_->dispatcher_address(), grpc::InsecureChannelCredentials()));
  auto worker = Worker::NewStub(
      grpc::CreateChannel(cluster_->worker_address(0), grpc::InsecureChannelCredentials()));
  for (const auto& [rpc, status] : CallEveryRpc(*dispatcher, *worker)) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << rpc << ": " << status.error_message();
  }
}

TEST_F(TlsClusterTest, WithoutAGranaryCertificateEveryRpcIsUnauthenticated) {
  const TransportSecurity ca_only{.ca_file = certificates_->ca_file()};
  auto dispatcher = Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ca_only));
  auto worker = Worker::NewStub(Channel(cluster_->worker_address(0), ca_only));
  for (const auto& [rpc, status] : CallEveryRpc(*dispatcher, *worker)) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << rpc << ": " << status.error_message();
  }
}

TEST_F(TlsClusterTest, ACertificateFromAnotherCaIsRefusedAtTheHandshake) {
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("other")).ok());
  testing::TestCertificates other(dir_.Join("other"));
  const TransportSecurity forged = other.Issue("worker-0", WorkerIdentityUri("worker-0"));
  // It trusts the cluster's CA (so it completes its side), but presents a certificate the
  // cluster's CA did not sign.
  const TransportSecurity presented{.cert_file = forged.cert_file,
                                    .key_file = forged.key_file,
                                    .ca_file = certificates_->ca_file()};
  auto dispatcher = Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), presented));
  RegisterWorkerRequest request;
  request.set_worker_id("worker-0");
  request.set_address("127.0.0.1:1");
  RegisterWorkerResponse response;
  const grpc::Status status =
      dispatcher->RegisterWorker(testing::RpcContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(TlsClusterTest, AClientCertificateCannotActAsAWorker) {
  auto dispatcher =
      Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ClientCertificate("mallory")));
  RegisterWorkerRequest request;
  request.set_worker_id("worker-0");
  request.set_address("127.0.0.1:1");
  RegisterWorkerResponse response;
  const grpc::Status status =
      dispatcher->RegisterWorker(testing::RpcContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("RegisterWorker as worker 'worker-0' refused: the caller is client "
                        "'mallory'"));
  WorkerHeartbeatRequest heartbeat;
  heartbeat.set_worker_id("worker-0");
  WorkerHeartbeatResponse heartbeat_response;
  EXPECT_EQ(dispatcher->WorkerHeartbeat(testing::RpcContext().get(), heartbeat, &heartbeat_response)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(TlsClusterTest, AWorkerCertificateCannotRegisterAsAnotherWorkerNorCallClientRpcs) {
  const TransportSecurity w1 = WorkerCertificate("worker-1");
  auto dispatcher = Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), w1));
  RegisterWorkerRequest request;
  request.set_worker_id("worker-0");
  request.set_address("127.0.0.1:1");
  RegisterWorkerResponse response;
  const grpc::Status status =
      dispatcher->RegisterWorker(testing::RpcContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("the caller is worker 'worker-1'"));

  GetStatusResponse state;
  EXPECT_EQ(dispatcher->GetStatus(testing::RpcContext().get(), {}, &state).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  auto worker = Worker::NewStub(Channel(cluster_->worker_address(0), w1));
  GetElementsRequest get;
  get.set_task_id(1);
  get.set_max_bytes(1);
  GetElementsResponse elements;
  const grpc::Status read = worker->GetElements(testing::RpcContext().get(), get, &elements);
  EXPECT_EQ(read.error_code(), grpc::StatusCode::UNAUTHENTICATED) << read.error_message();
  EXPECT_THAT(read.error_message(), HasSubstr("needs the task's capability"));
}

TEST_F(TlsClusterTest, AForgedTaskFinishedNoLongerEmptiesAnotherJobsEpoch) {
  auto client = Connect(ClientCertificate("alice"));
  auto dataset = client->RegisterPipeline(PipelineBuilder::Range(2000).Batch(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto job = client->OpenJob(*dataset, {.name = "victim", .num_worker_slots = 1});
  ASSERT_TRUE(job.ok()) << job.status();
  auto reader = (*job)->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();

  // The attacker holds a valid certificate of a worker, just not the one running the task.
  GetStatusResponse state;
  ASSERT_TRUE(cluster_->dispatcher().GetStatus(testing::RpcContext().get(), {}, &state).ok());
  ASSERT_EQ(state.state().tasks_size(), 1);
  const TaskState& task = state.state().tasks(0);
  const std::string other = task.worker_id() == "worker-0" ? "worker-1" : "worker-0";
  auto attacker =
      Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), WorkerCertificate(other)));
  TaskFinishedRequest forged;
  forged.set_task_id(task.task_id());
  forged.set_generation(task.generation());
  forged.set_num_elements(0);
  TaskFinishedResponse finished;
  const grpc::Status refused =
      attacker->TaskFinished(testing::RpcContext().get(), forged, &finished);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("held by worker '" + task.worker_id() +
                                                 "', and the caller is worker '" + other + "'"));
  GetSplitsRequest lease;
  lease.set_task_id(task.task_id());
  lease.set_max(1);
  GetSplitsResponse splits;
  EXPECT_EQ(attacker->GetSplits(testing::RpcContext().get(), lease, &splits).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  const absl::StatusOr<int> batches = ReadToEnd(**reader);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(*batches, 200) << "the victim's epoch is whole";
}

TEST_F(TlsClusterTest, OnlyAJobsOwnerAndItsReadersMayOpenStartOrHeartbeatIt) {
  auto alice = Connect(ClientCertificate("alice"));
  auto dataset = alice->RegisterPipeline(PipelineBuilder::Range(100).Batch(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto job = alice->OpenJob(*dataset, {.name = "alice-job", .readers = {"bob"}});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(ReadEpochZero(*alice, *dataset, {.name = "alice-job", .readers = {"bob"}}).value_or(-1),
            10);

  // Mallory, by certificate and by token: by name, each opens a job of Mallory's own (job
  // names are per owner), never Alice's...
  std::vector<std::unique_ptr<Client>> mallories;
  mallories.push_back(Connect(ClientCertificate("mallory")));
  mallories.push_back(Connect({.ca_file = certificates_->ca_file()}, kMalloryToken));
  std::set<int64_t> mallorys_jobs;
  for (const std::unique_ptr<Client>& mallory : mallories) {
    const auto opened = mallory->OpenJob(*dataset, {.name = "alice-job"});
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_NE((*opened)->job_id(), (*job)->job_id());
    mallorys_jobs.insert((*opened)->job_id());
  }
  EXPECT_EQ(mallorys_jobs.size(), 1u) << "her certificate and her token are both Mallory";
  // ...nor starts its epochs or heartbeats for it by id.
  auto raw =
      Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ClientCertificate("mallory")));
  StartEpochRequest start;
  start.set_job_id((*job)->job_id());
  start.set_epoch(1);
  StartEpochResponse started;
  EXPECT_EQ(raw->StartEpoch(testing::RpcContext().get(), start, &started).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ClientHeartbeatRequest heartbeat;
  heartbeat.set_job_id((*job)->job_id());
  ClientHeartbeatResponse tasks;
  EXPECT_EQ(raw->ClientHeartbeat(testing::RpcContext().get(), heartbeat, &tasks).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Nor scales it (issue 17).
  ScaleJobRequest scale;
  scale.set_job_id((*job)->job_id());
  scale.set_num_worker_slots(4);
  ScaleJobResponse scaled;
  EXPECT_EQ(raw->ScaleJob(testing::RpcContext().get(), scale, &scaled).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // By name, she scales her own job of that name; Alice's is left alone.
  scale.set_job_id(0);
  scale.set_job_name("alice-job");
  EXPECT_TRUE(raw->ScaleJob(testing::RpcContext().get(), scale, &scaled).ok());
  GetStatusResponse state;
  ASSERT_TRUE(cluster_->dispatcher().GetStatus(testing::RpcContext().get(), {}, &state).ok());
  for (const JobState& j : state.state().jobs()) {
    EXPECT_EQ(j.scaling_steps(), j.owner() == "mallory" ? 1 : 0) << j.ShortDebugString();
  }

  // Naming Alice as the owner does not let her in either, by name nor to scale.
  const auto named_alice =
      mallories.front()->OpenJob(*dataset, {.name = "alice-job", .owner = "alice"});
  EXPECT_TRUE(absl::IsPermissionDenied(named_alice.status())) << named_alice.status();
  scale.set_job_owner("alice");
  EXPECT_EQ(raw->ScaleJob(testing::RpcContext().get(), scale, &scaled).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Bob is a reader, and opens Alice's job by saying it is hers; Alice by token is Alice.
  auto bob = Connect(ClientCertificate("bob"));
  auto bobs = bob->OpenJob(*dataset, {.name = "alice-job", .owner = "alice", .readers = {"bob"}});
  ASSERT_TRUE(bobs.ok()) << bobs.status();
  EXPECT_EQ((*bobs)->job_id(), (*job)->job_id());
  auto reader = (*bobs)->ReadEpoch(1);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(ReadToEnd(**reader).value_or(-1), 10);
  auto by_token = Connect({.ca_file = certificates_->ca_file()}, kAliceToken);
  EXPECT_TRUE(by_token->OpenJob(*dataset, {.name = "alice-job", .readers = {"bob"}}).ok());
}

// Job names were global, so a client could squat another's name: Mallory creating "train"
// first made Alice's "train" hers (PermissionDenied for Alice). Names are per owner: each gets
// her own job, reopening it by name gets the same one, a reader of Alice's job opens hers by
// name and owner (by name alone, his own), and all of it holds after the dispatcher restarts on
// its journal.
TEST_F(TlsClusterTest, AClientCannotSquatAnothersJobName) {
  auto alice = Connect(ClientCertificate("alice"));
  auto mallory = Connect(ClientCertificate("mallory"));
  auto bob = Connect(ClientCertificate("bob"));
  auto dataset = alice->RegisterPipeline(PipelineBuilder::Range(100).Batch(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto squatted = mallory->OpenJob(*dataset, {.name = "train"});
  ASSERT_TRUE(squatted.ok()) << squatted.status();
  auto own = alice->OpenJob(*dataset, {.name = "train", .readers = {"bob"}});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_NE((*own)->job_id(), (*squatted)->job_id());
  ASSERT_EQ(ReadEpochZero(*alice, *dataset, {.name = "train", .readers = {"bob"}}).value_or(-1),
            10);

  // Opens `owner`'s "train" (the caller's own when empty), whose ACL is `readers`.
  const auto job_id_of = [&](Client& client, const std::string& owner,
                             std::vector<std::string> readers = {}) -> int64_t {
    auto job = client.OpenJob(*dataset, {.name = "train", .owner = owner, .readers = readers});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)->job_id() : -1;
  };
  const int64_t bobs_own = job_id_of(*bob, "");
  EXPECT_NE(bobs_own, (*own)->job_id());
  EXPECT_NE(bobs_own, (*squatted)->job_id());
  for (bool restarted : {false, true}) {
    EXPECT_EQ(job_id_of(*alice, "", {"bob"}), (*own)->job_id()) << "restarted: " << restarted;
    EXPECT_EQ(job_id_of(*mallory, ""), (*squatted)->job_id()) << "restarted: " << restarted;
    EXPECT_EQ(job_id_of(*bob, "alice", {"bob"}), (*own)->job_id())
        << "Bob reads Alice's; restarted: " << restarted;
    EXPECT_EQ(job_id_of(*bob, ""), bobs_own) << "restarted: " << restarted;
    if (!restarted) {
      cluster_->StopDispatcher(SIGKILL);
      ASSERT_TRUE(cluster_->RestartDispatcher());
    }
  }
  // Alice's "train" has its epoch 0 read; its next epoch is 1.
  auto reopened = alice->OpenJob(*dataset, {.name = "train", .readers = {"bob"}});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto reader = (*reopened)->ReadEpoch(1);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(ReadToEnd(**reader).value_or(-1), 10);
}

// A job's creator writes its readers list, so a name must not resolve to another owner's job
// through it: Mallory naming Alice (and Bob too) as readers of their "train" jobs used to make
// Alice's GetOrCreateJob("train") attach her to one of them (Mallory owning it, its options and
// scaling), refuse her ("exists for dataset ..." for her other dataset) or fail with "several
// jobs named 'train'" — for good. A name opens the caller's own job or creates it; another
// owner's shared job opens only when the caller names its owner, and only for its readers.
TEST_F(TlsClusterTest, AReadersListCannotPullAClientIntoAnothersJob) {
  auto alice = Connect(ClientCertificate("alice"));
  auto mallory = Connect(ClientCertificate("mallory"));
  auto bob = Connect(ClientCertificate("bob"));
  auto carol = Connect(ClientCertificate("carol"));
  auto mallorys_dataset = mallory->RegisterPipeline(PipelineBuilder::Range(100).Batch(10).Build());
  ASSERT_TRUE(mallorys_dataset.ok()) << mallorys_dataset.status();
  auto alices_dataset = alice->RegisterPipeline(PipelineBuilder::Range(200).Batch(10).Build());
  ASSERT_TRUE(alices_dataset.ok()) << alices_dataset.status();
  auto mallorys = mallory->OpenJob(*mallorys_dataset, {.name = "train", .readers = {"alice"}});
  ASSERT_TRUE(mallorys.ok()) << mallorys.status();
  auto bobs = bob->OpenJob(*mallorys_dataset, {.name = "train", .readers = {"alice"}});
  ASSERT_TRUE(bobs.ok()) << bobs.status();

  // Alice's "train" is her own new job, of her dataset; opening it again finds it.
  auto own = alice->OpenJob(*alices_dataset, {.name = "train"});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_NE((*own)->job_id(), (*mallorys)->job_id());
  EXPECT_NE((*own)->job_id(), (*bobs)->job_id());
  auto again = alice->OpenJob(*alices_dataset, {.name = "train"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->job_id(), (*own)->job_id());
  GetStatusResponse state;
  ASSERT_TRUE(cluster_->dispatcher().GetStatus(testing::RpcContext().get(), {}, &state).ok());
  for (const JobState& job : state.state().jobs()) {
    if (job.job_id() != (*own)->job_id()) continue;
    EXPECT_EQ(job.owner(), "alice");
    EXPECT_EQ(job.dataset_id(), *alices_dataset);
  }
  auto own_reader = (*own)->ReadEpoch(0);
  ASSERT_TRUE(own_reader.ok()) << own_reader.status();
  EXPECT_EQ(ReadToEnd(**own_reader).value_or(-1), 20) << "Alice reads her own dataset";
  // Scaling "train" by name scales Alice's own job, never Mallory's or Bob's.
  auto alices_stub =
      Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ClientCertificate("alice")));
  ScaleJobRequest scale;
  scale.set_job_name("train");
  scale.set_num_worker_slots(2);
  ScaleJobResponse scaled;
  const grpc::Status scaled_own =
      alices_stub->ScaleJob(testing::RpcContext().get(), scale, &scaled);
  EXPECT_TRUE(scaled_own.ok()) << scaled_own.error_message();
  ASSERT_TRUE(cluster_->dispatcher().GetStatus(testing::RpcContext().get(), {}, &state).ok());
  for (const JobState& job : state.state().jobs()) {
    EXPECT_EQ(job.scaling_steps(), job.owner() == "alice" ? 1 : 0) << job.ShortDebugString();
  }

  // Alice opens Mallory's shared job deliberately, by naming its owner, and reads it.
  auto shared = alice->OpenJob(*mallorys_dataset,
                               {.name = "train", .owner = "mallory", .readers = {"alice"}});
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ((*shared)->job_id(), (*mallorys)->job_id());
  auto shared_reader = (*shared)->ReadEpoch(0);
  ASSERT_TRUE(shared_reader.ok()) << shared_reader.status();
  EXPECT_EQ(ReadToEnd(**shared_reader).value_or(-1), 10);
  scale.set_job_owner("bob");
  const grpc::Status scaled_bobs =
      alices_stub->ScaleJob(testing::RpcContext().get(), scale, &scaled);
  EXPECT_TRUE(scaled_bobs.ok()) << "Alice reads Bob's job, so may scale it: "
                                << scaled_bobs.error_message();

  // Carol is in no readers list: naming the owner gets her nothing, by name or to scale.
  const auto refused = carol->OpenJob(*mallorys_dataset, {.name = "train", .owner = "mallory"});
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("'train' of owner 'mallory'"));
  auto carols_stub =
      Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ClientCertificate("carol")));
  scale.set_job_owner("mallory");
  EXPECT_EQ(carols_stub->ScaleJob(testing::RpcContext().get(), scale, &scaled).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A job that does not exist is NotFound naming it and its owner, never created for them.
  const auto absent = alice->OpenJob(*alices_dataset, {.name = "eval", .owner = "mallory"});
  EXPECT_TRUE(absl::IsNotFound(absent.status())) << absent.status();
  EXPECT_THAT(absent.status().message(), HasSubstr("no job 'eval' of owner 'mallory'"));
  // An owner without a name names no job.
  const auto unnamed = alice->OpenJob(*alices_dataset, {.owner = "mallory"});
  EXPECT_TRUE(absl::IsInvalidArgument(unnamed.status())) << unnamed.status();
  EXPECT_THAT(unnamed.status().message(),
              HasSubstr("job owner 'mallory' given without a job name"));
}

// The same from the command line: `granary run --job_name --job_owner` reads the job its
// owner shared, `granary scale --job --job_owner` scales it; a client not among its readers
// gets neither.
TEST_F(TlsClusterTest, GranaryRunAndScaleOpenASharedJobByItsOwner) {
  const std::string pipeline_file = dir_.Join("pipeline.json");
  const char kPipeline[] = R"({"source": {"type": "range", "params": {"stop": 100}},
                               "ops": [{"op": "batch", "params": {"batch_size": 10}}]})";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), pipeline_file, kPipeline, false).ok());
  const absl::StatusOr<PipelineDef> def = ParsePipelineJson(kPipeline, "test");
  ASSERT_TRUE(def.ok()) << def.status();
  auto alice = Connect(ClientCertificate("alice"));
  auto dataset = alice->RegisterPipeline(*def);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto job = alice->OpenJob(*dataset, {.name = "shared", .readers = {"bob"}});
  ASSERT_TRUE(job.ok()) << job.status();

  // `granary <command>` as `client`, with the cluster's CA and the client's certificate.
  const auto granary = [&](const std::string& client, std::vector<std::string> args,
                           std::string* output) {
    const TransportSecurity security = ClientCertificate(client);
    std::vector<std::string> argv = {GRANARY_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(),
                {"--dispatcher=" + cluster_->dispatcher_address(), "--tls_ca=" + security.ca_file,
                 "--tls_cert=" + security.cert_file, "--tls_key=" + security.key_file});
    Subprocess process(argv, Subprocess::Stderr::kMergeIntoStdout);
    *output = process.ReadAll(std::chrono::seconds(60));
    return process.Wait();
  };
  const std::vector<std::string> run = {"run",
                                        "--pipeline=" + pipeline_file,
                                        "--epochs=1",
                                        "--job_name=shared",
                                        "--job_owner=alice",
                                        "--readers=bob"};
  const std::vector<std::string> scale = {"scale", "--job=shared", "--job_owner=alice",
                                          "--workers=2"};
  std::string output;
  EXPECT_NE(granary("carol", run, &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("client 'carol' is not among its readers"));
  EXPECT_NE(granary("carol", scale, &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("client 'carol' is not among its readers"));
  ASSERT_EQ(granary("bob", run, &output), 0) << output;
  ASSERT_EQ(granary("bob", scale, &output), 0) << output;

  GetStatusResponse state;
  ASSERT_TRUE(cluster_->dispatcher().GetStatus(testing::RpcContext().get(), {}, &state).ok());
  ASSERT_EQ(state.state().jobs_size(), 1) << "no job was created for Bob or Carol";
  EXPECT_EQ(state.state().jobs(0).job_id(), (*job)->job_id());
  EXPECT_EQ(state.state().jobs(0).epochs_started(), 1) << "Bob read Alice's epoch 0";
  EXPECT_EQ(state.state().jobs(0).scaling_steps(), 1) << "Bob scaled Alice's job";
}

TEST_F(TlsClusterTest, AnUnknownTokenIsUnauthenticated) {
  auto client = Client::Connect({.dispatcher_address = cluster_->dispatcher_address(),
                                 .rpc_timeout_ms = 2000,
                                 .stall_timeout_ms = 2000,
                                 .tls_ca_file = certificates_->ca_file(),
                                 .bearer_token = "not-a-token-0123456789"});
  ASSERT_TRUE(client.ok()) << client.status();
  const auto dataset = (*client)->RegisterPipeline(PipelineBuilder::Range(10).Build());
  EXPECT_TRUE(absl::IsUnauthenticated(dataset.status())) << dataset.status();
  // It says the token was refused (not that a certificate is missing), and does not echo it.
  const std::string message(dataset.status().message());
  EXPECT_THAT(message, HasSubstr("the bearer token was refused"));
  EXPECT_THAT(message, Not(HasSubstr("certificate")));
  EXPECT_THAT(message, Not(HasSubstr("not-a-token-0123456789")));
}

TEST_F(TlsClusterTest, TheBearerSchemeIsCaseInsensitive) {
  auto dispatcher = Dispatcher::NewStub(
      Channel(cluster_->dispatcher_address(), {.ca_file = certificates_->ca_file()}));
  for (const std::string scheme : {"Bearer", "bearer", "BEARER"}) {
    auto context = testing::RpcContext();
    context->AddMetadata("authorization", absl::StrCat(scheme, " ", kAliceToken));
    RegisterDatasetRequest request;
    request.mutable_pipeline()->mutable_source()->set_type("range");
    (*request.mutable_pipeline()->mutable_source()->mutable_params()->mutable_fields())["stop"]
        .set_number_value(10);
    RegisterDatasetResponse response;
    const grpc::Status status = dispatcher->RegisterDataset(context.get(), request, &response);
    EXPECT_TRUE(status.ok()) << "'" << scheme << " <token>': " << status.error_message();
  }
}

// Python functions run their author's code on the workers: only a client the dispatcher's
// --python_udf_clients names (alice here) registers a pipeline that runs one.
TEST_F(TlsClusterTest, OnlyAClientGrantedPythonFunctionsRegistersAPipelineThatRunsOne) {
  // The dispatcher validates the function's parameters but never unpickles it.
  const auto python = [](const std::string& udf) {
    PipelineBuilder builder = PipelineBuilder::Range(10);
    const ParamList params = {{"function", std::string("bm90IGEgcGlja2xl")}};
    return (udf == "python" ? builder.Map(udf, params) : builder.Filter(udf, params)).Build();
  };
  auto mallory = Connect(ClientCertificate("mallory"));
  for (const std::string udf : {"python", "python_filter"}) {
    const auto refused = mallory->RegisterPipeline(python(udf));
    EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("UDF " + udf));
    EXPECT_THAT(refused.status().message(), HasSubstr("client 'mallory' may not"));
    EXPECT_THAT(refused.status().message(), HasSubstr("--python_udf_clients"));
  }
  EXPECT_TRUE(mallory->RegisterPipeline(PipelineBuilder::Range(10).Map("add", {{"value", int64_t{1}}}).Build()).ok())
      << "a pipeline without Python needs no grant";
  auto alice = Connect(ClientCertificate("alice"));
  const auto granted = alice->RegisterPipeline(python("python"));
  EXPECT_TRUE(granted.ok()) << granted.status();
  // The refusal refused only the request: the dispatcher serves on.
  EXPECT_TRUE(mallory->RegisterPipeline(PipelineBuilder::Range(20).Build()).ok());
}

TEST_F(TlsClusterTest, AForeignOrForgedCapabilityReadsNothingOfAnotherJobsTask) {
  auto alice = Connect(ClientCertificate("alice"));
  auto dataset = alice->RegisterPipeline(PipelineBuilder::Range(5000).Batch(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto job = alice->OpenJob(*dataset, {.name = "alice-job", .num_worker_slots = 1});
  ASSERT_TRUE(job.ok()) << job.status();
  auto reader = (*job)->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();

  // Mallory reads a job of her own, so she holds a valid capability — for her task.
  auto mallory =
      Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ClientCertificate("mallory")));
  auto mallorys_client = Connect(ClientCertificate("mallory"));
  auto her_job = mallorys_client->OpenJob(*dataset, {.name = "mallory-job", .num_worker_slots = 1});
  ASSERT_TRUE(her_job.ok()) << her_job.status();
  const int64_t her_job_id = (*her_job)->job_id();
  // Her epoch starts; her Job lets go of its consumer, which she then reads by hand (one reader
  // per consumer: her raw heartbeats must come from the consumer's holder). She takes it over:
  // the Job's release is best effort (one second), and a lease it did not release would refuse
  // a plain claim until it expired.
  ASSERT_TRUE((*her_job)->ReadEpoch(0).ok());
  her_job->reset();
  ClaimConsumerRequest claim;
  claim.set_job_id(her_job_id);
  claim.set_reader_id("mallory-by-hand");
  claim.set_takeover(true);
  ClaimConsumerResponse claimed;
  const grpc::Status claim_status =
      mallory->ClaimConsumer(testing::RpcContext().get(), claim, &claimed);
  ASSERT_TRUE(claim_status.ok()) << claim_status.error_message();
  ClientHeartbeatRequest heartbeat;
  heartbeat.set_job_id(her_job_id);
  heartbeat.set_reader_id("mallory-by-hand");
  ClientHeartbeatResponse her_tasks;
  const grpc::Status heard =
      mallory->ClientHeartbeat(testing::RpcContext().get(), heartbeat, &her_tasks);
  ASSERT_TRUE(heard.ok()) << heard.error_message();
  ASSERT_EQ(her_tasks.tasks_size(), 1);
  const std::string her_capability = her_tasks.tasks(0).capability();
  ASSERT_EQ(her_capability.size(), 32u);

  // Mallory's status does not show Alice's task (see below); she could guess its id, generation
  // and worker (small numbers, two workers), so the test hands them to her as if she had.
  GetStatusResponse state;
  ASSERT_TRUE(
      Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ClientCertificate("alice")))
          ->GetStatus(testing::RpcContext().get(), {}, &state)
          .ok());
  const TaskState* victim = nullptr;
  for (const TaskState& task : state.state().tasks()) {
    if (task.job_id() == (*job)->job_id()) victim = &task;
  }
  ASSERT_NE(victim, nullptr);
  std::string address;
  for (const WorkerState& worker : state.state().workers()) {
    if (worker.worker_id() == victim->worker_id()) address = worker.address();
  }
  auto worker = Worker::NewStub(Channel(address, ClientCertificate("mallory")));
  for (const std::string& capability : {her_capability, std::string(32, 'x')}) {
    GetElementsRequest get;
    get.set_task_id(victim->task_id());
    get.set_generation(victim->generation());
    get.set_max_bytes(1 << 20);
    get.set_capability(capability);
    GetElementsResponse stolen;
    const grpc::Status status = worker->GetElements(testing::RpcContext().get(), get, &stolen);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("no valid capability"));
    EXPECT_EQ(stolen.elements_size(), 0);
  }
  EXPECT_EQ(ReadToEnd(**reader).value_or(-1), 500) << "Alice still gets her whole epoch";
}

// A client's status shows its own jobs (and those it may read), their datasets, tasks and
// caches, and no one else's; an admin client sees them all.
TEST_F(TlsClusterTest, StatusShowsAClientOnlyTheJobsItMayRead) {
  auto alice = Connect(ClientCertificate("alice"));
  auto dataset = alice->RegisterPipeline(PipelineBuilder::Range(100).Batch(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_EQ(ReadEpochZero(*alice, *dataset, {.name = "alice-job", .readers = {"bob"}}).value_or(-1),
            10);
  const auto status_of = [&](const std::string& client) {
    GetStatusResponse status;
    const grpc::Status rpc =
        Dispatcher::NewStub(Channel(cluster_->dispatcher_address(), ClientCertificate(client)))
            ->GetStatus(testing::RpcContext().get(), {}, &status);
    EXPECT_TRUE(rpc.ok()) << client << ": " << rpc.error_message();
    return status.state();
  };
  const DispatcherStateProto mallorys = status_of("mallory");
  EXPECT_EQ(mallorys.jobs_size(), 0) << mallorys.ShortDebugString();
  EXPECT_EQ(mallorys.datasets_size(), 0);
  EXPECT_EQ(mallorys.epochs_size(), 0);
  EXPECT_EQ(mallorys.tasks_size(), 0);
  EXPECT_EQ(mallorys.workers_size(), 2) << "workers are shown: clients dial them";
  for (const char* reader : {"alice", "bob", "ops"}) {
    const DispatcherStateProto state = status_of(reader);
    ASSERT_EQ(state.jobs_size(), 1) << reader;
    EXPECT_EQ(state.jobs(0).name(), "alice-job") << reader;
    EXPECT_EQ(state.datasets_size(), 1) << reader;
    EXPECT_GT(state.tasks_size(), 0) << reader;
  }
  // Mallory's own job is hers to see, and the admin sees both.
  auto mallory = Connect(ClientCertificate("mallory"));
  ASSERT_EQ(ReadEpochZero(*mallory, *dataset, {.name = "mallory-job"}).value_or(-1), 10);
  EXPECT_EQ(status_of("mallory").jobs_size(), 1);
  EXPECT_EQ(status_of("alice").jobs_size(), 1);
  EXPECT_EQ(status_of("ops").jobs_size(), 2);
}

// A worker's GetWorkerStatus showed every client's tasks to any client. It shows a client the
// tasks of the jobs it may read (its own, those whose ACL names it), and an admin all of them.
TEST_F(TlsClusterTest, WorkerStatusShowsAClientOnlyTheTasksOfJobsItMayRead) {
  auto alice = Connect(ClientCertificate("alice"));
  auto mallory = Connect(ClientCertificate("mallory"));
  auto dataset = alice->RegisterPipeline(PipelineBuilder::Range(5000).Batch(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  // Each job's epoch is read in part, so its tasks stay on the workers.
  std::vector<std::unique_ptr<Job>> jobs;
  std::vector<std::unique_ptr<EpochReader>> readers;
  for (auto& [client, spec] : std::vector<std::pair<Client*, JobSpec>>{
           {alice.get(), {.name = "alice-job", .readers = {"bob"}}},
           {mallory.get(), {.name = "mallory-job"}}}) {
    auto job = client->OpenJob(*dataset, spec);
    ASSERT_TRUE(job.ok()) << job.status();
    auto reader = (*job)->ReadEpoch(0);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ElementProto element;
    bool end = false;
    ASSERT_TRUE((*reader)->Next(&element, &end).ok());
    jobs.push_back(*std::move(job));
    readers.push_back(*std::move(reader));
  }
  std::map<int64_t, std::string> job_of_task;  // task id -> job name
  GetStatusResponse state;
  ASSERT_TRUE(cluster_->dispatcher().GetStatus(testing::RpcContext().get(), {}, &state).ok());
  std::map<int64_t, std::string> job_names;
  for (const JobState& job : state.state().jobs()) job_names[job.job_id()] = job.name();
  for (const TaskState& task : state.state().tasks()) {
    job_of_task[task.task_id()] = job_names[task.job_id()];
  }
  // The job names of the tasks `client` sees on the two workers.
  const auto seen_by = [&](const std::string& client) {
    std::multiset<std::string> seen;
    for (int w = 0; w < 2; ++w) {
      GetWorkerStatusResponse status;
      const grpc::Status rpc =
          Worker::NewStub(Channel(cluster_->worker_address(w), ClientCertificate(client)))
              ->GetWorkerStatus(testing::RpcContext().get(), {}, &status);
      EXPECT_TRUE(rpc.ok()) << client << ": " << rpc.error_message();
      for (const TaskStatus& task : status.tasks()) seen.insert(job_of_task[task.task_id()]);
    }
    return seen;
  };
  // The admin sees the tasks of both jobs (a task with no split to read ended empty and is gone).
  std::multiset<std::string> all;
  for (int i = 0; i < 100; ++i) {
    all = seen_by("ops");
    if (all.count("alice-job") > 0 && all.count("mallory-job") > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(all.count("alice-job"), 0u);
  ASSERT_GT(all.count("mallory-job"), 0u);
  for (const char* client : {"alice", "bob"}) {
    const std::multiset<std::string> seen = seen_by(client);
    EXPECT_EQ(seen.count("alice-job"), all.count("alice-job")) << client;
    EXPECT_EQ(seen.count("mallory-job"), 0u) << client;
    EXPECT_EQ(seen.size(), seen.count("alice-job")) << client;
  }
  const std::multiset<std::string> mallorys = seen_by("mallory");
  EXPECT_EQ(mallorys.count("mallory-job"), all.count("mallory-job"));
  EXPECT_EQ(mallorys.size(), mallorys.count("mallory-job"));
  EXPECT_TRUE(seen_by("eve").empty()) << "a client of no job sees no task";
}

TEST_F(TlsClusterTest, EachClientLimitIsResourceExhaustedNamingItsFlag) {
  auto alice = Connect(ClientCertificate("alice"));
  auto dataset = alice->RegisterPipeline(PipelineBuilder::Range(10).Build());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_TRUE(alice->OpenJob(*dataset, {.name = "a1"}).ok());
  ASSERT_TRUE(alice->OpenJob(*dataset, {.name = "a2"}).ok());
  const auto third = alice->OpenJob(*dataset, {.name = "a3"});
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(std::string(third.status().message()),
              HasSubstr("client 'alice' owns 2 jobs; the limit is 2 (--max_jobs_per_client)"));
  EXPECT_TRUE(alice->OpenJob(*dataset, {.name = "a1"}).ok()) << "opening an own job is no new job";

  auto bob = Connect(ClientCertificate("bob"));
  ASSERT_TRUE(bob->OpenJob(*dataset, {.name = "b1", .num_consumers = 2}).ok())
      << "the limits are per client";
  const auto readers = bob->OpenJob(*dataset, {.name = "b2", .num_consumers = 2});
  EXPECT_TRUE(absl::IsResourceExhausted(readers.status())) << readers.status();
  EXPECT_THAT(std::string(readers.status().message()),
              HasSubstr("has 2 consumers in its jobs and asks for 2 more; the limit is 3 "
                        "(--max_readers_per_client)"));

  PipelineBuilder many_ops = PipelineBuilder::Range(10);
  for (int i = 0; i < 9; ++i) many_ops.Map("random_flip");
  const auto ops = alice->RegisterPipeline(many_ops.Build());
  EXPECT_TRUE(absl::IsResourceExhausted(ops.status())) << ops.status();
  EXPECT_THAT(std::string(ops.status().message()),
              HasSubstr("9 ops; the limit is 8 (--max_pipeline_ops)"));
  const auto large =
      alice->RegisterPipeline(PipelineBuilder::Range(10).Mark(std::string(5000, 'm')).Build());
  EXPECT_TRUE(absl::IsResourceExhausted(large.status())) << large.status();
  EXPECT_THAT(std::string(large.status().message()),
              HasSubstr("; the limit is 4096 (--max_pipeline_bytes)"));
  const auto message =
      alice->RegisterPipeline(PipelineBuilder::Range(10).Mark(std::string(100000, 'm')).Build());
  EXPECT_TRUE(absl::IsResourceExhausted(message.status())) << message.status();
  EXPECT_THAT(std::string(message.status().message()), HasSubstr("larger than max"));
}

TEST(TransportSecurityProcessTest, AServerWithoutAChoiceOfTransportSecurityRefusesToStart) {
  testing::ScopedTempDir dir;
  Subprocess dispatcher(
      {GRANARY_BINARY, "dispatcher", "--journal_dir=" + dir.Join("journal"), "--port=0"},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = dispatcher.ReadAll();
  EXPECT_EQ(dispatcher.Wait(), 1) << output;
  EXPECT_THAT(output, HasSubstr("no transport security chosen: give --tls_cert, --tls_key and "
                                "--tls_ca (see SECURITY.md), or --insecure for plain text"));
  Subprocess worker(
      {GRANARY_BINARY, "worker", "--dispatcher=127.0.0.1:1", "--worker_id=w", "--port=0"},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string worker_output = worker.ReadAll();
  EXPECT_EQ(worker.Wait(), 1) << worker_output;
  EXPECT_THAT(worker_output, HasSubstr("no transport security chosen"));
}

}  // namespace
}  // namespace granary
