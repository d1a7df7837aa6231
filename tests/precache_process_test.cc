// `granary precache` end to end (issue 20) over a LocalCluster of real processes and real
// TFRecord files of JPEGs, for cache_policy full and at_mark: a precache fills the cache, so the
// training job that follows reads it from its first epoch — the source files are moved away
// after the precache, so an epoch that opened them would fail — and its digests equal `granary
// local --cache_policy`'s; a second precache returns at once; a precache SIGKILLed halfway
// (with every worker SIGKILLed and restarted) is completed by running it again.
#include <signal.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"
#include "tests/local_cluster.h"
#include "tests/run_outputs.h"

namespace granary {
namespace {

using testing::DigestLine;
using ::testing::HasSubstr;
using testing::ReadDigests;

constexpr int64_t kImages = 1600;

// Decode up to the mark "decoded" (with a simulated cost per element, so a Put epoch lasts long
// enough to be interrupted), random augmentations after it.
std::string PipelineJson(const std::string& data_dir) {
  return absl::StrCat(R"({
    "source": {"type": "tfrecord",
               "params": {"files": [")",
                      data_dir, R"(/*.tfrecord"], "records_per_split": 50,
                          "shuffle_splits": true}},
    "ops": [
      {"op": "map", "udf": "parse_example",
       "udfParams": {"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]}},
      {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_jpeg"},
      {"op": "map", "udf": "simulate_cost", "udfParams": {"us_per_element": 2000}},
      {"op": "mark", "params": {"name": "decoded"}},
      {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.75}},
      {"op": "map", "udf": "random_flip"}
    ]})");
}

class PrecacheProcessTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    data_ = dir_.Join("data");
    ASSERT_TRUE(testing::GenerateImagenet(data_, kImages));
    pipeline_ = dir_.Join("pipeline.json");
    ASSERT_TRUE(WriteStringToFile(Env::Default(), pipeline_, PipelineJson(data_), false).ok());
    local_ = testing::LocalDigests(pipeline_, 2, 11, policy(), dir_.Join("local.digest"));
    ASSERT_EQ(local_.size(), 2u);
  }

  const std::string& policy() const { return GetParam(); }

  std::vector<std::string> PrecacheArgs(const testing::LocalCluster& cluster) const {
    std::vector<std::string> argv = {GRANARY_BINARY,
                                     "precache",
                                     "--insecure",
                                     "--dispatcher=" + cluster.dispatcher_address(),
                                     "--pipeline=" + pipeline_,
                                     "--seed=11"};
    if (policy() == "at_mark") argv.push_back("--at_mark=decoded");
    return argv;
  }

  // Runs `argv` to its end; its output.
  static std::string RunToCompletion(const std::vector<std::string>& argv) {
    Subprocess process(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = process.ReadAll(std::chrono::seconds(180));
    EXPECT_EQ(process.Wait(), 0) << output;
    return output;
  }

  static GetStatusResponse Status(testing::LocalCluster& cluster) {
    GetStatusResponse status;
    const grpc::Status rpc =
        cluster.dispatcher().GetStatus(testing::RpcContext().get(), GetStatusRequest(), &status);
    EXPECT_TRUE(rpc.ok()) << rpc.error_message();
    return status;
  }

  // The training job "train", two epochs with the training job's policy, after the source was
  // moved away: its epoch 0 must be a Get, and its digests equal local's.
  void TrainFromTheCache(testing::LocalCluster& cluster) {
    ASSERT_TRUE(Env::Default()->RenameFile(data_, data_ + ".hidden").ok());
    RunToCompletion({GRANARY_BINARY, "run", "--insecure",
                     "--dispatcher=" + cluster.dispatcher_address(), "--pipeline=" + pipeline_,
                     "--epochs=2", "--seed=11", "--cache_policy=" + policy(), "--job_name=train",
                     "--digest_out=" + dir_.Join("train.digest")});
    const auto digests = ReadDigests(dir_.Join("train.digest"));
    ASSERT_EQ(digests.size(), 2u);
    for (const auto& [epoch, d] : digests) {
      EXPECT_EQ(d.rows, kImages) << policy() << " epoch " << epoch;
      EXPECT_EQ(d.multiset, local_.at(epoch).multiset) << policy() << " epoch " << epoch;
    }
    const GetStatusResponse status = Status(cluster);
    int64_t train = 0;
    for (const JobState& job : status.state().jobs()) {
      if (job.name() == "train") train = job.job_id();
    }
    ASSERT_NE(train, 0);
    for (const EpochState& epoch : status.state().epochs()) {
      if (epoch.job_id() != train) continue;
      EXPECT_EQ(epoch.cache().mode(), EpochCache::GET)
          << policy() << ": the training job's epoch " << epoch.epoch()
          << " did not read the cache";
    }
  }

  testing::ScopedTempDir dir_;
  std::string data_;
  std::string pipeline_;
  std::map<int64_t, DigestLine> local_;
};

TEST_P(PrecacheProcessTest, TheJobAfterAPrecacheReadsTheCacheFromItsFirstEpoch) {
  testing::LocalCluster cluster(dir_.Join("cluster"), {.workers = 2});
  ASSERT_TRUE(cluster.ok());
  const std::string first = RunToCompletion(PrecacheArgs(cluster));
  EXPECT_THAT(first, HasSubstr("complete: 1600 elements")) << first;
  // Idempotent: the cache is there, nothing is read again.
  const auto start = std::chrono::steady_clock::now();
  const std::string second = RunToCompletion(PrecacheArgs(cluster));
  EXPECT_THAT(second, HasSubstr("was already complete: 1600 elements")) << second;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  TrainFromTheCache(cluster);
}

TEST_P(PrecacheProcessTest, APrecacheKilledHalfwayIsCompletedByRunningItAgain) {
  testing::LocalCluster cluster(
      dir_.Join("cluster"),
      {.workers = 2,
       .worker_flags = {"--window_bytes=16384", "--checkpoint_dir=" + dir_.Join("ckpt"),
                        "--checkpoint_interval_ms=30"}});
  ASSERT_TRUE(cluster.ok());
  Subprocess precache(PrecacheArgs(cluster), Subprocess::Stderr::kMergeIntoStdout);
  // Halfway: the Put epoch has leased splits (some chunks committed, some not).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool halfway = false;
  while (!halfway && std::chrono::steady_clock::now() < deadline) {
    const GetStatusResponse status = Status(cluster);
    for (const EpochState& epoch : status.state().epochs()) {
      halfway = halfway || (epoch.cache().mode() == EpochCache::PUT && epoch.next_split() >= 8 &&
                            !epoch.finished());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(halfway) << "the precache's Put epoch never got halfway";
  precache.Kill(SIGKILL);
  precache.Wait();
  for (int i = 0; i < 2; ++i) cluster.KillWorker(i);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.RestartWorker(i)) << "worker " << i;
  {
    const GetStatusResponse status = Status(cluster);
    ASSERT_EQ(status.state().caches_size(), 1);
    ASSERT_FALSE(status.state().caches(0).complete()) << "killed too late to test a resume";
  }
  const std::string rerun = RunToCompletion(PrecacheArgs(cluster));
  EXPECT_THAT(rerun, HasSubstr("complete: 1600 elements")) << rerun;
  EXPECT_FALSE(absl::StrContains(rerun, "already")) << rerun;
  TrainFromTheCache(cluster);
}

INSTANTIATE_TEST_SUITE_P(Policies, PrecacheProcessTest, ::testing::Values("full", "at_mark"));

}  // namespace
}  // namespace granary
