// The client library against a real `granary dispatcher` process and in-process fake workers
// whose faults the test controls: duplicates, corrupt payloads, failed calls, a lost worker
// whose task fails over, a stalled worker, resumption from a saved position, and the errors
// ReadEpoch gives for a wrong epoch, consumer or position.
//
// A fake worker serves, for every task the dispatcher assigns it, kElements elements whose
// single int64 scalar is task_id * 1000000 + index, so the test can check that each (task,
// index) reached the trainer exactly once and in index order per task.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/connection.h"
#include "client/epoch_reader.h"
#include "client/position.h"
#include "client/reader_lease.h"
#include "common/failpoint.h"
#include "common/hash.h"
#include "common/subprocess.h"
#include "faultinject/tcp_proxy.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/dispatcher.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "testing/manual_clock_env.h"
#include "testing/scoped_temp_dir.h"
#include "transport/grpc_transport.h"
#include "transport/shm_protocol.h"
#include "transport/shm_test_util.h"
#include "transport/shm_transport.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kElements = 50;
// Elements per GetElements answer, so that a task takes several calls.
constexpr int kPerCall = 7;

int64_t ValueOf(int64_t task, int64_t index) { return task * 1000000 + index; }

std::string Payload(int64_t value) {
  ElementProto element;
  TensorProto* tensor = element.add_tensors();
  tensor->set_dtype(DT_INT64);
  tensor->set_content(std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
  element.set_record(value);
  return element.SerializeAsString();
}

int64_t ValueOf(const ElementProto& element) {
  int64_t value = -1;
  if (element.tensors_size() == 1 && element.tensors(0).content().size() == sizeof(value)) {
    std::memcpy(&value, element.tensors(0).content().data(), sizeof(value));
  }
  return value;
}

class DispatcherProcess {
 public:
  explicit DispatcherProcess(const std::string& journal_dir)
      : process_({GRANARY_BINARY, "dispatcher", "--insecure", "--journal_dir=" + journal_dir,
                  "--port=0", "--worker_timeout_ms=1000"}) {
    address_ = process_.ReadListenAddress();
    EXPECT_FALSE(address_.empty()) << "the dispatcher announced no address";
  }
  const std::string& address() const { return address_; }

 private:
  Subprocess process_;
  std::string address_;
};

// A worker that serves synthetic elements for the tasks the dispatcher gives it. Thread-safe.
class FakeWorker final : public Worker::Service {
 public:
  FakeWorker(const std::string& dispatcher, const std::string& id)
      : id_(id),
        dispatcher_(Dispatcher::NewStub(
            grpc::CreateChannel(dispatcher, grpc::InsecureChannelCredentials()))) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port);
    Register();
    heartbeats_ = std::thread([this] {
      while (!stop_heartbeats_) {
        Heartbeat();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }

  ~FakeWorker() override { Crash(); }

  // Stops heartbeating and serving, like a SIGKILLed worker.
  void Crash() {
    stop_heartbeats_ = true;
    if (heartbeats_.joinable()) heartbeats_.join();
    {
      absl::MutexLock lock(&mu_);
      hang_ = false;
    }
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now());
      server_.reset();
    }
  }

  const std::string& address() const { return address_; }

  // Fault knobs.
  void SetUnavailable(bool unavailable) {
    absl::MutexLock lock(&mu_);
    unavailable_ = unavailable;
  }
  // Every call fails with `code` (OK: no failure).
  void SetError(grpc::StatusCode code) {
    absl::MutexLock lock(&mu_);
    error_ = code;
  }
  void SetFailFirstCalls(int n) {
    absl::MutexLock lock(&mu_);
    fail_first_calls_ = n;
  }
  void SetDuplicatePrevious(bool duplicate) {
    absl::MutexLock lock(&mu_);
    duplicate_previous_ = duplicate;
  }
  void SetRecomputedOnFirstAnswer(int64_t n) {
    absl::MutexLock lock(&mu_);
    recomputed_ = n;
  }
  void CorruptOnce(int64_t index) {
    absl::MutexLock lock(&mu_);
    corrupt_once_.insert(index);
  }
  void CorruptAlways(int64_t index) {
    absl::MutexLock lock(&mu_);
    corrupt_always_.insert(index);
  }
  // Elements at or past `limit` are "not produced yet": asked for them, the worker waits
  // briefly and answers none, as a real worker does.
  void SetProducedLimit(int64_t limit) {
    absl::MutexLock lock(&mu_);
    produced_limit_ = limit;
  }
  void SetHang(bool hang) {
    absl::MutexLock lock(&mu_);
    hang_ = hang;
  }
  int64_t calls() const {
    absl::MutexLock lock(&mu_);
    return calls_total_;
  }

  grpc::Status GetElements(grpc::ServerContext* context, const GetElementsRequest* request,
                           GetElementsResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++calls_total_;
    for (int i = 0; i < 3000 && hang_ && !context->IsCancelled(); ++i) {
      mu_.AwaitWithTimeout(absl::Condition(this, &FakeWorker::NotHanging), absl::Milliseconds(10));
    }
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    if (unavailable_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake: unavailable");
    if (error_ != grpc::StatusCode::OK) return grpc::Status(error_, "fake: injected error");
    const int64_t task = request->task_id();
    auto it = tasks_.find(task);
    if (it == tasks_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no task ", task));
    }
    if (it->second != request->generation()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("task ", task, " runs at generation ", it->second));
    }
    if (++calls_[task] <= fail_first_calls_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake: warming up");
    }
    const int64_t from = request->from_index();
    if (from > kElements) return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "past the end");
    response->set_num_elements(kElements);
    if (from == kElements) {
      response->set_end_of_task(true);
      return grpc::Status::OK;
    }
    if (from >= produced_limit_) {
      mu_.AwaitWithTimeout(absl::Condition(&never_), absl::Milliseconds(20));
      return grpc::Status::OK;
    }
    if (answered_.insert(task).second) response->set_recomputed(recomputed_);
    if (duplicate_previous_ && from > 0) Add(task, from - 1, response);
    for (int64_t i = from; i < std::min(kElements, produced_limit_) && i < from + kPerCall; ++i) {
      Add(task, i, response);
    }
    return grpc::Status::OK;
  }

 private:
  void Add(int64_t task, int64_t index, GetElementsResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    IndexedElement* e = response->add_elements();
    e->set_index(index);
    e->set_payload(Payload(ValueOf(task, index)));
    e->set_checksum(Hash3_64(e->payload()));
    if (corrupt_always_.count(index) > 0 || corrupt_once_.erase(index) > 0) {
      e->set_checksum(e->checksum() ^ 1);
    }
  }

  void Register() {
    RegisterWorkerRequest request;
    request.set_worker_id(id_);
    request.set_address(address_);
    RegisterWorkerResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status = dispatcher_->RegisterWorker(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    incarnation_ = response.incarnation();
  }

  void Heartbeat() {
    WorkerHeartbeatRequest request;
    request.set_worker_id(id_);
    request.set_incarnation(incarnation_);
    WorkerHeartbeatResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!dispatcher_->WorkerHeartbeat(&context, request, &response).ok()) return;
    {
      absl::MutexLock lock(&mu_);
      for (const TaskDef& task : response.tasks()) tasks_[task.task_id()] = task.generation();
    }
    // Like a real worker, it leases the epoch's splits (all it can, at once; its elements do
    // not depend on them): readers end an epoch only once its plan is leased, when no scaling
    // step can add a task any more.
    for (const TaskDef& task : response.tasks()) LeaseAll(task.task_id());
  }

  void LeaseAll(int64_t task) {
    for (int64_t seq = 0;;) {
      GetSplitsRequest request;
      request.set_task_id(task);
      request.set_from_seq(seq);
      request.set_max(4096);
      GetSplitsResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      if (!dispatcher_->GetSplits(&context, request, &response).ok()) return;
      if (response.end_of_splits()) return;
      seq += response.splits_size();
    }
  }

  bool NotHanging() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hang_; }

  const std::string id_;
  std::unique_ptr<Dispatcher::Stub> dispatcher_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int64_t incarnation_ = 0;
  std::atomic<bool> stop_heartbeats_{false};
  std::thread heartbeats_;

  mutable absl::Mutex mu_;
  std::map<int64_t, int64_t> tasks_ ABSL_GUARDED_BY(mu_);  // task -> generation
  std::map<int64_t, int> calls_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> answered_ ABSL_GUARDED_BY(mu_);
  int64_t calls_total_ ABSL_GUARDED_BY(mu_) = 0;
  bool unavailable_ ABSL_GUARDED_BY(mu_) = false;
  grpc::StatusCode error_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::OK;
  int fail_first_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool duplicate_previous_ ABSL_GUARDED_BY(mu_) = false;
  int64_t recomputed_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<int64_t> corrupt_once_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> corrupt_always_ ABSL_GUARDED_BY(mu_);
  bool hang_ ABSL_GUARDED_BY(mu_) = false;
  int64_t produced_limit_ ABSL_GUARDED_BY(mu_) = kElements;
  const bool never_ = false;  // A condition that never holds: a plain wait.
};

// What a reader delivered: per task, the indices in delivery order.
struct Delivered {
  std::map<int64_t, std::vector<int64_t>> indices;
  int64_t count = 0;

  void Add(const ElementProto& element) {
    const int64_t value = ValueOf(element);
    indices[value / 1000000].push_back(value % 1000000);
    ++count;
  }
};

// Reads up to `limit` elements (all when -1); returns the status that stopped it.
// Padding (equal shares, remainder pad) is no element of the epoch: not added.
absl::Status Read(EpochReader& reader, Delivered* delivered, int64_t limit = -1) {
  ReceivedElement element;
  bool end = false;
  while (limit < 0 || delivered->count < limit) {
    absl::Status status = reader.Next(&element, &end);
    if (!status.ok()) return status;
    if (end) return absl::OkStatus();
    if (!element.padding()) delivered->Add(element.ToProto());
  }
  return absl::OkStatus();
}

// Every task's indices are exactly 0 .. kElements - 1, in order.
void ExpectExactlyOnce(const Delivered& delivered, size_t num_tasks) {
  ASSERT_EQ(delivered.indices.size(), num_tasks);
  for (const auto& [task, indices] : delivered.indices) {
    ASSERT_EQ(indices.size(), static_cast<size_t>(kElements)) << "task " << task;
    for (int64_t i = 0; i < kElements; ++i) ASSERT_EQ(indices[i], i) << "task " << task;
  }
}

class ClientReaderTest : public ::testing::Test {
 protected:
  ClientReaderTest() : dispatcher_(dir_.Join("journal")) {}

  std::unique_ptr<Client> Connect(int stall_timeout_ms = 60000) {
    ClientOptions options;
    options.dispatcher_address = dispatcher_.address();
    options.insecure = true;
    options.insecure = true;
    options.heartbeat_interval_ms = 50;
    options.max_outstanding_requests = 2;
    options.stall_timeout_ms = stall_timeout_ms;
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  std::unique_ptr<Job> OpenJob(Client& client, JobSpec spec = {}) {
    auto dataset = client.RegisterPipeline(PipelineBuilder::Range(100).Build());
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    auto job = client.OpenJob(*dataset, spec);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? std::move(job).value() : nullptr;
  }

  testing::ScopedTempDir dir_;
  DispatcherProcess dispatcher_;
};

TEST_F(ClientReaderTest, EveryElementOnceDespiteDuplicatesCorruptionAndFailedCalls) {
  FakeWorker a(dispatcher_.address(), "a");
  FakeWorker b(dispatcher_.address(), "b");
  a.SetFailFirstCalls(2);
  a.SetDuplicatePrevious(true);
  a.CorruptOnce(10);
  b.SetRecomputedOnFirstAnswer(5);
  b.CorruptOnce(3);
  auto client = Connect();
  auto job = OpenJob(*client);
  auto reader = job->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Delivered delivered;
  ASSERT_TRUE(Read(**reader, &delivered).ok());
  ExpectExactlyOnce(delivered, 2);
  const EpochStats stats = (*reader)->stats();
  EXPECT_EQ(stats.elements, 2 * kElements);
  EXPECT_GT(stats.payload_bytes, 0);
  EXPECT_GT(stats.duplicates_dropped, 0);
  EXPECT_EQ(stats.recomputed_dropped, 5);
  EXPECT_EQ(stats.checksum_mismatches, 2);
  EXPECT_GE(stats.retries, 4);  // 2 failed calls + 2 checksum mismatches, at least.
  // The failed calls were retried after a backoff, which Next() waited out.
  EXPECT_GT(stats.wait_us, 0);
  // The reader is at the end: every task's position is its element count.
  auto position = DecodePosition((*reader)->SavePosition(), job->job_id(), 0, 0);
  ASSERT_TRUE(position.ok()) << position.status();
  for (const auto& [task, index] : position->next_index()) EXPECT_EQ(index, kElements) << task;
}

TEST_F(ClientReaderTest, TwoConsumersSplitTheEpoch) {
  FakeWorker a(dispatcher_.address(), "a");
  FakeWorker b(dispatcher_.address(), "b");
  auto client = Connect();
  JobSpec spec;
  spec.name = "shared";
  spec.num_consumers = 2;
  // The fake workers make their elements without reading splits: shares of a one-split plan
  // mean nothing here (equal shares are tested with real workers: granary_run_test.cc).
  spec.sharding = JobSharding::kDynamic;
  auto job = OpenJob(*client, spec);
  auto reader0 = job->ReadEpoch(0, 0);
  auto reader1 = job->ReadEpoch(0, 1);
  ASSERT_TRUE(reader0.ok()) << reader0.status();
  ASSERT_TRUE(reader1.ok()) << reader1.status();
  Delivered d0, d1;
  std::thread other([&] { EXPECT_TRUE(Read(**reader1, &d1).ok()); });
  EXPECT_TRUE(Read(**reader0, &d0).ok());
  other.join();
  ExpectExactlyOnce(d0, 2);
  ExpectExactlyOnce(d1, 2);
  for (const auto& entry : d0.indices) EXPECT_EQ(d1.indices.count(entry.first), 0u);
}

TEST_F(ClientReaderTest, ResumesFromSavedPositionExactlyOnce) {
  FakeWorker a(dispatcher_.address(), "a");
  FakeWorker b(dispatcher_.address(), "b");
  auto client = Connect();
  auto job = OpenJob(*client);
  Delivered delivered;
  std::string position;
  {
    auto reader = job->ReadEpoch(0);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_TRUE(Read(**reader, &delivered, 37).ok());
    // Let the fetchers run ahead: queued elements must not count as delivered.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    position = (*reader)->SavePosition();
  }
  auto decoded = DecodePosition(position, job->job_id(), 0, 0);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  int64_t sum = 0;
  for (const auto& entry : decoded->next_index()) sum += entry.second;
  EXPECT_EQ(sum, 37);

  auto resumed = job->ReadEpoch(0, 0, position);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(Read(**resumed, &delivered).ok());
  EXPECT_EQ((*resumed)->stats().elements, 2 * kElements - 37);
  ExpectExactlyOnce(delivered, 2);
}

TEST_F(ClientReaderTest, MismatchedOrMalformedPositionIsInvalidArgument) {
  FakeWorker a(dispatcher_.address(), "a");
  auto client = Connect();
  auto job = OpenJob(*client);
  std::string position;
  {
    auto reader = job->ReadEpoch(0);
    ASSERT_TRUE(reader.ok()) << reader.status();
    position = (*reader)->SavePosition();
  }
  auto other_epoch = job->ReadEpoch(1, 0, position);
  ASSERT_FALSE(other_epoch.ok());
  EXPECT_EQ(other_epoch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other_epoch.status().message(), HasSubstr("its epoch is 0, not 1"));

  auto malformed = job->ReadEpoch(0, 0, "a model checkpoint");
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.status().message(), HasSubstr("malformed"));

  auto other_job = OpenJob(*client);
  auto wrong_job = other_job->ReadEpoch(0, 0, position);
  ASSERT_FALSE(wrong_job.ok());
  EXPECT_EQ(wrong_job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_job.status().message(),
              HasSubstr(absl::StrCat("its job is ", job->job_id(), ", not ", other_job->job_id())));

  ClientPosition unknown_task;
  unknown_task.set_job_id(job->job_id());
  (*unknown_task.mutable_next_index())[999] = 3;
  auto wrong_task = job->ReadEpoch(0, 0, EncodePosition(unknown_task));
  ASSERT_FALSE(wrong_task.ok());
  EXPECT_EQ(wrong_task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_task.status().message(), HasSubstr("task 999"));
}

TEST_F(ClientReaderTest, WrongEpochOrConsumerIsRejected) {
  FakeWorker a(dispatcher_.address(), "a");
  auto client = Connect();
  auto job = OpenJob(*client);
  auto future = job->ReadEpoch(3);
  ASSERT_FALSE(future.ok());
  EXPECT_EQ(future.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(future.status().message(), HasSubstr("epoch 3"));

  auto consumer = job->ReadEpoch(0, 1);
  ASSERT_FALSE(consumer.ok());
  EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(consumer.status().message(), HasSubstr("consumer 1"));
}

TEST_F(ClientReaderTest, PersistentChecksumMismatchIsDataLossNamingTaskAndIndex) {
  FakeWorker a(dispatcher_.address(), "a");
  a.CorruptAlways(12);
  auto client = Connect();
  auto job = OpenJob(*client);
  auto reader = job->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Delivered delivered;
  const absl::Status status = Read(**reader, &delivered);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 12"));
  EXPECT_THAT(status.message(), HasSubstr("checksum"));
  EXPECT_EQ(delivered.count, 12);  // Everything before the bad element was delivered.
  EXPECT_EQ((*reader)->stats().checksum_mismatches, 3);
}

TEST_F(ClientReaderTest, WorkerDataLossOrOutOfRangeIsPermanent) {
  for (const auto& [code, expected] : std::vector<std::pair<grpc::StatusCode, absl::StatusCode>>{
           {grpc::StatusCode::DATA_LOSS, absl::StatusCode::kDataLoss},
           {grpc::StatusCode::OUT_OF_RANGE, absl::StatusCode::kOutOfRange}}) {
    FakeWorker a(dispatcher_.address(), absl::StrCat("w", code));
    a.SetError(code);
    auto client = Connect();
    auto job = OpenJob(*client);
    auto reader = job->ReadEpoch(0);
    ASSERT_TRUE(reader.ok()) << reader.status();
    Delivered delivered;
    const absl::Status status = Read(**reader, &delivered);
    EXPECT_EQ(status.code(), expected) << status;
    EXPECT_THAT(status.message(), HasSubstr("fake: injected error"));
    EXPECT_THAT(status.message(), HasSubstr(a.address()));
    a.Crash();
  }
}

TEST_F(ClientReaderTest, LostWorkersTaskFailsOverToAnother) {
  auto a = std::make_unique<FakeWorker>(dispatcher_.address(), "a");
  FakeWorker b(dispatcher_.address(), "b");
  a->SetProducedLimit(15);  // a's task cannot complete before a is gone.
  auto client = Connect();
  auto job = OpenJob(*client);
  auto reader = job->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Delivered delivered;
  ASSERT_TRUE(Read(**reader, &delivered, 20).ok());
  const auto crash = std::chrono::steady_clock::now();
  a->Crash();  // The dispatcher declares it lost after 1 s and moves its task to b.
  ASSERT_TRUE(Read(**reader, &delivered).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - crash, std::chrono::milliseconds(900));
  ExpectExactlyOnce(delivered, 2);
  EXPECT_GT((*reader)->stats().retries, 0);
}

TEST_F(ClientReaderTest, StalledWorkerMakesNextUnavailableThenRecovers) {
  FakeWorker a(dispatcher_.address(), "a");
  a.SetUnavailable(true);
  auto client = Connect(/*stall_timeout_ms=*/500);
  auto job = OpenJob(*client);
  auto reader = job->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ElementProto element;
  bool end = false;
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = (*reader)->Next(&element, &end);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr(a.address()));
  EXPECT_THAT(status.message(), HasSubstr("fake: unavailable"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  a.SetUnavailable(false);
  Delivered delivered;
  ASSERT_TRUE(Read(**reader, &delivered).ok());
  ExpectExactlyOnce(delivered, 1);
}

// Consumer 0 of `job_id`, taken over from the Job that started the epoch, for a reader made
// here on `connection`.
std::shared_ptr<ReaderLease> TakeOverConsumer0(std::shared_ptr<Connection> connection,
                                               int64_t job_id) {
  auto lease = ReaderLease::Claim(std::move(connection), job_id, 0, ReaderIdentity::New(),
                                  /*takeover=*/true);
  EXPECT_TRUE(lease.ok()) << lease.status();
  return lease.ok() ? *lease : nullptr;
}

// Issue 13, layering: the stall timeout runs on the connection's Env clock. With an hour's
// timeout on a clock the test moves, Next gives up as soon as the hour has "passed".
TEST_F(ClientReaderTest, StallTimeoutRunsOnTheEnvClock) {
  FakeWorker a(dispatcher_.address(), "a");
  a.SetUnavailable(true);
  auto client = Connect();
  auto job = OpenJob(*client);
  ASSERT_TRUE(job->ReadEpoch(0).ok());  // Starts the epoch.

  ManualClockEnv clock(Env::Default());
  ClientOptions options;
  options.dispatcher_address = dispatcher_.address();
  options.insecure = true;
  options.stall_timeout_ms = 3'600'000;
  auto connection = Connection::Open(options, &clock);
  ASSERT_TRUE(connection.ok()) << connection.status();
  auto reader = GrpcEpochReader::Start(*connection, job->job_id(), 0, 0, nullptr, COMPRESSION_NONE,
                                       TakeOverConsumer0(*connection, job->job_id()));
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::thread mover([&clock] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    clock.AdvanceMicros(3'601'000'000);
  });
  ReceivedElement element;
  bool end = false;
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = (*reader)->Next(&element, &end);
  mover.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("no worker answered for 3600000 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// The first ClientHeartbeat of an epoch (GrpcEpochReader::Start) failing mid-call — the
// connection to the dispatcher reset after the request went out, Unavailable — is asked again,
// as every dispatcher call is; `granary run` exited on it (found by `granary chaos --scenario
// proxy_truncate --seed 111`: the client's link to the dispatcher cut mid-message).
TEST_F(ClientReaderTest, AnEpochsFirstHeartbeatFailingMidCallIsAskedAgain) {
  FakeWorker a(dispatcher_.address(), "a");
  auto client = Connect();
  auto job = OpenJob(*client);
  ASSERT_TRUE(job->ReadEpoch(0).ok());  // Starts the epoch.

  auto proxy = TcpProxy::Start(dispatcher_.address());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ClientOptions options;
  options.dispatcher_address = (*proxy)->address();
  options.insecure = true;
  auto connection = Connection::Open(options);
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::shared_ptr<ReaderLease> lease = TakeOverConsumer0(*connection, job->job_id());
  ProxyToxics silent;
  silent.half_open = true;
  (*proxy)->SetToxics(ProxyDirection::kToClient, silent);  // The heartbeat's answer is held…
  std::thread resetter([&proxy] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    (*proxy)->ResetConnections();  // …and the connection reset under the call.
    (*proxy)->ClearToxics();
  });
  auto reader =
      GrpcEpochReader::Start(*connection, job->job_id(), 0, 0, nullptr, COMPRESSION_NONE, lease);
  resetter.join();
  ASSERT_TRUE(reader.ok()) << reader.status();
  Delivered delivered;
  ASSERT_TRUE(Read(**reader, &delivered).ok());
  ExpectExactlyOnce(delivered, 1);
}

// The connection a Client, its Jobs and readers share, with shared memory on, on `clock`.
std::shared_ptr<Connection> OpenShmConnection(const std::string& dispatcher_address, Env* clock) {
  ClientOptions options;
  options.dispatcher_address = dispatcher_address;
  options.insecure = true;
  options.shared_memory = true;
  auto connection = Connection::Open(options, clock);
  EXPECT_TRUE(connection.ok()) << connection.status();
  return connection.ok() ? *std::move(connection) : nullptr;
}

// While one reader waits up to the hello timeout on a worker's shared-memory socket whose
// listener is silent, the other readers of the connection go on: its channels are handed out,
// and the same worker is read over TCP meanwhile.
TEST_F(ClientReaderTest, ConnectingToASilentShmSocketBlocksNoOtherCaller) {
  std::shared_ptr<Connection> connection = OpenShmConnection(dispatcher_.address(), Env::Default());
  ASSERT_NE(connection, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:silent-shm-", ::getpid());
  const std::string nonce = "000000005113e700";
  testing::ShmSquatter silent(ShmSocketName(address, nonce).substr(1), std::nullopt);
  ASSERT_TRUE(silent.bound());
  std::shared_ptr<ElementChannel> first;
  std::thread connecting([&] { first = connection->ElementChannelTo(address, nonce); });
  // Accepted: the first caller now waits for a hello that never comes.
  while (silent.connections() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(connection->WorkerChannel("127.0.0.1:1"), nullptr);
  EXPECT_STREQ(connection->ElementChannelTo(address, nonce)->name(), kTcpTransport);
  const int64_t took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  connecting.join();
  EXPECT_LT(took_ms, 500) << "the other callers waited " << took_ms << " ms for the connect";
  EXPECT_STREQ(first->name(), kTcpTransport);
  EXPECT_EQ(silent.connections(), 1) << "a second caller connected to the silent socket too";
}

// A listener that sent no hello in time may have been the worker, too busy to answer: its
// socket is left alone for a while (the worker is read over TCP), then tried again.
TEST_F(ClientReaderTest, ASilentShmSocketIsTriedAgainLater) {
  ManualClockEnv clock(Env::Default());
  std::shared_ptr<Connection> connection = OpenShmConnection(dispatcher_.address(), &clock);
  ASSERT_NE(connection, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:busy-shm-", ::getpid());
  const std::string nonce = "00000000b0500000";
  const std::string name = ShmSocketName(address, nonce).substr(1);
  auto busy = std::make_unique<testing::ShmSquatter>(name, std::nullopt);
  ASSERT_TRUE(busy->bound());
  EXPECT_STREQ(connection->ElementChannelTo(address, nonce)->name(), kTcpTransport);
  EXPECT_EQ(busy->connections(), 1);
  busy.reset();
  ShmMessage hello;
  hello.type = ShmMessage::kHello;
  hello.a = 9;
  hello.b = static_cast<uint64_t>(::getpid());
  testing::ShmSquatter answering(name, hello);
  ASSERT_TRUE(answering.bound());
  EXPECT_STREQ(connection->ElementChannelTo(address, nonce)->name(), kTcpTransport);
  EXPECT_EQ(answering.connections(), 0) << "tried again before the back-off passed";
  clock.AdvanceMicros(Connection::kShmRetryAfterSilenceMicros);
  std::shared_ptr<ElementChannel> channel = connection->ElementChannelTo(address, nonce);
  auto* shm = dynamic_cast<ShmElementChannel*>(channel.get());
  ASSERT_NE(shm, nullptr) << "not tried again after the back-off";
  EXPECT_EQ(shm->session(), 9u);
}

TEST_F(ClientReaderTest, DestructorCancelsCallsInFlight) {
  FakeWorker a(dispatcher_.address(), "a");
  a.SetHang(true);
  auto client = Connect();
  auto job = OpenJob(*client);
  auto reader = job->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  while (a.calls() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto start = std::chrono::steady_clock::now();
  reader->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(ClientConnectTest, UnreachableDispatcherIsUnavailableNamingIt) {
  ClientOptions options;
  options.dispatcher_address = "127.0.0.1:1";
  options.insecure = true;
  options.rpc_timeout_ms = 300;
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr("127.0.0.1:1"));
}

TEST(ClientDispatcherRetryTest, ADispatcherDyingMidCallIsAskedAgainAfterItsRestart) {
  // The dispatcher crashes at its second journal write (the first names the cluster) — inside
  // RegisterDataset, after the record is durable, before it answers — and comes back at the same
  // address: the client's RegisterPipeline and OpenJob still succeed (found by `granary chaos
  // --soak`).
  testing::ScopedTempDir dir;
  const std::string journal = "--journal_dir=" + dir.Join("journal");
  Subprocess first({GRANARY_BINARY, "dispatcher", "--insecure", journal, "--port=0"},
                   Subprocess::Stderr::kInherit, "",
                   {"GRANARY_FAILPOINTS=journal.after_write_before_apply=after(2):crash"});
  const std::string address = first.ReadListenAddress();
  ASSERT_FALSE(address.empty());
  ClientOptions options;
  options.dispatcher_address = address;
  options.insecure = true;
  options.stall_timeout_ms = 30000;
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();

  // The restart runs on a thread that lives until the end of the test: a Subprocess dies with
  // the thread that started it.
  int first_exit = -1;
  std::unique_ptr<Subprocess> second;
  absl::Notification restarted, done;
  std::thread restarter([&] {
    first_exit = first.Wait();
    second = std::make_unique<Subprocess>(
        std::vector<std::string>{GRANARY_BINARY, "dispatcher", "--insecure", journal,
                                 "--port=" + address.substr(address.rfind(':') + 1)});
    second->ReadListenAddress();
    restarted.Notify();
    done.WaitForNotification();
  });
  auto dataset = (*client)->RegisterPipeline(PipelineBuilder::Range(100).Build());
  auto job = dataset.ok() ? (*client)->OpenJob(*dataset, {.name = "retried"})
                          : absl::StatusOr<std::unique_ptr<Job>>(dataset.status());
  restarted.WaitForNotification();
  done.Notify();
  restarter.join();
  EXPECT_EQ(first_exit, kFailpointCrashExitCode);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_TRUE(job.ok()) << job.status();
}

TEST(ClientDispatcherRetryTest, ADispatcherSilentForLongerThanTheRpcTimeoutIsAskedAgain) {
  // The dispatcher is paused (SIGSTOP: the kernel still accepts, nothing answers, as in a
  // partition that drops packets) for 5 rpc timeouts while the client registers a pipeline:
  // the call must be made again once it answers, not fail DeadlineExceeded (found by
  // `granary chaos --scenario partition_oneway --seed 2`: the packets from the dispatcher to the
  // client were dropped for 4 s while the client started an epoch).
  testing::ScopedTempDir dir;
  Subprocess dispatcher({GRANARY_BINARY, "dispatcher", "--insecure",
                         "--journal_dir=" + dir.Join("journal"), "--port=0"});
  const std::string address = dispatcher.ReadListenAddress();
  ASSERT_FALSE(address.empty());
  ClientOptions options;
  options.dispatcher_address = address;
  options.insecure = true;
  options.rpc_timeout_ms = 200;
  options.stall_timeout_ms = 30000;
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  dispatcher.Pause();
  std::thread resumer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * options.rpc_timeout_ms));
    dispatcher.Kill(SIGCONT);
  });
  const auto start = std::chrono::steady_clock::now();
  auto dataset = (*client)->RegisterPipeline(PipelineBuilder::Range(100).Build());
  resumer.join();
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(5 * options.rpc_timeout_ms))
      << "the call was answered while the dispatcher was paused";
}

}  // namespace
}  // namespace granary
