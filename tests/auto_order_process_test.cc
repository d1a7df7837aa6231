// AutoOrder in the service (issue 18): a job opened with auto_order has its workers run the
// pipeline reordered — shown in their logs — and its epochs hold the elements `granary local`
// makes of the pipeline as written.
#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/synthetic_imagenet.h"
#include "testing/scoped_temp_dir.h"
#include "tests/local_cluster.h"
#include "tests/run_outputs.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kImages = 64;

TEST(AutoOrderServiceTest, WorkersRunTheReorderedPipelineWithTheWrittenOnesElements) {
  testing::ScopedTempDir dir;
  SyntheticImagenetOptions data;
  data.out_dir = dir.Join("data");
  data.images = kImages;
  data.files = 4;
  data.size = 48;
  ASSERT_TRUE(WriteSyntheticImagenet(Env::Default(), data).ok());
  ::setenv("GRANARY_DATA", data.out_dir.c_str(), 1);
  const std::string pipeline = std::string(std::getenv("GRANARY_SOURCE_DIR")) +
                               "/examples/imagenet_resnet_normalize_first.json";
  Subprocess local({GRANARY_BINARY, "local", "--pipeline=" + pipeline, "--epochs=2", "--seed=3",
                    "--digest_out=" + dir.Join("local.digest")},
                   Subprocess::Stderr::kMergeIntoStdout);
  const std::string local_output = local.ReadAll();
  ASSERT_EQ(local.Wait(), 0) << local_output;

  testing::LocalCluster cluster(dir.Join("cluster"), {.workers = 2});
  ASSERT_TRUE(cluster.ok());
  Subprocess run(
      {GRANARY_BINARY, "run", "--insecure", "--dispatcher=" + cluster.dispatcher_address(),
       "--pipeline=" + pipeline, "--epochs=2", "--seed=3", "--auto_order",
       "--digest_out=" + dir.Join("run.digest")},
      Subprocess::Stderr::kMergeIntoStdout);
  const std::string run_output = run.ReadAll();
  ASSERT_EQ(run.Wait(), 0) << run_output;

  const auto expected = testing::ReadDigests(dir.Join("local.digest"));
  const auto got = testing::ReadDigests(dir.Join("run.digest"));
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    ASSERT_TRUE(expected.count(epoch) && got.count(epoch)) << "epoch " << epoch;
    EXPECT_EQ(got.at(epoch).rows, kImages) << "epoch " << epoch;
    EXPECT_EQ(got.at(epoch).multiset, expected.at(epoch).multiset) << "epoch " << epoch;
  }
  std::string logs;
  for (int i = 0; i < 2; ++i) {
    auto log = ReadFileToString(
        Env::Default(), dir.Join(absl::StrCat("cluster/logs/", cluster.worker_id(i), ".log")));
    if (log.ok()) logs += *log;
  }
  EXPECT_THAT(logs, HasSubstr("AutoOrder runs its ops as shuffle parse_example decode_jpeg "
                              "random_crop(op 4) random_flip(op 5) normalize(op 3) batch"));
}

}  // namespace
}  // namespace granary
