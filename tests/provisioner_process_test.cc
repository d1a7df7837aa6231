// Provisioners (issue 17) on real processes: a dispatcher with the local provisioner starts
// `granary worker` processes as a scaling step wants them — each takes a task the step doubled
// up — and stops idle ones once the job needs them no more, every element still exactly once;
// a dispatcher whose provisioning command fails says so in its status and goes on serving.
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "gtest/gtest.h"
#include "pipeline/digests/epoch_digest.h"
#include "testing/scoped_temp_dir.h"
#include "tests/in_process_digest.h"
#include "tests/local_cluster.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kSeed = 5;

PipelineDef Pipeline() {
  return PipelineBuilder::Range(60000, {{"elements_per_split", int64_t{50}}})
      .Map("add", {{"value", int64_t{1}}})
      .Batch(10)
      .Build();
}

GetStatusResponse Status(testing::LocalCluster& cluster) {
  GetStatusResponse status;
  const grpc::Status rpc = cluster.dispatcher().GetStatus(testing::RpcContext().get(), {}, &status);
  EXPECT_TRUE(rpc.ok()) << rpc.error_message();
  return status;
}

// Polls `done` every 100 ms for up to `limit`; whether it became true.
bool Eventually(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

TEST(LocalProvisionerProcessTest, WorkersComeForAScalingStepTakeItsTasksAndGoWhenIdle) {
  testing::ScopedTempDir dir;
  testing::LocalCluster cluster(
      dir.Join("cluster"),
      {.workers = 0,
       .dispatcher_flags = {"--provisioner=local", "--min_workers=1", "--max_workers=3",
                            "--policy_period_ms=300",
                            "--provisioned_worker_flags=--insecure --window_bytes=4096",
                            "--provisioned_worker_log_dir=" + dir.Join("cluster/logs")},
       .worker_timeout_ms = 1000});
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE(Eventually([&] { return Status(cluster).live_workers_size() == 1; },
                         std::chrono::seconds(30)))
      << "the provisioner did not start --min_workers";
  auto client = Client::Connect({.dispatcher_address = cluster.dispatcher_address(),
                                 .max_bytes_per_request = 1024,
                                 .stall_timeout_ms = 30000,
                                 .insecure = true});
  ASSERT_TRUE(client.ok()) << client.status();
  auto dataset = (*client)->RegisterPipeline(Pipeline());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto job = (*client)->OpenJob(*dataset, {.name = "grows", .seed = kSeed, .num_worker_slots = 1});
  ASSERT_TRUE(job.ok()) << job.status();
  auto reader = (*job)->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EpochDigest digest(true);
  const auto read = [&](int64_t n) {
    for (int64_t i = 0; n < 0 || i < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ReceivedElement element;
      bool end = false;
      const absl::Status status = (*reader)->Next(&element, &end);
      if (!status.ok()) {
        ADD_FAILURE() << status;
        return false;
      }
      if (end) return false;
      digest.Add(element.tensors());
    }
    return true;
  };
  ASSERT_TRUE(read(100));
  ASSERT_TRUE((*job)->Scale(3, "test: grow").ok());
  // Two more workers start and each takes one of the tasks the step put on the first.
  bool spread = false;
  std::string provisioning;  // As the status that showed the tasks spread said it.
  for (int i = 0; i < 3000 && !spread; ++i) {
    ASSERT_TRUE(read(5)) << "the epoch ended before the new workers took its tasks";
    std::set<std::string> holders;
    const GetStatusResponse status = Status(cluster);
    for (const TaskState& t : status.state().tasks()) {
      if (!t.finished() && !t.draining()) holders.insert(t.worker_id());
    }
    spread = holders.size() == 3;
    provisioning = status.provisioning();
  }
  ASSERT_TRUE(spread) << "three tasks never ran on three workers";
  // While three tasks are unfinished the provisioner wants three workers (read later, the tasks
  // may be finishing and the request shrinking: the test ran into that under load).
  EXPECT_THAT(provisioning, HasSubstr("local: 3 workers requested"));
  read(-1);
  // Exactly once through the step and the takeovers it caused.
  const testing::InProcessDigest expected = testing::DigestInProcess(Pipeline(), kSeed, 0);
  EXPECT_EQ(digest.rows(), expected.rows);
  EXPECT_EQ(digest.multiset(), expected.multiset) << "seed " << kSeed;
  // The epoch over, the job wants no worker: back to --min_workers.
  EXPECT_TRUE(Eventually([&] { return Status(cluster).live_workers_size() == 1; },
                         std::chrono::seconds(30)))
      << Status(cluster).provisioning();
}

TEST(CommandProvisionerProcessTest, AFailingCommandIsReportedAndChangesNothing) {
  testing::ScopedTempDir dir;
  testing::LocalCluster cluster(
      dir.Join("cluster"),
      {.workers = 1,
       .dispatcher_flags = {"--provisioner=command", "--max_workers=4",
                            "--provision_command=echo no such statefulset >&2; exit 7",
                            "--policy_period_ms=200"}});
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE(Eventually(
      [&] {
        return Status(cluster).provisioning().find("exited with code 7") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << Status(cluster).provisioning();
  const GetStatusResponse status = Status(cluster);
  EXPECT_THAT(status.provisioning(), HasSubstr("no such statefulset"));
  EXPECT_THAT(status.provisioning(), HasSubstr("0 workers requested"));
  // The dispatcher goes on serving: a job runs on the worker it has.
  auto client = Client::Connect({.dispatcher_address = cluster.dispatcher_address(),
                                 .stall_timeout_ms = 30000,
                                 .insecure = true});
  ASSERT_TRUE(client.ok()) << client.status();
  auto dataset = (*client)->RegisterPipeline(Pipeline());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  auto job = (*client)->OpenJob(*dataset, {.seed = kSeed, .num_worker_slots = 1});
  ASSERT_TRUE(job.ok()) << job.status();
  auto reader = (*job)->ReadEpoch(0);
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t elements = 0;
  for (bool end = false;;) {
    ReceivedElement element;
    ASSERT_TRUE((*reader)->Next(&element, &end).ok());
    if (end) break;
    ++elements;
  }
  EXPECT_EQ(elements, 6000);
}

}  // namespace
}  // namespace granary
