// UDF plugins: the example plugin loads, its UDF runs in a pipeline (deterministically, keyed
// per element like every random UDF), and a bad plugin path is a clear error.
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline_loader.h"
#include "testing/scoped_temp_dir.h"
#include "tests/run_command.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr char kJitter[] = R"({"source": {"type": "range", "params": {"stop": 100}},
    "ops": [{"op": "map", "udf": "random_jitter", "udfParams": {"amplitude": 5}}]})";

TEST(PluginTest, ExamplePluginRegistersAndRunsItsUdf) {
  PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  ASSERT_EQ(registries.udfs.Find("random_jitter"), nullptr);
  const absl::Status load = LoadUdfPlugin(GRANARY_EXAMPLE_PLUGIN, &registries.udfs);
  ASSERT_TRUE(load.ok()) << load;
  ASSERT_NE(registries.udfs.Find("random_jitter"), nullptr);

  auto def = ParsePipelineJson(kJitter, "jitter.json");
  ASSERT_TRUE(def.ok()) << def.status();
  auto pipeline = Pipeline::Create(*def, registries);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  std::vector<int64_t> first, again;
  const auto collect = [](std::vector<int64_t>* out) {
    EpochRunOptions options;
    options.on_element = [out](const Element& e) {
      out->push_back(e.tensors[0].data<int64_t>()[0]);
    };
    return options;
  };
  ASSERT_TRUE(RunEpochInProcess(**pipeline, 9, 0, Env::Default(), collect(&first)).ok());
  ASSERT_TRUE(RunEpochInProcess(**pipeline, 9, 0, Env::Default(), collect(&again)).ok());
  ASSERT_EQ(first.size(), 100u);
  EXPECT_EQ(first, again) << "seed 9: same seed, same jitter";
  int changed = 0;
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_LE(std::abs(first[i] - i), 5) << "element " << i;
    changed += first[i] != i;
  }
  EXPECT_GT(changed, 50) << "seed 9: the jitter is applied";
}

TEST(PluginTest, MissingPluginIsNamed) {
  UdfRegistry registry;
  const absl::Status s = LoadUdfPlugin("/nonexistent/libnothing.so", &registry);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("plugin /nonexistent/libnothing.so: dlopen failed"));
}

TEST(PluginTest, LibraryWithoutRegistrationSymbolIsNamed) {
  UdfRegistry registry;
  const absl::Status s = LoadUdfPlugin("libz.so.1", &registry);
  EXPECT_THAT(s.message(), HasSubstr("plugin libz.so.1: does not export GranaryRegisterUdfs"));
}

TEST(PluginTest, GranaryLocalLoadsPluginFromFlag) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("jitter.json");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, kJitter, false).ok());
  const auto with = testing::RunCommand(
      absl::StrCat(GRANARY_BINARY, " local --pipeline ", path, " --plugin ", GRANARY_EXAMPLE_PLUGIN));
  EXPECT_EQ(with.exit_code, 0) << with.output;
  EXPECT_THAT(with.output, HasSubstr("100 rows"));
  const auto without = testing::RunCommand(absl::StrCat(GRANARY_BINARY, " local --pipeline ", path));
  EXPECT_EQ(without.exit_code, 1);
  EXPECT_THAT(without.output, HasSubstr("udf 'random_jitter'): unknown UDF"));
}

}  // namespace
}  // namespace granary
