// For every source and op: run n elements, Save, Restore into a freshly built iterator, and the
// continuation is byte-identical to an uninterrupted run — at n = 0, end of input and several
// random n in between (DESIGN.md §2, "Every iterator implements Save/Restore").
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_paths.h"

namespace granary {
namespace {

struct Case {
  std::string name;
  std::string json;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string TextFile() {
  // The cases only name the file, so it must outlive Cases(): its directory lasts until exit.
  static const testing::ScopedTempDir dir;
  const std::string path = dir.Join("lines.txt");
  std::string text;
  for (int i = 0; i < 37; ++i) absl::StrAppend(&text, "line ", i, i % 5 == 0 ? "" : " x", "\n");
  text += "last line without newline";
  EXPECT_TRUE(WriteStringToFile(Env::Default(), path, text, false).ok());
  return path;
}

std::vector<Case> Cases() {
  const std::string data = testing::TfRecordTestDataDir();
  const std::string features = data + "/tutorial_features.tfrecord";
  const std::string penguin = data + "/penguin_eval_gzip.tfrecord.gz";
  const std::string images = data + "/tutorial_images.tfrecord";
  const std::string range = R"("source": {"type": "range", "params": {"stop": 50}})";
  const std::string split_range =
      R"("source": {"type": "range", "params": {"stop": 50, "elements_per_split": 7,
                                                "shuffle_splits": true}})";
  return {
      {"range", absl::StrCat("{", range, "}")},
      {"range_shuffled_splits", absl::StrCat("{", split_range, "}")},
      {"tfrecord", absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")",
                                features, R"("]}}})")},
      {"tfrecord_record_ranges",
       absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")", features,
                    R"("], "records_per_split": 5}}})")},
      {"tfrecord_gzip", absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")",
                                     penguin, R"("], "records_per_split": 30}}})")},
      {"text_lines", absl::StrCat(R"({"source": {"type": "text_lines", "params": {"files": [")",
                                  TextFile(), R"("], "lines_per_split": 6}}})")},
      {"map", absl::StrCat("{", range,
                           R"(, "ops": [{"op": "map", "udf": "add", "udfParams": {"value": 3}}]})")},
      {"parallel_map",
       absl::StrCat("{", range, R"(, "ops": [{"op": "parallel_map", "params": {"num_threads": 3},
                                  "udf": "add", "udfParams": {"value": 3}}]})")},
      {"filter", absl::StrCat("{", range, R"(, "ops": [{"op": "filter", "udf": "modulo",
                                  "udfParams": {"modulus": 3, "remainder": 1}}]})")},
      {"parallel_map_tuned",
       absl::StrCat("{", range, R"(, "ops": [{"op": "parallel_map", "params": {"num_threads": 0},
                                  "udf": "add", "udfParams": {"value": 3}},
                                 {"op": "prefetch", "params": {"buffer_size": 0}}]})")},
      {"parallel_map_tuned_batch_placed",
       absl::StrCat("{", range, R"(, "ops": [{"op": "parallel_map", "params": {"num_threads": 0},
                                  "udf": "cast", "udfParams": {"dtype": "float32"}},
                                 {"op": "batch", "params": {"batch_size": 4}}]})")},
      {"shuffle",
       absl::StrCat("{", range, R"(, "ops": [{"op": "shuffle", "params": {"buffer_size": 7}}]})")},
      {"batch",
       absl::StrCat("{", range, R"(, "ops": [{"op": "batch", "params": {"batch_size": 4}}]})")},
      {"parallel_map_batch_placed",
       absl::StrCat("{", range, R"(, "ops": [{"op": "parallel_map", "params": {"num_threads": 3},
                                  "udf": "cast", "udfParams": {"dtype": "float32"}},
                                 {"op": "batch", "params": {"batch_size": 4}}]})")},
      {"batch_drop_remainder",
       absl::StrCat("{", range, R"(, "ops": [{"op": "batch", "params": {"batch_size": 8,
                                  "drop_remainder": true}}]})")},
      {"take", absl::StrCat("{", range, R"(, "ops": [{"op": "take", "params": {"count": 20}}]})")},
      {"skip", absl::StrCat("{", range, R"(, "ops": [{"op": "skip", "params": {"count": 20}}]})")},
      {"prefetch",
       absl::StrCat("{", range, R"(, "ops": [{"op": "prefetch", "params": {"buffer_size": 5}}]})")},
      {"mark", absl::StrCat("{", range, R"(, "ops": [{"op": "mark", "params": {"name": "m"}}]})")},
      {"text_pipeline",
       absl::StrCat(R"({"source": {"type": "text_lines", "params": {"files": [")", TextFile(),
                    R"("]}}, "ops": [
          {"op": "filter", "udf": "non_empty"},
          {"op": "map", "udf": "string_length"},
          {"op": "shuffle", "params": {"buffer_size": 4}},
          {"op": "batch", "params": {"batch_size": 3}}]})")},
      {"everything_chained", absl::StrCat("{", split_range, R"(, "ops": [
          {"op": "skip", "params": {"count": 2}},
          {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "add", "udfParams": {"value": 1}},
          {"op": "prefetch", "params": {"buffer_size": 3}},
          {"op": "shuffle", "params": {"buffer_size": 9, "seed": 4}},
          {"op": "filter", "udf": "modulo", "udfParams": {"modulus": 4, "remainder": 0}, "keepPosition": true},
          {"op": "mark"},
          {"op": "map", "udf": "add", "udfParams": {"value": 100}},
          {"op": "batch", "params": {"batch_size": 2}},
          {"op": "prefetch"},
          {"op": "take", "params": {"count": 4}}]})")},
      {"image_augmentation",
       absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")", images,
                    R"("]}}, "ops": [
          {"op": "map", "udf": "parse_example", "udfParams": {"keys": ["image_raw", "label"],
                                                              "dtypes": ["bytes", "int64"]}},
          {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_image"},
          {"op": "map", "udf": "random_crop", "udfParams": {"height": 32, "width": 32}},
          {"op": "map", "udf": "random_flip"},
          {"op": "map", "udf": "normalize", "udfParams": {"mean": [0.5], "std": [0.25]}},
          {"op": "batch", "params": {"batch_size": 1}}]})")},
  };
}

class SaveRestoreTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto def = ParsePipelineJson(GetParam().json, GetParam().name);
    ASSERT_TRUE(def.ok()) << def.status();
    auto pipeline = Pipeline::Create(*def, registries_);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    pipeline_ = std::move(pipeline).value();
    auto splits = pipeline_->EnumerateSplits(Env::Default());
    ASSERT_TRUE(splits.ok()) << splits.status();
    splits_ = pipeline_->PlanEpoch(*splits, kSeed, kEpoch);
  }

  std::unique_ptr<Iterator> Fresh() {
    auto it = pipeline_->MakeIterator(IteratorContext{Env::Default(), kSeed, kEpoch},
                                      std::make_unique<PlannedSplitProvider>(splits_));
    EXPECT_TRUE(it.ok()) << it.status();
    return std::move(it).value();
  }

  // Pulls up to `n` elements (all when n < 0) into `out`.
  static void Pull(Iterator* it, int64_t n, std::vector<Element>* out) {
    for (int64_t i = 0; n < 0 || i < n; ++i) {
      Element e;
      bool end = false;
      const absl::Status status = it->GetNext(&e, &end);
      ASSERT_TRUE(status.ok()) << status;
      if (end) return;
      out->push_back(std::move(e));
    }
  }

  static constexpr uint64_t kSeed = 20261121;
  static constexpr int64_t kEpoch = 3;
  PipelineRegistries registries_ = PipelineRegistries::WithBuiltins();
  std::unique_ptr<Pipeline> pipeline_;
  std::vector<Split> splits_;
};

TEST_P(SaveRestoreTest, ContinuationIsByteIdenticalAtEveryCut) {
  std::vector<Element> full;
  Pull(Fresh().get(), -1, &full);
  ASSERT_FALSE(full.empty());

  // n = 0, end of input, past the end, and random cuts in between.
  const unsigned test_seed = kSeed + std::hash<std::string>()(GetParam().name) % 1000;
  std::mt19937 rng(test_seed);
  std::vector<int64_t> cuts = {0, static_cast<int64_t>(full.size()),
                               static_cast<int64_t>(full.size()) + 1};
  for (int i = 0; i < 4; ++i) cuts.push_back(rng() % full.size());

  for (int64_t cut : cuts) {
    SCOPED_TRACE(absl::StrCat("case ", GetParam().name, ", cut after ", cut,
                              " elements, test seed ", test_seed));
    std::unique_ptr<Iterator> original = Fresh();
    std::vector<Element> got;
    Pull(original.get(), cut, &got);

    IteratorStateProto state;
    StateWriter writer(&state);
    ASSERT_TRUE(original->Save(writer).ok());
    // The state survives serialization, as it will in a checkpoint file.
    IteratorStateProto reloaded;
    ASSERT_TRUE(reloaded.ParseFromString(state.SerializeAsString()));

    std::unique_ptr<Iterator> restored = Fresh();
    const absl::Status status = restored->Restore(StateReader(&reloaded));
    ASSERT_TRUE(status.ok()) << status;
    std::vector<Element> rest;
    Pull(restored.get(), -1, &rest);
    got.insert(got.end(), rest.begin(), rest.end());
    ASSERT_EQ(got.size(), full.size());
    for (size_t i = 0; i < full.size(); ++i) ASSERT_TRUE(got[i] == full[i]) << "element " << i;

    // Saving does not disturb the original either.
    std::vector<Element> original_rest;
    Pull(original.get(), -1, &original_rest);
    ASSERT_EQ(original_rest.size(), rest.size());
    for (size_t i = 0; i < rest.size(); ++i) ASSERT_TRUE(original_rest[i] == rest[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(AllSourcesAndOps, SaveRestoreTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace granary
