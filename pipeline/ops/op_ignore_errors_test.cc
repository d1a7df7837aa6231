// Damaged JPEGs fail with DataLoss naming the split and record; ignore_errors drops such
// elements, counts them, and stays deterministic and checkpointable (issue 13, defect 9).
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "pipeline/udfs/udf_test_util.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A JPEG cut in the middle of its image data.
std::string Truncated(const std::string& jpeg) { return jpeg.substr(0, jpeg.size() / 2); }

// A JPEG with 64 random bytes (from `seed`) a third of the way into its entropy-coded data.
std::string Garbled(const std::string& jpeg, uint32_t seed) {
  const size_t sos = jpeg.find("\xFF\xDA");
  const size_t scan =
      sos + 2 + ((static_cast<uint8_t>(jpeg[sos + 2]) << 8) | static_cast<uint8_t>(jpeg[sos + 3]));
  std::string damaged = jpeg;
  std::mt19937 rng(seed);
  const size_t at = scan + (jpeg.size() - 2 - scan) / 3;
  for (size_t i = at; i < at + 64; ++i) damaged[i] = static_cast<char>(rng() & 0xFF);
  return damaged;
}

// Records 0..7 of one TFRecord file, each a JPEG; records 1, 4 (truncated) and 5 (garbled) are
// damaged. Written at test time from the ImageNet fixture's valid JPEG.
class DamagedJpegsTest : public ::testing::Test {
 protected:
  static constexpr int kRecords = 8;
  static constexpr int kDamaged = 3;

  void SetUp() override {
    const std::string jpeg = udf_test::ImagenetJpeg();
    ASSERT_FALSE(jpeg.empty());
    path_ = dir_.Join("images.tfrecord");
    auto file = Env::Default()->NewWritableFile(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    TfRecordWriter writer(std::move(*file));
    for (int i = 0; i < kRecords; ++i) {
      const std::string record = i == 1 || i == 4 ? Truncated(jpeg)
                                 : i == 5         ? Garbled(jpeg, 1)
                                                  : jpeg;
      ASSERT_TRUE(writer.Write(record).ok());
    }
    ASSERT_TRUE(writer.Close().ok());
  }

  // A pipeline over the file with `ops` (a JSON list's contents), records_per_split 3.
  absl::StatusOr<std::unique_ptr<Pipeline>> Create(const std::string& ops) {
    auto def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")", path_,
                     R"("], "records_per_split": 3}}, "ops": [)", ops, "]}"),
        "damaged.json");
    if (!def.ok()) return def.status();
    return Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
  }

  testing::ScopedTempDir dir_;
  std::string path_;
};

TEST_F(DamagedJpegsTest, DamagedJpegIsDataLossNamingSplitAndRecord) {
  auto pipeline = Create(R"({"op": "map", "udf": "decode_jpeg"})");
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto result = RunEpochInProcess(**pipeline, 0, 0, Env::Default());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_THAT(result.status().message(),
              HasSubstr("op 0 (map, udf 'decode_jpeg') at split 0 record 1: decode_jpeg: "
                        "damaged JPEG"));
}

TEST_F(DamagedJpegsTest, IgnoreErrorsDropsDamagedElementsAndCountsThem) {
  for (const char* map : {"map", "parallel_map"}) {
    SCOPED_TRACE(map);
    auto pipeline = Create(absl::StrCat(R"({"op": ")", map, R"(", "udf": "decode_jpeg"},
        {"op": "ignore_errors"},
        {"op": "map", "udf": "resize", "udfParams": {"height": 4, "width": 4}})"));
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    std::vector<int64_t> records;
    EpochRunOptions options;
    options.on_element = [&](const Element& e) { records.push_back(e.record); };
    auto result = RunEpochInProcess(**pipeline, 0, 0, Env::Default(), options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->rows, kRecords - kDamaged);
    EXPECT_EQ(result->skipped, kDamaged);
    EXPECT_THAT(records, ::testing::ElementsAre(0, 2, 3, 6, 7));
    EXPECT_THAT(result->digest_line, HasSubstr(absl::StrCat("\"skipped\":", kDamaged)));
  }
}

// After a filter, elements whose predicate failed are dropped too; the others are kept or
// filtered as usual.
TEST_F(DamagedJpegsTest, IgnoreErrorsAfterAFilterDropsElementsWhosePredicateFailed) {
  const std::string lines = dir_.Join("lines.txt");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), lines, "a\n\nbb\n\nccc\n", false).ok());
  auto def = ParsePipelineJson(
      absl::StrCat(R"({"source": {"type": "text_lines", "params": {"files": [")", lines, R"("]}},
          "ops": [{"op": "map", "udf": "string_length"},
                  {"op": "filter", "udf": "non_empty"},
                  {"op": "ignore_errors"}]})"),
      "filter.json");
  ASSERT_TRUE(def.ok()) << def.status();
  auto pipeline = Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  // string_length makes int64 tensors, which the string predicate non_empty refuses.
  auto result = RunEpochInProcess(**pipeline, 0, 0, Env::Default());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->rows, 0);
  EXPECT_EQ(result->skipped, 5);
}

// Only a UDF's failure for one element is dropped: a damaged file (a CRC mismatch in the source)
// still ends the run, as do errors of other kinds.
TEST_F(DamagedJpegsTest, IgnoreErrorsPassesSourceErrorsOn) {
  std::string bytes;
  auto text = ReadFileToString(Env::Default(), path_);
  ASSERT_TRUE(text.ok());
  bytes = *text;
  bytes[100] ^= 0x40;  // Inside record 0's data: its CRC no longer matches.
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path_, bytes, false).ok());
  auto pipeline = Create(R"({"op": "map", "udf": "decode_jpeg"}, {"op": "ignore_errors"})");
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto result = RunEpochInProcess(**pipeline, 0, 0, Env::Default());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("corrupt record data (CRC mismatch)"));
}

TEST_F(DamagedJpegsTest, IgnoreErrorsMustFollowAUdfOp) {
  auto pipeline = Create(R"({"op": "map", "udf": "decode_jpeg"},
      {"op": "batch", "params": {"batch_size": 2}}, {"op": "ignore_errors"})");
  EXPECT_EQ(pipeline.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pipeline.status().message(),
              HasSubstr("op 2 (ignore_errors): must directly follow a map, parallel_map or "
                        "filter"));
  EXPECT_EQ(Create(R"({"op": "ignore_errors"})").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Save after every n, Restore into a fresh iterator: the same elements follow, and the count of
// skipped elements ends the same (it is part of the state).
TEST_F(DamagedJpegsTest, IgnoreErrorsSavesAndRestoresItsPositionAndCount) {
  auto pipeline = Create(R"({"op": "parallel_map", "params": {"num_threads": 2},
                             "udf": "decode_jpeg"},
                            {"op": "ignore_errors"},
                            {"op": "map", "udf": "random_crop", "udfParams": {"height": 4, "width": 4}})");
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto splits = (*pipeline)->EnumerateSplits(Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  const auto fresh = [&](IteratorStats* stats) {
    IteratorContext ctx{Env::Default(), 5, 1};
    ctx.stats = stats;
    auto it = (*pipeline)->MakeIterator(ctx, std::make_unique<PlannedSplitProvider>(*splits));
    EXPECT_TRUE(it.ok()) << it.status();
    return std::move(it).value();
  };
  const auto pull = [](Iterator* it, int64_t n, std::vector<Element>* out) {
    for (int64_t i = 0; n < 0 || i < n; ++i) {
      Element e;
      bool end = false;
      ASSERT_TRUE(it->GetNext(&e, &end).ok());
      if (end) return;
      out->push_back(std::move(e));
    }
  };
  IteratorStats full_stats;
  std::vector<Element> full;
  pull(fresh(&full_stats).get(), -1, &full);
  ASSERT_EQ(full.size(), kRecords - kDamaged);
  ASSERT_EQ(full_stats.skipped_elements.load(), kDamaged);
  for (int64_t cut = 0; cut <= static_cast<int64_t>(full.size()); ++cut) {
    SCOPED_TRACE(absl::StrCat("cut after ", cut, " elements"));
    IteratorStats stats;
    std::unique_ptr<Iterator> original = fresh(&stats);
    std::vector<Element> got;
    pull(original.get(), cut, &got);
    IteratorStateProto state;
    StateWriter writer(&state);
    const absl::Status saved = original->Save(writer);
    ASSERT_TRUE(saved.ok()) << saved;
    IteratorStats restored_stats;
    std::unique_ptr<Iterator> restored = fresh(&restored_stats);
    const absl::Status status = restored->Restore(StateReader(&state));
    ASSERT_TRUE(status.ok()) << status;
    pull(restored.get(), -1, &got);
    ASSERT_EQ(got.size(), full.size());
    for (size_t i = 0; i < full.size(); ++i) EXPECT_TRUE(got[i] == full[i]) << "element " << i;
    EXPECT_EQ(restored_stats.skipped_elements.load(), kDamaged);
  }
}

}  // namespace
}  // namespace granary
