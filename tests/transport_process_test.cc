// The data plane's transports end to end (issue 14), against real dispatcher and worker
// processes on 127.0.0.1:
//  * every transport delivers exactly `granary local`'s bytes: the ResNet-style example (batches
//    of float32 crops, over a megabyte each) with 1 and 2 workers and 2 consumers, over TCP,
//    TCP compressed with LZ4 and with Zstandard, and shared memory (which must then carry every
//    batch) — over TCP with the pipeline's normalize run by the client (the trainer-side tail),
//    over shared memory by the workers, and where JobSpec.tail puts it otherwise;
//  * a trainer's element outlives its reader, its client and its worker (killed and restarted):
//    its views still hold the same bytes (under AddressSanitizer, also valid memory);
//  * SIGKILLed clients and workers leave nothing behind: no /dev/shm file at any point, and a
//    worker whose client died drops that client's session and its holds;
//  * local processes squatting a worker's shared-memory socket names neither stop it serving
//    shared memory nor hang its clients (issue 30).
#include <chrono>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "gtest/gtest.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/pipeline_loader.h"
#include "tools/synthetic_imagenet.h"
#include "testing/scoped_temp_dir.h"
#include "transport/shm_test_util.h"
#include "tests/local_cluster.h"
#include "tests/run_outputs.h"

namespace granary {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using testing::ReadDigests;

constexpr int64_t kImages = 256;

class TransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticImagenetOptions data;
    data.out_dir = dir_.Join("data");
    data.images = kImages;
    data.files = 4;
    data.size = 48;
    ASSERT_TRUE(WriteSyntheticImagenet(Env::Default(), data).ok());
    ::setenv("GRANARY_DATA", data.out_dir.c_str(), 1);
    pipeline_ = std::string(std::getenv("GRANARY_SOURCE_DIR")) + "/examples/imagenet_resnet.json";
    Subprocess local({GRANARY_BINARY, "local", "--pipeline=" + pipeline_, "--epochs=2",
                      "--seed=3", "--digest_out=" + dir_.Join("local.digest")},
                     Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = local.ReadAll();
    ASSERT_EQ(local.Wait(), 0) << output;
    local_ = ReadDigests(dir_.Join("local.digest"));
  }

  // `granary run` of two epochs as job `name`, one element per request, one request at a time,
  // 100 ms per batch: the client pulls no faster than it trains, so its tasks stay on the
  // worker (unacknowledged) while it runs.
  std::vector<std::string> SlowRunArgv(const std::string& dispatcher, const std::string& name) {
    return {GRANARY_BINARY, "run", "--insecure", "--dispatcher=" + dispatcher,
            "--pipeline=" + pipeline_, "--epochs=2", "--seed=3", "--job_name=" + name,
            "--step_ms=100", "--max_request_bytes=1", "--max_outstanding_requests=1",
            "--position_file=" + dir_.Join(name + ".position"),
            "--digest_out=" + dir_.Join(name + ".digest")};
  }
  // Waits (up to 60 s) until run `name` has delivered 64 rows.
  void WaitForRows(const std::string& name) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (testing::PositionRows(dir_.Join(name + ".position")) < 64) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Run `name` ends (within 120 s) with both epochs exactly `granary local`'s; its output.
  std::string ExpectExactlyOnce(Subprocess& run, const std::string& name) {
    const std::string output = run.ReadAll(std::chrono::seconds(120));
    EXPECT_EQ(run.Wait(), 0) << output;
    const auto digests = ReadDigests(dir_.Join(name + ".digest"));
    EXPECT_EQ(digests.size(), 2u) << output;
    for (const auto& [epoch, d] : digests) {
      EXPECT_EQ(d.rows, kImages) << "epoch " << epoch;
      EXPECT_EQ(d.multiset, local_.at(epoch).multiset) << "epoch " << epoch;
    }
    return output;
  }

  testing::ScopedTempDir dir_;
  std::string pipeline_;
  std::map<int64_t, DigestLine> local_;
};

class TransportMatrixTest : public TransportTest,
                            public ::testing::WithParamInterface<std::tuple<std::string, int>> {};

TEST_P(TransportMatrixTest, TwoConsumersTogetherGetLocalsBytes) {
  const auto [transport, workers] = GetParam();
  const bool shm = transport == "shm";
  testing::LocalCluster cluster(
      dir_.Join("cluster"),
      {.workers = workers, .worker_flags = {shm ? "--local_transport=shm" : "--local_transport=tcp"}});
  ASSERT_TRUE(cluster.ok());
  std::vector<std::unique_ptr<Subprocess>> runs;
  for (int c = 0; c < 2; ++c) {
    std::vector<std::string> argv = {GRANARY_BINARY, "run", "--insecure",
                                     "--dispatcher=" + cluster.dispatcher_address(),
                                     "--pipeline=" + pipeline_, "--epochs=2", "--seed=3",
                                     "--job_name=j", "--num_consumers=2",
                                     absl::StrCat("--consumer=", c),
                                     "--digest_out=" + dir_.Join(absl::StrCat("run", c, ".digest"))};
    if (!shm) argv.push_back("--noshared_memory");
    if (transport == "lz4" || transport == "zstd") argv.push_back("--compression=" + transport);
    runs.push_back(std::make_unique<Subprocess>(argv, Subprocess::Stderr::kMergeIntoStdout));
  }
  int64_t elements = 0;
  for (auto& run : runs) {
    const std::string output = run->ReadAll();
    ASSERT_EQ(run->Wait(), 0) << output;
    // Every batch by segment over shared memory, none over TCP. Over TCP the workers leave the
    // pipeline's normalize to the client (tail auto): it runs on every batch.
    const std::regex line(R"(: (\d+) elements, .*; (\d+) by shared memory; (\d+) normalized here)");
    for (std::sregex_iterator m(output.begin(), output.end(), line), end; m != end; ++m) {
      const int64_t n = std::stoll((*m)[1]);
      EXPECT_EQ(std::stoll((*m)[2]), shm ? n : 0) << output;
      EXPECT_EQ(std::stoll((*m)[3]), shm ? 0 : n) << output;
      elements += n;
    }
  }
  EXPECT_GT(elements, 0);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    int64_t rows = 0;
    uint64_t multiset = 0;
    for (int c = 0; c < 2; ++c) {
      const auto d = ReadDigests(dir_.Join(absl::StrCat("run", c, ".digest")));
      ASSERT_TRUE(d.count(epoch)) << "consumer " << c << " epoch " << epoch;
      rows += d.at(epoch).rows;
      multiset += d.at(epoch).multiset;
    }
    EXPECT_EQ(rows, kImages) << transport << ", epoch " << epoch;
    EXPECT_EQ(multiset, local_[epoch].multiset) << transport << ", epoch " << epoch;
  }
}

// JobSpec.tail overrides where normalize runs, and the bytes stay `granary local`'s: kept on the
// workers over TCP (tail worker), run by the client over shared memory (tail client).
TEST_F(TransportTest, TheTailOptionPutsNormalizeWhereItSaysWithTheSameBytes) {
  // Every batch by segment over shared memory, however small its uint8 images.
  testing::LocalCluster cluster(
      dir_.Join("cluster"),
      {.workers = 2, .worker_flags = {"--local_transport=shm", "--shm_min_bytes=0"}});
  ASSERT_TRUE(cluster.ok());
  for (const auto& [tail, shm] :
       {std::pair<std::string, bool>{"worker", false}, {"client", true}}) {
    const std::string name = "tail_" + tail;
    std::vector<std::string> argv = {GRANARY_BINARY,
                                     "run",
                                     "--insecure",
                                     "--dispatcher=" + cluster.dispatcher_address(),
                                     "--pipeline=" + pipeline_,
                                     "--epochs=2",
                                     "--seed=3",
                                     "--job_name=" + name,
                                     "--tail=" + tail,
                                     "--digest_out=" + dir_.Join(name + ".digest")};
    if (!shm) argv.push_back("--noshared_memory");
    Subprocess run(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = ExpectExactlyOnce(run, name);
    const std::regex line(R"(: (\d+) elements, .*; (\d+) by shared memory; (\d+) normalized here)");
    int64_t epochs = 0;
    for (std::sregex_iterator m(output.begin(), output.end(), line), end; m != end; ++m) {
      const int64_t n = std::stoll((*m)[1]);
      EXPECT_EQ(std::stoll((*m)[2]), shm ? n : 0) << output;
      EXPECT_EQ(std::stoll((*m)[3]), tail == "client" ? n : 0) << output;
      ++epochs;
    }
    EXPECT_EQ(epochs, 2) << output;
  }
  Subprocess bad(
      {GRANARY_BINARY, "run", "--insecure", "--dispatcher=" + cluster.dispatcher_address(),
       "--pipeline=" + pipeline_, "--epochs=1", "--tail=sideways"},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string refused = bad.ReadAll(std::chrono::seconds(30));
  EXPECT_NE(bad.Wait(), 0);
  EXPECT_THAT(refused, HasSubstr("--tail 'sideways' is none of auto, worker, client"));
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportMatrixTest,
                         ::testing::Combine(::testing::Values("tcp", "shm", "lz4", "zstd"),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "_",
                                               std::get<1>(info.param), "workers");
                         });

// Reads the first batch of epoch 0 through a client of its own, then lets the reader, the job
// and the client go.
ReceivedElement FirstBatch(const std::string& dispatcher, const std::string& pipeline,
                           bool shared_memory) {
  ClientOptions options;
  options.dispatcher_address = dispatcher;
  options.insecure = true;
  options.shared_memory = shared_memory;
  auto client = Client::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  auto def = LoadPipelineFile(Env::Default(), pipeline);
  EXPECT_TRUE(def.ok()) << def.status();
  auto dataset = (*client)->RegisterPipeline(*def);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  auto job = (*client)->OpenJob(*dataset, {.seed = 3});
  EXPECT_TRUE(job.ok()) << job.status();
  auto reader = (*job)->ReadEpoch(0);
  EXPECT_TRUE(reader.ok()) << reader.status();
  ReceivedElement batch;
  bool end = true;
  const absl::Status status = (*reader)->Next(&batch, &end);
  EXPECT_TRUE(status.ok() && !end) << status;
  EXPECT_EQ((*reader)->stats().shared_memory_elements, shared_memory ? 1 : 0);
  return batch;
}

uint64_t Digest(const ReceivedElement& batch) {
  EpochDigest digest(/*batched=*/true);
  digest.Add(batch.tensors());
  return digest.multiset();
}

TEST_F(TransportTest, AnElementOutlivesItsReaderClientAndWorker) {
  for (const bool shared_memory : {true, false}) {
    testing::LocalCluster cluster(dir_.Join(shared_memory ? "shm" : "tcp"), {.workers = 1});
    ASSERT_TRUE(cluster.ok());
    const ReceivedElement batch = FirstBatch(cluster.dispatcher_address(), pipeline_, shared_memory);
    ASSERT_FALSE(batch.tensors().empty());
    const uint64_t before = Digest(batch);
    cluster.KillWorker(0);
    ASSERT_TRUE(cluster.RestartWorker(0));
    EXPECT_EQ(Digest(batch), before) << (shared_memory ? "shared memory" : "tcp");
    // A copy shares the bytes and outlives the original.
    ReceivedElement copy = batch;
    {
      ReceivedElement gone = std::move(copy);
      copy = gone;
    }
    EXPECT_EQ(Digest(copy), before);
  }
}

// SIGKILL the client mid-epoch, then the worker, then both: never a file in /dev/shm, the
// worker drops a dead client's session, and a run that outlives a worker kill is exactly once.
TEST_F(TransportTest, KilledClientsAndWorkersLeaveNothingBehind) {
  const std::set<std::string> before = testing::DevShmEntries();
  testing::LocalCluster cluster(dir_.Join("cluster"),
                                {.workers = 1, .worker_flags = {"--local_transport=shm"}});
  ASSERT_TRUE(cluster.ok());
  const auto sessions = [&cluster]() -> int64_t {
    GetWorkerStatusResponse status;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!cluster.WorkerStub(0)->GetWorkerStatus(&context, {}, &status).ok()) return -1;
    EXPECT_TRUE(status.shared_memory());
    return status.shm_sessions();
  };
  const auto run_argv = [&](const std::string& name) {
    return SlowRunArgv(cluster.dispatcher_address(), name);
  };
  const auto wait_for_rows = [&](const std::string& name) { WaitForRows(name); };

  {  // The client dies: its session and holds go.
    Subprocess run(run_argv("a"), Subprocess::Stderr::kMergeIntoStdout);
    wait_for_rows("a");
    EXPECT_EQ(sessions(), 1);
    // What an operator sees: the worker's tasks are read through shared memory. (Asked again
    // while the worker holds no task: between an epoch read to its end and the next.)
    std::string shown;
    for (int attempt = 0; attempt < 50 && shown.find("read by shm") == std::string::npos;
         ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Subprocess status(
          {GRANARY_BINARY, "status", "--insecure", "--dispatcher=" + cluster.dispatcher_address()},
          Subprocess::Stderr::kMergeIntoStdout);
      shown = status.ReadAll();
      EXPECT_EQ(status.Wait(), 0) << shown;
    }
    EXPECT_THAT(shown, HasSubstr("worker worker-0: shared memory for clients on its host, 1 "
                                 "shared-memory sessions"));
    EXPECT_THAT(shown, HasSubstr("read by shm")) << shown;
    EXPECT_THAT(shown, ContainsRegex("buffer pool [0-9]+ MB live, [0-9]+ MB cached, [0-9]+ "
                                     "blocks mapped, [0-9]+ reused"));
    EXPECT_EQ(testing::DevShmEntries(), before);
    run.Kill(SIGKILL);
    run.Wait();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sessions() != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(sessions(), 0) << "the dead client's session is still open";
  }
  {  // The worker dies mid-epoch and comes back: the run finishes exactly once.
    Subprocess run(run_argv("b"), Subprocess::Stderr::kMergeIntoStdout);
    wait_for_rows("b");
    cluster.KillWorker(0);
    EXPECT_EQ(testing::DevShmEntries(), before);
    ASSERT_TRUE(cluster.RestartWorker(0));
    ExpectExactlyOnce(run, "b");
  }
  {  // Both die.
    Subprocess run(run_argv("c"), Subprocess::Stderr::kMergeIntoStdout);
    wait_for_rows("c");
    cluster.KillWorker(0);
    run.Kill(SIGKILL);
    run.Wait();
    EXPECT_EQ(testing::DevShmEntries(), before);
  }
  EXPECT_EQ(testing::DevShmEntries(), before);
}

// Issue 30: other local processes squat the worker's shared-memory socket names while it is
// down — the old-style name "granary-shm:<address>" (then the restarted worker could not bind
// it, and clients waited for that squatter's hello until killed) and the name of the
// incarnation that died, read from /proc/net/unix, which accepts and never says hello. The
// worker still serves shared memory, and a run reading through the kill and restart — which
// may ask the dead incarnation's socket until its heartbeat names the new one — ends exactly
// once.
TEST_F(TransportTest, SquattedSocketNamesNeitherStopTheWorkerNorHangClients) {
  testing::LocalCluster cluster(dir_.Join("cluster"),
                                {.workers = 1, .worker_flags = {"--local_transport=shm"}});
  ASSERT_TRUE(cluster.ok());
  const std::string address = cluster.worker_address(0);
  const std::string first_name = testing::ListeningShmName(address);
  ASSERT_FALSE(first_name.empty()) << "no shared-memory socket of worker " << address;
  Subprocess run(SlowRunArgv(cluster.dispatcher_address(), "squatted"),
                 Subprocess::Stderr::kMergeIntoStdout);
  WaitForRows("squatted");
  cluster.KillWorker(0);
  testing::ShmSquatter old_style("granary-shm:" + address, std::nullopt);
  testing::ShmSquatter dead_incarnation(first_name, std::nullopt);
  ASSERT_TRUE(old_style.bound());
  ASSERT_TRUE(dead_incarnation.bound());
  ASSERT_TRUE(cluster.RestartWorker(0)) << "the worker did not start with its names squatted";
  const auto start = std::chrono::steady_clock::now();
  const std::string output = ExpectExactlyOnce(run, "squatted");
  // What is left of the run after the restart is under a minute at 100 ms per batch; a
  // client waiting on a squatter's hello would sit there until the 120 s read gave up.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(90)) << output;
  // A fresh run learns the new name from the dispatcher and reads every batch through it.
  Subprocess fresh({GRANARY_BINARY, "run", "--insecure",
                    "--dispatcher=" + cluster.dispatcher_address(), "--pipeline=" + pipeline_,
                    "--epochs=2", "--seed=3", "--job_name=fresh",
                    "--digest_out=" + dir_.Join("fresh.digest")},
                   Subprocess::Stderr::kMergeIntoStdout);
  const std::string fresh_output = ExpectExactlyOnce(fresh, "fresh");
  const std::regex line(R"(: (\d+) elements, .*; (\d+) by shared memory)");
  int epochs = 0;
  for (std::sregex_iterator m(fresh_output.begin(), fresh_output.end(), line), end; m != end;
       ++m, ++epochs) {
    EXPECT_EQ(std::stoll((*m)[2]), std::stoll((*m)[1])) << fresh_output;
  }
  EXPECT_EQ(epochs, 2) << fresh_output;
}

}  // namespace
}  // namespace granary
