// Pipeline definitions that are wrong are rejected with an error naming the culprit; valid
// ones run deterministically.
#include "pipeline/pipeline.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline_loader.h"
#include "testing/test_paths.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

absl::Status CreateStatus(const std::string& json) {
  auto def = ParsePipelineJson(json, "pipeline test.json");
  if (!def.ok()) return def.status();
  auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
  if (!pipeline.ok()) return pipeline.status();
  return (*pipeline)->EnumerateSplits(Env::Default()).status();
}

constexpr char kRange[] = R"("source": {"type": "range", "params": {"stop": 10}})";

TEST(PipelineValidationTest, UnknownOpIsNamedWithItsIndex) {
  const absl::Status s = CreateStatus(absl::StrCat("{", kRange, R"(, "ops": [
      {"op": "batch", "params": {"batch_size": 2}}, {"op": "shufle"}]})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("op 1 (shufle): unknown op"), HasSubstr("shuffle")));
}

TEST(PipelineValidationTest, UnknownUdfIsNamed) {
  const absl::Status s =
      CreateStatus(absl::StrCat("{", kRange, R"(, "ops": [{"op": "map", "udf": "random_crp"}]})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("op 0 (map, udf 'random_crp'): unknown UDF"));
}

TEST(PipelineValidationTest, WrongParamTypeNamesOpAndParam) {
  const absl::Status s = CreateStatus(absl::StrCat(
      "{", kRange, R"(, "ops": [{"op": "shuffle", "params": {"buffer_size": "lots"}}]})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("op 0 (shuffle): param 'buffer_size' must be an integer, got string"));
}

TEST(PipelineValidationTest, WrongUdfParamTypeNamesUdfAndParam) {
  const absl::Status s = CreateStatus(absl::StrCat(
      "{", kRange, R"(, "ops": [{"op": "map", "udf": "add", "udfParams": {"value": true}}]})"));
  EXPECT_THAT(s.message(), HasSubstr("op 0 (map, udf 'add'): param 'value' must be an integer"));
}

// Pipeline::Create alone (no split enumeration), with `options`.
absl::Status CreateOnlyStatus(const std::string& json) {
  auto def = ParsePipelineJson(json, "pipeline test.json");
  if (!def.ok()) return def.status();
  return Pipeline::Create(*def, PipelineRegistries::WithBuiltins()).status();
}

// Parameter ranges are checked by Create, so the dispatcher refuses such a pipeline at
// registration instead of a worker's task failing when the epoch starts (issue 13, defect 12).
TEST(PipelineValidationTest, OutOfRangeOpParamsAreRefusedByCreate) {
  const struct {
    const char* op;
    const char* message;
  } cases[] = {
      {R"({"op": "batch", "params": {"batch_size": 0}})",
       "op 0 (batch): param 'batch_size' must be at least 1"},
      {R"({"op": "batch", "params": {"batch_size": -3}})",
       "op 0 (batch): param 'batch_size' must be at least 1"},
      {R"({"op": "shuffle", "params": {"buffer_size": 0}})",
       "op 0 (shuffle): param 'buffer_size' must be at least 1"},
      {R"({"op": "parallel_map", "udf": "add", "udfParams": {"value": 1},
           "params": {"num_threads": -1}})",
       "op 0 (parallel_map, udf 'add'): param 'num_threads' must be in [1, 256], or 0 (tuned)"},
      {R"({"op": "prefetch", "params": {"buffer_size": -1}})",
       "op 0 (prefetch): param 'buffer_size' must be at least 1, or 0 (tuned)"},
      {R"({"op": "take", "params": {"count": -1}})", "op 0 (take): param 'count' must not be"},
      {R"({"op": "skip", "params": {"count": -1}})", "op 0 (skip): param 'count' must not be"},
  };
  for (const auto& c : cases) {
    const absl::Status s = CreateOnlyStatus(absl::StrCat("{", kRange, R"(, "ops": [)", c.op, "]}"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.op << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.op;
  }
}

TEST(PipelineValidationTest, OutOfRangeSourceParamsAreRefusedByCreate) {
  const std::string files = absl::StrCat(R"("files": [")", testing::TfRecordTestDataDir(),
                                         R"(/tutorial_images.tfrecord"])");
  const struct {
    std::string source;
    const char* message;
  } cases[] = {
      {absl::StrCat(R"({"type": "tfrecord", "params": {)", files, R"(, "compression": "ZSTD"}})"),
       "source tfrecord: param 'compression' must be \"\", \"GZIP\" or \"auto\", not 'ZSTD'"},
      {absl::StrCat(R"({"type": "tfrecord", "params": {)", files, R"(, "records_per_split": -1}})"),
       "source tfrecord: param 'records_per_split' must be >= 0"},
      {R"({"type": "tfrecord", "params": {"files": []}})",
       "source tfrecord: param 'files' must name at least one file pattern"},
      {absl::StrCat(R"({"type": "text_lines", "params": {)", files, R"(, "compression": "bz2"}})"),
       "source text_lines: param 'compression' must be"},
      {R"({"type": "range", "params": {"stop": 5, "step": 0}})",
       "source range: param 'step' must not be 0"},
      {R"({"type": "range", "params": {"stop": 5, "elements_per_split": -2}})",
       "source range: param 'elements_per_split' must not be negative"},
  };
  for (const auto& c : cases) {
    const absl::Status s = CreateOnlyStatus(absl::StrCat(R"({"source": )", c.source, "}"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.source << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.source;
  }
}

// CheckFiles lists the files without reading them: a pattern matching nothing is the same
// NotFound that split enumeration gives (what the dispatcher checks at registration).
TEST(PipelineValidationTest, CheckFilesRefusesAPatternMatchingNothing) {
  const auto check = [](const std::string& json) {
    auto def = ParsePipelineJson(json, "p.json");
    EXPECT_TRUE(def.ok()) << def.status();
    auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
    EXPECT_TRUE(pipeline.ok()) << pipeline.status();
    return (*pipeline)->CheckFiles(Env::Default());
  };
  const absl::Status s = check(
      R"({"source": {"type": "tfrecord", "params": {"files": ["/nonexistent/granary/*.tfrecord"]}}})");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("source tfrecord: pattern '/nonexistent/granary/*.tfrecord' "
                                     "matches no file"));
  EXPECT_TRUE(check(absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")",
                                 testing::TfRecordTestDataDir(), R"(/*.tfrecord"]}}})"))
                  .ok());
  EXPECT_TRUE(check(absl::StrCat("{", kRange, "}")).ok());
}

TEST(PipelineValidationTest, MissingFileNamesThePattern) {
  const absl::Status s = CreateStatus(
      R"({"source": {"type": "tfrecord", "params": {"files": ["/nonexistent/granary/*.tfrecord"]}}})");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/granary/*.tfrecord"));
}

TEST(PipelineValidationTest, UnknownSourceTypeIsNamed) {
  const absl::Status s = CreateStatus(R"({"source": {"type": "parquet"}})");
  EXPECT_THAT(s.message(), HasSubstr("source: unknown type 'parquet'"));
}

TEST(PipelineValidationTest, PredicateUsedWithMapIsRejected) {
  const absl::Status s =
      CreateStatus(absl::StrCat("{", kRange, R"(, "ops": [{"op": "map", "udf": "non_empty"}]})"));
  EXPECT_THAT(s.message(),
              HasSubstr("op 0 (map, udf 'non_empty'): UDF 'non_empty' is a predicate"));
}

TEST(PipelineValidationTest, UdfOnAnOpWithoutOneIsRejected) {
  const absl::Status s = CreateStatus(absl::StrCat(
      "{", kRange, R"(, "ops": [{"op": "batch", "udf": "add", "params": {"batch_size": 2}}]})"));
  EXPECT_THAT(s.message(), HasSubstr("op 0 (batch, udf 'add'): op 'batch' takes no udf"));
}

TEST(PipelineValidationTest, MissingUdfIsRejected) {
  const absl::Status s = CreateStatus(absl::StrCat("{", kRange, R"(, "ops": [{"op": "map"}]})"));
  EXPECT_THAT(s.message(), HasSubstr("op 0 (map): missing 'udf'"));
}

TEST(PipelineLoaderTest, UnknownFieldIsRejectedWithTheFile) {
  auto def = ParsePipelineJson(R"({"source": {"type": "range"}, "opz": []})", "pipeline p.json");
  ASSERT_FALSE(def.ok());
  EXPECT_THAT(def.status().message(), AllOf(HasSubstr("pipeline p.json"), HasSubstr("opz")));
}

TEST(PipelineLoaderTest, MalformedJsonIsRejectedWithTheFile) {
  auto def = ParsePipelineJson(R"({"source": {"type": "range",)", "pipeline p.json");
  ASSERT_FALSE(def.ok());
  EXPECT_THAT(def.status().message(), HasSubstr("pipeline p.json: not a valid pipeline"));
}

TEST(PipelineLoaderTest, ParamsNestedTooDeepAreRejectedWithTheFileOpAndLimit) {
  std::string nested = "1";
  for (int i = 0; i < 60; ++i) nested = absl::StrCat(R"({"n": )", nested, "}");
  const auto def = ParsePipelineJson(
      absl::StrCat("{", kRange, R"(, "ops": [{"op": "map", "udf": "add", "udfParams": )",
                   R"({"value": )", nested, "}}]}"),
      "pipeline deep.json");
  EXPECT_TRUE(absl::IsInvalidArgument(def.status())) << def.status();
  EXPECT_EQ(def.status().message(),
            "pipeline deep.json: op 0 (map, udf 'add'): udfParams 'value' nests more than 16 "
            "levels deep (kMaxParamNesting)");
}

TEST(PipelineLoaderTest, PlaceholdersExpandFromEnvironment) {
  ::setenv("GRANARY_TEST_STOP", "12", 1);
  auto def = ParsePipelineJson(
      R"({"source": {"type": "range", "params": {"stop": ${GRANARY_TEST_STOP}}}})", "p.json");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->source().params().fields().at("stop").number_value(), 12);
}

TEST(PipelineLoaderTest, UnsetPlaceholderIsNamedWithItsLine) {
  ::unsetenv("GRANARY_TEST_UNSET");
  auto def = ParsePipelineJson("{\n\"source\": {\"type\": \"${GRANARY_TEST_UNSET}\"}}", "p.json");
  ASSERT_FALSE(def.ok());
  EXPECT_THAT(def.status().message(),
              HasSubstr("p.json: line 2: environment variable GRANARY_TEST_UNSET is not set"));
}

// Found by pipeline_json_fuzzer: each placeholder counted the lines from the start of the text,
// so expansion took time quadratic in the file's size (16 s for a 1 MB file of placeholders).
TEST(PipelineLoaderTest, ManyPlaceholdersExpandInLinearTimeWithRightLineNumbers) {
  ::setenv("GRANARY_TEST_EMPTY", "", 1);
  ::unsetenv("GRANARY_TEST_UNSET");
  std::string text;
  for (int i = 0; i < 50000; ++i) absl::StrAppend(&text, "${GRANARY_TEST_EMPTY}\n");
  const std::string with_error = absl::StrCat(text, "${GRANARY_TEST_UNSET}");
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> out = ExpandEnvPlaceholders(text, "p.json");
  const absl::Status error = ExpandEnvPlaceholders(with_error, "p.json").status();
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, std::string(50000, '\n'));
  EXPECT_THAT(error.message(), HasSubstr("p.json: line 50001: environment variable"));
  // Linear, this takes a few ms; quadratic it took seconds. The bound leaves room for slow
  // (sanitized) builds.
  EXPECT_LT(took, absl::Seconds(2)) << "expanding 2 x 50 000 placeholders took " << took;
}

TEST(PipelineLoaderTest, MissingPipelineFileIsNamed) {
  auto def = LoadPipelineFile(Env::Default(), "/nonexistent/pipeline.json");
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(def.status().message(), HasSubstr("/nonexistent/pipeline.json"));
}

TEST(PipelineLoaderTest, ShippedExamplesParseAndValidate) {
  ::setenv("GRANARY_DATA", testing::TfRecordTestDataDir().c_str(), 1);
  for (const char* name : {"imagenet_resnet.json", "text_lines.json"}) {
    auto def = LoadPipelineFile(Env::Default(), testing::SourceDir() + "/examples/" + name);
    ASSERT_TRUE(def.ok()) << name << ": " << def.status();
    EXPECT_TRUE(Pipeline::Create(*def, PipelineRegistries::WithBuiltins()).ok()) << name;
  }
}

// A UDF error surfaces with the op, the UDF and the element's origin, and nothing is skipped.
TEST(PipelineErrorTest, UdfErrorNamesOpUdfAndElement) {
  auto def = ParsePipelineJson(
      absl::StrCat(R"({"source": {"type": "tfrecord", "params":
      {"files": [")",
                   testing::TfRecordTestDataDir(), R"(/cifar10_png.tfrecord"]}}, "ops": [
      {"op": "map", "udf": "parse_example", "udfParams": {"keys": ["image/encoded"], "dtypes": ["bytes"]}},
      {"op": "map", "udf": "decode_jpeg"}]})"),
      "p.json");
  ASSERT_TRUE(def.ok()) << def.status();
  auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto result = RunEpochInProcess(**pipeline, 0, 0, Env::Default());
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("op 1 (map, udf 'decode_jpeg') at split 0 record 0: decode_jpeg"));
}

// Map fusion (op.h) changes only where UDFs run: the fused pipeline yields exactly the elements
// of the unfused one, random augmentations included.
TEST(PipelineDeterminismTest, FusedMapsYieldTheSameElementsAsUnfused) {
  auto def = ParsePipelineJson(
      absl::StrCat(R"({"source": {"type": "tfrecord", "params":
      {"files": [")",
                   testing::TfRecordTestDataDir(), R"(/tutorial_images.tfrecord"]}}, "ops": [
      {"op": "map", "udf": "parse_example", "udfParams": {"keys": ["image_raw"], "dtypes": ["bytes"]}},
      {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_image", "udfParams": {"channels": 3}},
      {"op": "map", "udf": "random_crop", "udfParams": {"height": 20, "width": 20}},
      {"op": "parallel_map", "params": {"num_threads": 3}, "udf": "random_flip"}]})"),
      "p.json");
  ASSERT_TRUE(def.ok()) << def.status();
  std::vector<Element> outputs[2];
  for (int i = 0; i < 2; ++i) {
    PipelineOptions pipeline_options;
    pipeline_options.fuse_maps = i == 0;
    auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins(), pipeline_options);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    EpochRunOptions options;
    options.on_element = [&outputs, i](const Element& e) { outputs[i].push_back(e); };
    ASSERT_TRUE(RunEpochInProcess(**pipeline, 11, 2, Env::Default(), options).ok());
  }
  ASSERT_EQ(outputs[0].size(), 2u);
  EXPECT_TRUE(outputs[0] == outputs[1]) << "seed 11, epoch 2";
}

// A batch right after a parallel stage has its rows made in, or copied to, their place by the
// stage's threads (batch_placement.h): the batches are exactly those of the unfused pipeline,
// the last smaller one included.
TEST(PipelineDeterminismTest, BatchesPlacedByTheParallelStageEqualUnfusedBatches) {
  for (const char* json : {
           R"({"source": {"type": "range", "params": {"stop": 50}}, "ops": [
               {"op": "parallel_map", "params": {"num_threads": 3}, "udf": "cast",
                "udfParams": {"dtype": "float32"}},
               {"op": "batch", "params": {"batch_size": 4}}]})",
           R"({"source": {"type": "tfrecord", "params": {"files": ["${DATA}/tutorial_images.tfrecord"]}},
               "ops": [
               {"op": "map", "udf": "parse_example", "udfParams": {"keys": ["image_raw"], "dtypes": ["bytes"]}},
               {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_image", "udfParams": {"channels": 3}},
               {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "random_crop", "udfParams": {"height": 16, "width": 16}},
               {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "normalize",
                "udfParams": {"mean": [0.5, 0.5, 0.5], "std": [0.2, 0.2, 0.2]}},
               {"op": "batch", "params": {"batch_size": 1}}]})"}) {
    auto def = ParsePipelineJson(
        absl::StrReplaceAll(json, {{"${DATA}", testing::TfRecordTestDataDir()}}), "p.json");
    ASSERT_TRUE(def.ok()) << def.status();
    std::vector<Element> outputs[2];
    for (int i = 0; i < 2; ++i) {
      PipelineOptions pipeline_options;
      pipeline_options.fuse_maps = i == 0;  // Unfused: no placement.
      auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins(), pipeline_options);
      ASSERT_TRUE(pipeline.ok()) << pipeline.status();
      EpochRunOptions options;
      options.on_element = [&outputs, i](const Element& e) { outputs[i].push_back(e); };
      ASSERT_TRUE(RunEpochInProcess(**pipeline, 5, 1, Env::Default(), options).ok());
    }
    ASSERT_FALSE(outputs[0].empty()) << json;
    EXPECT_TRUE(outputs[0] == outputs[1]) << json;
  }
}

TEST(PipelineDeterminismTest, SameSeedSameDigestOtherSeedSameMultiset) {
  auto def = ParsePipelineJson(absl::StrCat("{", R"("source": {"type": "range", "params":
      {"stop": 200, "elements_per_split": 16, "shuffle_splits": true}}, "ops": [
      {"op": "shuffle", "params": {"buffer_size": 32}},
      {"op": "batch", "params": {"batch_size": 8}}]})"),
                               "p.json");
  ASSERT_TRUE(def.ok()) << def.status();
  auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
  ASSERT_TRUE(pipeline.ok());
  auto a = RunEpochInProcess(**pipeline, 7, 0, Env::Default());
  auto b = RunEpochInProcess(**pipeline, 7, 0, Env::Default());
  auto c = RunEpochInProcess(**pipeline, 8, 0, Env::Default());
  auto d = RunEpochInProcess(**pipeline, 7, 1, Env::Default());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(a->digest_line, b->digest_line);
  EXPECT_NE(a->digest_line, c->digest_line);
  EXPECT_NE(a->digest_line, d->digest_line) << "epochs are shuffled differently";
  EXPECT_EQ(a->rows, 200);
  EXPECT_EQ(c->rows, 200);
  // Same rows in another order: the multiset digest agrees, the ordered one does not.
  EXPECT_EQ(a->digest_line.substr(0, a->digest_line.find("ordered")),
            c->digest_line.substr(0, c->digest_line.find("ordered")));
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

TEST(PipelineFingerprintTest, EqualDefinitionsShareItOthersDoNot) {
  const auto fingerprint = [](const std::string& json) {
    auto def = ParsePipelineJson(json, "p.json");
    EXPECT_TRUE(def.ok()) << def.status();
    auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
    EXPECT_TRUE(pipeline.ok()) << pipeline.status();
    return (*pipeline)->Fingerprint();
  };
  const std::string a = R"({"source": {"type": "range", "params": {"stop": 10, "step": 2}},
                            "ops": [{"op": "batch", "params": {"batch_size": 2}}]})";
  // The same definition with its params in another order and other spacing.
  const std::string same = R"({"ops": [{"params": {"batch_size": 2}, "op": "batch"}],
                               "source": {"params": {"step": 2, "stop": 10}, "type": "range"}})";
  const std::string other = R"({"source": {"type": "range", "params": {"stop": 10, "step": 2}},
                                "ops": [{"op": "batch", "params": {"batch_size": 3}}]})";
  EXPECT_EQ(fingerprint(a), fingerprint(same));
  EXPECT_NE(fingerprint(a), fingerprint(other));
}

}  // namespace
}  // namespace granary
