// A real `granary dispatcher` process, SIGKILLed in the middle of a stream of worker
// registrations and split leases, restarts from its journal with every acknowledged update
// intact: each acknowledged incarnation and each acknowledged (task, seq) -> split is answered
// the same way by the restarted process. And it validates pipelines from declarations and
// --plugin libraries (PipelineSpec) with the errors a worker's Pipeline would give.
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline_loader.h"
#include "proto/dispatcher.grpc.pb.h"
#include "testing/scoped_temp_dir.h"
#include "testing/scoped_tmpfs.h"

namespace granary {
namespace {

class DispatcherProcess {
 public:
  explicit DispatcherProcess(const std::string& journal_dir,
                             const std::vector<std::string>& more_flags = {})
      : process_([&] {
          std::vector<std::string> argv = {GRANARY_BINARY, "dispatcher",
                                           "--insecure",   "--journal_dir=" + journal_dir,
                                           "--port=0",     "--snapshot_every=50"};
          argv.insert(argv.end(), more_flags.begin(), more_flags.end());
          return argv;
        }()) {
    address_ = process_.ReadListenAddress();
    EXPECT_FALSE(address_.empty()) << "the dispatcher announced no address";
    stub_ = Dispatcher::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  Dispatcher::Stub& stub() { return *stub_; }
  const std::string& address() const { return address_; }
  Subprocess& process() { return process_; }

 private:
  Subprocess process_;
  std::string address_;
  std::unique_ptr<Dispatcher::Stub> stub_;
};

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return context;
}

TEST(DispatcherProcessTest, StatusPrintsAStateLargerThanAGrpcMessage) {
  // Issue 13, defect 3: `granary status` failed past gRPC's default 4 MiB message limit.
  testing::ScopedTempDir dir;
  DispatcherProcess dispatcher(dir.path() + "/journal");
  for (char c : {'x', 'y'}) {
    // 3 MB pipelines: each fits a request; together the state does not fit 4 MiB. (The
    // journal's first record names the cluster.)
    auto def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "range", "params": {"stop": 10}}, "ops": [)",
                     R"({"op": "mark", "params": {"name": ")", std::string(3 << 20, c),
                     R"("}}]})"),
        "big.json");
    ASSERT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    const grpc::Status status = dispatcher.stub().RegisterDataset(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  Subprocess status({GRANARY_BINARY, "status", "--insecure", "--dispatcher=" + dispatcher.address()},
                    Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = status.ReadAll(std::chrono::seconds(60));
  EXPECT_EQ(status.Wait(), 0) << output;
  EXPECT_NE(output.find("journal: 3 records applied"), std::string::npos) << output;
}

TEST(DispatcherProcessTest, SigkillMidStreamLosesNoAcknowledgedUpdate) {
  testing::ScopedTempDir dir;
  const std::string journal = dir.path() + "/journal";
  auto dispatcher = std::make_unique<DispatcherProcess>(journal);

  // A dataset of 400 splits, a worker and a job with 4 tasks.
  auto def = ParsePipelineJson(
      R"({"source": {"type": "range", "params": {"stop": 4000, "elements_per_split": 10}}})", "p");
  ASSERT_TRUE(def.ok());
  RegisterDatasetRequest dataset_request;
  *dataset_request.mutable_pipeline() = *def;
  RegisterDatasetResponse dataset;
  ASSERT_TRUE(dispatcher->stub().RegisterDataset(Context().get(), dataset_request, &dataset).ok());
  RegisterWorkerRequest worker;
  worker.set_worker_id("w0");
  worker.set_address("127.0.0.1:1");
  RegisterWorkerResponse registered;
  ASSERT_TRUE(dispatcher->stub().RegisterWorker(Context().get(), worker, &registered).ok());
  GetOrCreateJobRequest job_request;
  job_request.set_dataset_id(dataset.dataset_id());
  job_request.set_name("job");
  job_request.mutable_options()->set_num_worker_slots(4);
  GetOrCreateJobResponse job;
  ASSERT_TRUE(dispatcher->stub().GetOrCreateJob(Context().get(), job_request, &job).ok());
  StartEpochRequest epoch_request;
  epoch_request.set_job_id(job.job_id());
  StartEpochResponse epoch;
  ASSERT_TRUE(dispatcher->stub().StartEpoch(Context().get(), epoch_request, &epoch).ok());
  ASSERT_EQ(epoch.num_tasks(), 4);

  // Four streams, one per task, lease splits and register workers as fast as they can.
  absl::Mutex mu;
  std::map<std::pair<int64_t, int64_t>, uint64_t> acked_splits;  // (task, seq) -> split id
  std::map<std::string, int64_t> acked_incarnations;
  std::atomic<int64_t> acks{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> streams;
  for (int64_t task = 1; task <= 4; ++task) {
    streams.emplace_back([&, task] {
      int64_t seq = 0;
      for (int i = 0; !stop; ++i) {
        if (i % 3 == 0) {
          RegisterWorkerRequest w;
          w.set_worker_id(absl::StrCat("w", task));
          w.set_address("127.0.0.1:2");
          RegisterWorkerResponse r;
          if (!dispatcher->stub().RegisterWorker(Context().get(), w, &r).ok()) continue;
          absl::MutexLock lock(&mu);
          acked_incarnations[w.worker_id()] = r.incarnation();
        } else {
          GetSplitsRequest request;
          request.set_task_id(task);
          request.set_from_seq(seq);
          request.set_max(1);
          GetSplitsResponse r;
          if (!dispatcher->stub().GetSplits(Context().get(), request, &r).ok()) continue;
          if (r.splits_size() == 0) continue;
          absl::MutexLock lock(&mu);
          acked_splits[{task, seq++}] = r.splits(0).id();
        }
        ++acks;
      }
    });
  }
  while (acks < 200) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  dispatcher->process().Kill(SIGKILL);
  EXPECT_EQ(dispatcher->process().Wait(), 128 + SIGKILL);
  stop = true;
  for (std::thread& t : streams) t.join();

  dispatcher = std::make_unique<DispatcherProcess>(journal);
  absl::MutexLock lock(&mu);
  ASSERT_GE(acked_splits.size(), 100u);
  for (const auto& [key, split_id] : acked_splits) {
    GetSplitsRequest request;
    request.set_task_id(key.first);
    request.set_from_seq(key.second);
    request.set_max(1);
    GetSplitsResponse r;
    const grpc::Status status = dispatcher->stub().GetSplits(Context().get(), request, &r);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(r.splits_size(), 1) << "task " << key.first << " seq " << key.second;
    EXPECT_EQ(r.splits(0).id(), split_id) << "task " << key.first << " seq " << key.second;
  }
  GetStatusResponse status;
  ASSERT_TRUE(dispatcher->stub().GetStatus(Context().get(), GetStatusRequest(), &status).ok());
  for (const auto& [id, incarnation] : acked_incarnations) {
    bool found = false;
    for (const WorkerState& w : status.state().workers()) {
      if (w.worker_id() == id) {
        found = true;
        EXPECT_GE(w.incarnation(), incarnation) << id;
      }
    }
    EXPECT_TRUE(found) << id;
  }
}

TEST(DispatcherProcessTest, SecondDispatcherOnTheSameJournalFailsClearly) {
  testing::ScopedTempDir dir;
  const std::string journal = dir.path() + "/journal";
  DispatcherProcess first(journal);
  Subprocess second({GRANARY_BINARY, "dispatcher", "--insecure", "--journal_dir=" + journal, "--port=0"},
                    Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = second.ReadAll(std::chrono::seconds(10));
  EXPECT_EQ(second.Wait(), 1);
  EXPECT_NE(output.find(journal), std::string::npos) << output;
  EXPECT_NE(output.find("in use"), std::string::npos) << output;
  EXPECT_TRUE(first.process().running());
}

// Cache flags out of range are refused at start, naming the flag.
TEST(DispatcherProcessTest, OutOfRangeCacheFlagsAreRefusedByName) {
  testing::ScopedTempDir dir;
  for (const auto& [flag, named] : std::vector<std::pair<std::string, std::string>>{
           {"--cache_capacity_bytes=-1", "--cache_capacity_bytes -1: must be 0"},
           {"--cache_profile_records=0", "--cache_profile_records 0: must be at least 1"}}) {
    Subprocess dispatcher({GRANARY_BINARY, "dispatcher", "--insecure",
                           "--journal_dir=" + dir.path() + "/journal", "--port=0",
                           "--cache_root=" + dir.path() + "/cache", flag},
                          Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = dispatcher.ReadAll(std::chrono::seconds(10));
    EXPECT_EQ(dispatcher.Wait(), 1) << flag;
    EXPECT_NE(output.find(named), std::string::npos) << output;
  }
}

// Issue 30: Redis cache roots the tier cannot honour, and Redis credential flags that do not
// add up, are refused at start naming the part at fault — never the password.
TEST(DispatcherProcessTest, UnsupportedRedisCacheRootsAndCredentialFlagsAreRefusedByName) {
  testing::ScopedTempDir dir;
  const std::string password = "hunter2-is-not-a-password";
  const std::string empty_file = dir.path() + "/empty-password";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), empty_file, "\n", false).ok());
  for (const auto& [flags, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--cache_root=rediss://127.0.0.1:6380/granary"},
            "--cache_root: cache tier rediss://127.0.0.1:6380: rediss:// (Redis over TLS) is not "
            "supported"},
           {{"--cache_root=redis://:" + password + "@127.0.0.1:6379/granary"},
            "--cache_root: cache tier redis://<elided>@127.0.0.1:6379: a user or password in the "
            "URL is not supported"},
           {{"--cache_root=redis://granary:" + password + "@127.0.0.1:6379/granary"},
            "give the password in a file with --redis_password_file"},
           {{"--redis_user=granary"}, "--redis_user granary needs --redis_password_file"},
           {{"--redis_password_file=" + dir.path() + "/missing"}, "--redis_password_file"},
           {{"--redis_password_file=" + empty_file}, empty_file + ": empty (no password in it)"}}) {
    std::vector<std::string> argv = {GRANARY_BINARY, "dispatcher", "--insecure",
                                     "--journal_dir=" + dir.path() + "/journal", "--port=0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Subprocess dispatcher(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = dispatcher.ReadAll(std::chrono::seconds(10));
    EXPECT_EQ(dispatcher.WaitFor(std::chrono::seconds(10)), 1) << flags[0];  // -1: it started
    EXPECT_NE(output.find(named), std::string::npos) << output;
    EXPECT_EQ(output.find(password), std::string::npos) << "the password was printed: " << output;
  }
}

// What an operator sees: `granary status` against a running dispatcher, and
// `granary journal dump` of its journal once it is stopped (SIGTERM: a clean shutdown).
TEST(DispatcherProcessTest, StatusAndJournalDumpShowTheState) {
  testing::ScopedTempDir dir;
  const std::string journal = dir.path() + "/journal";
  auto dispatcher = std::make_unique<DispatcherProcess>(journal);
  RegisterWorkerRequest worker;
  worker.set_worker_id("worker-7");
  worker.set_address("127.0.0.1:7007");
  RegisterWorkerResponse registered;
  ASSERT_TRUE(dispatcher->stub().RegisterWorker(Context().get(), worker, &registered).ok());

  Subprocess status({GRANARY_BINARY, "status", "--insecure", "--dispatcher=" + dispatcher->address()},
                    Subprocess::Stderr::kMergeIntoStdout);
  std::string output = status.ReadAll(std::chrono::seconds(10));
  EXPECT_EQ(status.Wait(), 0) << output;
  EXPECT_NE(output.find("worker-7"), std::string::npos) << output;
  EXPECT_NE(output.find("127.0.0.1:7007"), std::string::npos) << output;

  dispatcher->process().Kill(SIGTERM);
  EXPECT_EQ(dispatcher->process().Wait(), 0);
  Subprocess dump({GRANARY_BINARY, "journal", "dump", "--journal_dir=" + journal});
  output = dump.ReadAll(std::chrono::seconds(10));
  EXPECT_EQ(dump.Wait(), 0) << output;
  EXPECT_NE(output.find(R"({"seq":2,"update":{"register_worker":{"worker_id":"worker-7")"),
            std::string::npos)
      << output;
}

// A full disk (issue 13, defect 6) on a 4 MiB tmpfs holding the journal: an update that cannot
// be journaled is refused with Unavailable while the process keeps running and answering reads;
// once space is freed updates work again, and a restart finds exactly the acknowledged ones.
// A dispatcher started on a full disk exits with an error (no abort) and starts once space
// returns.
TEST(DispatcherProcessTest, FullDiskRefusesUpdatesKeepsServingAndRecovers) {
  testing::ScopedTmpfs fs(4 << 20);
  if (!fs.ok()) GTEST_SKIP() << fs.skip_reason();
  const std::string journal = fs.Join("journal");
  auto register_worker = [](DispatcherProcess& dispatcher, const std::string& id) {
    RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_address("127.0.0.1:1");
    RegisterWorkerResponse response;
    return dispatcher.stub().RegisterWorker(Context().get(), request, &response);
  };
  // The ids of the registered workers GetStatus lists (a test failure if it does not answer).
  auto workers = [](DispatcherProcess& dispatcher) {
    GetStatusResponse status;
    const grpc::Status rpc = dispatcher.stub().GetStatus(Context().get(), {}, &status);
    EXPECT_TRUE(rpc.ok()) << rpc.error_message();
    std::set<std::string> ids;
    for (const auto& worker : status.state().workers()) ids.insert(worker.worker_id());
    return ids;
  };

  std::set<std::string> acknowledged;
  auto dispatcher = std::make_unique<DispatcherProcess>(journal);
  ASSERT_TRUE(register_worker(*dispatcher, "before").ok());
  acknowledged.insert("before");

  fs.Fill("filler");
  grpc::Status refused;
  for (int i = 0; i < 100 && refused.ok(); ++i) {
    const std::string id = absl::StrCat("while-full-", i);
    refused = register_worker(*dispatcher, id);
    if (refused.ok()) acknowledged.insert(id);
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_NE(refused.error_message().find("out of disk space"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(register_worker(*dispatcher, "refused").error_code(), grpc::StatusCode::UNAVAILABLE);
  ASSERT_EQ(dispatcher->process().WaitFor(std::chrono::milliseconds(0)), -1) << "it died";
  EXPECT_EQ(workers(*dispatcher), acknowledged);

  ASSERT_TRUE(std::filesystem::remove(fs.Join("filler")));
  const grpc::Status after = register_worker(*dispatcher, "after");
  ASSERT_TRUE(after.ok()) << after.error_message();
  acknowledged.insert("after");
  EXPECT_EQ(workers(*dispatcher), acknowledged);
  ASSERT_EQ(dispatcher->process().WaitFor(std::chrono::milliseconds(0)), -1) << "it died";

  // A clean restart finds exactly the acknowledged updates.
  dispatcher->process().Kill(SIGTERM);
  EXPECT_EQ(dispatcher->process().Wait(), 0);
  dispatcher = std::make_unique<DispatcherProcess>(journal);
  EXPECT_EQ(workers(*dispatcher), acknowledged);
  dispatcher->process().Kill(SIGTERM);
  EXPECT_EQ(dispatcher->process().Wait(), 0);
  dispatcher.reset();

  // Starting on a full disk: an error exit, not an abort.
  fs.Fill("filler");
  {
    Subprocess full({GRANARY_BINARY, "dispatcher", "--insecure", "--journal_dir=" + journal, "--port=0"},
                    Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = full.ReadAll(std::chrono::seconds(20));
    if (output.find("listening on") == std::string::npos) {
      EXPECT_EQ(full.Wait(), 1) << output;
      EXPECT_NE(output.find("out of disk space"), std::string::npos) << output;
    }
  }
  ASSERT_TRUE(std::filesystem::remove(fs.Join("filler")));
  dispatcher = std::make_unique<DispatcherProcess>(journal);
  EXPECT_EQ(workers(*dispatcher), acknowledged);
}

// A deleted RocksDB WAL (issue 13, defect 5): the dispatcher refuses to start, naming the WAL and
// the lost records, instead of starting with an older state.
TEST(DispatcherProcessTest, DeletedWalRefusesToStartNamingTheLostRecords) {
  testing::ScopedTempDir dir;
  const std::string journal = dir.path() + "/journal";
  {
    DispatcherProcess dispatcher(journal);
    for (const char* id : {"w0", "w1", "w2"}) {
      RegisterWorkerRequest request;
      request.set_worker_id(id);
      request.set_address("127.0.0.1:1");
      RegisterWorkerResponse response;
      ASSERT_TRUE(dispatcher.stub().RegisterWorker(Context().get(), request, &response).ok());
    }
    dispatcher.process().Kill(SIGKILL);
    dispatcher.process().Wait();
  }
  std::string newest_wal;
  for (const auto& entry : std::filesystem::directory_iterator(journal)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".log" && name > newest_wal) {
      newest_wal = name;
    }
  }
  ASSERT_FALSE(newest_wal.empty());
  ASSERT_TRUE(std::filesystem::remove(journal + "/" + newest_wal));
  Subprocess restarted({GRANARY_BINARY, "dispatcher", "--insecure", "--journal_dir=" + journal, "--port=0"},
                       Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = restarted.ReadAll(std::chrono::seconds(20));
  EXPECT_EQ(restarted.WaitFor(std::chrono::seconds(10)), 1) << output;  // -1: it started
  EXPECT_NE(output.find("WAL " + newest_wal + " missing"), std::string::npos) << output;
  EXPECT_NE(output.find("records 1..4 lost"), std::string::npos) << output;
}

// Issue 30: the journal directory removed (rm -rf) under a running dispatcher. The next
// mutating RPC is Unavailable instead of acknowledged, and so is every later one; a restart over
// the emptied directory is refused naming the lost-journal marker the dispatcher left there
// (instead of silently starting a new, empty cluster); --new_cluster starts one deliberately.
TEST(DispatcherProcessTest, JournalRemovedWhileRunningIsNoticedAndNotSilentlyStartedOver) {
  testing::ScopedTempDir dir;
  const std::string journal = dir.path() + "/journal";
  const auto register_worker = [](DispatcherProcess& dispatcher, const std::string& id) {
    RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_address("127.0.0.1:1");
    RegisterWorkerResponse response;
    return dispatcher.stub().RegisterWorker(Context().get(), request, &response);
  };
  {
    DispatcherProcess dispatcher(journal);
    for (const char* id : {"w0", "w1", "w2"}) ASSERT_TRUE(register_worker(dispatcher, id).ok());
    Subprocess rm({"/bin/rm", "-rf", journal});
    ASSERT_EQ(rm.Wait(), 0);
    for (const char* id : {"w3", "w4"}) {
      const grpc::Status refused = register_worker(dispatcher, id);
      EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE)
          << id << ": " << (refused.ok() ? "acknowledged" : refused.error_message());
      EXPECT_NE(refused.error_message().find(journal + ": the journal directory was deleted"),
                std::string::npos)
          << refused.error_message();
    }
    EXPECT_TRUE(dispatcher.process().running());
    dispatcher.process().Kill(SIGTERM);
    dispatcher.process().Wait();
  }
  Subprocess restarted(
      {GRANARY_BINARY, "dispatcher", "--insecure", "--journal_dir=" + journal, "--port=0"},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = restarted.ReadAll(std::chrono::seconds(20));
  EXPECT_EQ(restarted.WaitFor(std::chrono::seconds(10)), 1) << output;  // -1: it started
  EXPECT_NE(output.find("GRANARY-JOURNAL-LOST says"), std::string::npos) << output;
  // The cluster's id and the three registrations.
  EXPECT_NE(output.find("records 1..4 had been acknowledged and are lost"), std::string::npos)
      << output;
  EXPECT_NE(output.find("--new_cluster"), std::string::npos) << output;

  DispatcherProcess fresh(journal, {"--new_cluster"});
  ASSERT_FALSE(fresh.address().empty());
  EXPECT_TRUE(register_worker(fresh, "w0").ok()) << "the new cluster takes changes";
  EXPECT_FALSE(std::filesystem::exists(journal + "/GRANARY-JOURNAL-LOST"));
}

// The journal directory removed while the dispatcher was down (SIGKILLed: no lost-journal
// marker): its cache root still names the cluster, so a restart over a new journal is refused
// naming that evidence, until --new_cluster.
TEST(DispatcherProcessTest, JournalRemovedWhileDownIsCaughtByTheCacheRootsOwner) {
  testing::ScopedTempDir dir;
  const std::string journal = dir.path() + "/journal";
  const std::string cache_root = "--cache_root=" + dir.path() + "/cache";
  {
    DispatcherProcess dispatcher(journal, {cache_root});
    ASSERT_FALSE(dispatcher.address().empty());
    dispatcher.process().Kill(SIGKILL);
    dispatcher.process().Wait();
  }
  std::filesystem::remove_all(journal);
  Subprocess restarted({GRANARY_BINARY, "dispatcher", "--insecure", "--journal_dir=" + journal,
                        "--port=0", cache_root},
                       Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = restarted.ReadAll(std::chrono::seconds(20));
  EXPECT_EQ(restarted.WaitFor(std::chrono::seconds(10)), 1) << output;  // -1: it started
  EXPECT_NE(output.find(dir.path() + "/cache/GRANARY-CLUSTER"), std::string::npos) << output;
  EXPECT_NE(output.find("that cluster's journal seems lost"), std::string::npos) << output;

  DispatcherProcess fresh(journal, {cache_root, "--new_cluster"});
  EXPECT_FALSE(fresh.address().empty()) << "--new_cluster did not start";
}

// The dispatcher validates with the built-in declarations (no UDF implementation) and a
// plugin's UDF, which declares no validate, by building it: bad params are refused at
// RegisterDataset naming the op, the UDF and the param; good ones are registered.
TEST(DispatcherProcessTest, ValidatesBuiltinAndPluginUdfParamsAtRegistration) {
  testing::ScopedTempDir dir;
  DispatcherProcess dispatcher(dir.path() + "/journal",
                               {std::string("--plugin=") + GRANARY_EXAMPLE_PLUGIN});
  const auto register_op = [&](const std::string& op) {
    auto def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "range", "params": {"stop": 10}}, "ops": [)", op,
                     "]}"),
        "p.json");
    EXPECT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    return dispatcher.stub().RegisterDataset(Context().get(), request, &response);
  };
  const grpc::Status bad_plugin =
      register_op(R"({"op": "map", "udf": "random_jitter", "udfParams": {"amplitude": -1}})");
  EXPECT_EQ(bad_plugin.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_plugin.error_message(),
              ::testing::HasSubstr("invalid pipeline: op 0 (map, udf 'random_jitter'): param "
                                   "'amplitude' must not be negative"));
  const grpc::Status bad_builtin =
      register_op(R"({"op": "map", "udf": "random_crop", "udfParams": {"fraction": 2}})");
  EXPECT_EQ(bad_builtin.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_builtin.error_message(),
              ::testing::HasSubstr("op 0 (map, udf 'random_crop'): param 'fraction' must be in "
                                   "(0, 1], got 2"));
  const grpc::Status unknown = register_op(R"({"op": "map", "udf": "random_crp"})");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown.error_message(),
              ::testing::HasSubstr("op 0 (map, udf 'random_crp'): unknown UDF (known: "));
  EXPECT_THAT(unknown.error_message(), ::testing::HasSubstr("random_jitter"));
  const grpc::Status good =
      register_op(R"({"op": "map", "udf": "random_jitter", "udfParams": {"amplitude": 5}},
                     {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.5}})");
  EXPECT_TRUE(good.ok()) << good.error_message();
}

}  // namespace
}  // namespace granary
