#include "pipeline/digests/digest_file.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(DigestFileTest, LineRoundTrips) {
  const DigestLine line{7, 1000, 0x0123456789abcdefULL, 0xfedcba9876543210ULL, 3, 4};
  EXPECT_EQ(line.ToJson(),
            R"({"epoch":7,"elements":1000,"multiset_xxh64":"0123456789abcdef",)"
            R"("ordered_xxh64":"fedcba9876543210","duplicates_dropped":3,"skipped":4})");
  absl::StatusOr<DigestLine> parsed = DigestLine::Parse(line.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->epoch, 7);
  EXPECT_EQ(parsed->rows, 1000);
  EXPECT_EQ(parsed->multiset, line.multiset);
  EXPECT_EQ(parsed->ordered, line.ordered);
  EXPECT_EQ(parsed->dropped, 3);
  EXPECT_EQ(parsed->skipped, 4);
  // Lines written before "skipped" existed read as 0 skipped.
  absl::StatusOr<DigestLine> old =
      DigestLine::Parse(R"({"epoch":7,"elements":1000,"multiset_xxh64":"0123456789abcdef",)"
                        R"("ordered_xxh64":"fedcba9876543210","duplicates_dropped":3})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->skipped, 0);
}

TEST(DigestFileTest, EqualSharesFieldsRoundTripAndAreLeftOutWhenZero) {
  DigestLine line{2, 90, 1, 2, 0, 0};
  line.steps = 12;
  line.padding = 1;
  line.remainder_dropped = 0;
  EXPECT_THAT(line.ToJson(),
              HasSubstr(R"("skipped":0,"steps":12,"padding":1,"remainder_dropped":0})"));
  absl::StatusOr<DigestLine> parsed = DigestLine::Parse(line.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->steps, 12);
  EXPECT_EQ(parsed->padding, 1);
  EXPECT_EQ(parsed->remainder_dropped, 0);
  EXPECT_THAT(DigestLine({2, 90, 1, 2, 0, 0}).ToJson(), ::testing::Not(HasSubstr("steps")));
}

TEST(DigestFileTest, MalformedLinesNameTheField) {
  const std::string good = DigestLine{1, 2, 3, 4, 5}.ToJson();
  std::string no_multiset = good;
  no_multiset.replace(no_multiset.find("multiset_xxh64"), 8, "multiSET");
  EXPECT_THAT(DigestLine::Parse(no_multiset).status().message(), HasSubstr("\"multiset_xxh64\""));
  EXPECT_THAT(DigestLine::Parse(R"({"epoch":x})").status().message(), HasSubstr("\"epoch\""));
}

TEST(DigestFileTest, ALaterLineForAnEpochWinsAndErrorsNameFileAndLine) {
  testing::ScopedTempDir dir;
  Env* env = Env::Default();
  const std::string path = dir.path() + "/digests.jsonl";
  const std::string text = DigestLine{0, 10, 1, 1, 0}.ToJson() + "\n" +
                           DigestLine{1, 10, 2, 2, 0}.ToJson() + "\n" +
                           DigestLine{1, 10, 2, 3, 4}.ToJson() + "\n";
  ASSERT_TRUE(WriteStringToFile(env, path, text, /*sync=*/false).ok());
  absl::StatusOr<std::map<int64_t, DigestLine>> lines = ReadDigestFile(env, path);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ(lines->at(1).dropped, 4);
  ASSERT_TRUE(WriteStringToFile(env, path, text + "{\"epoch\":2}\n", /*sync=*/false).ok());
  EXPECT_THAT(ReadDigestFile(env, path).status().message(), HasSubstr(path + " line 4"));
}

// A real JSON parser reads lines written by other tools: Python's json.dumps puts a space after
// every colon and comma; keys may come in any order, with any whitespace (issue 13, defect 16).
TEST(DigestFileTest, ParsesJsonWithAnySpacingAndKeyOrder) {
  const std::string python =
      R"({"epoch": 2, "elements": 1000, "multiset_xxh64": "0123456789abcdef", )"
      R"("ordered_xxh64": "fedcba9876543210", "duplicates_dropped": 3, "skipped": 1})";
  const std::string reordered = R"(  { "skipped" : 1 , "duplicates_dropped":3,
      "ordered_xxh64" :"fedcba9876543210","multiset_xxh64":"0123456789abcdef",
      "elements": 1000, "epoch": 2 }  )";
  for (const std::string& line : {python, reordered}) {
    absl::StatusOr<DigestLine> d = DigestLine::Parse(line);
    ASSERT_TRUE(d.ok()) << line << ": " << d.status();
    EXPECT_EQ(d->epoch, 2);
    EXPECT_EQ(d->rows, 1000);
    EXPECT_EQ(d->multiset, 0x0123456789abcdefULL);
    EXPECT_EQ(d->ordered, 0xfedcba9876543210ULL);
    EXPECT_EQ(d->dropped, 3);
    EXPECT_EQ(d->skipped, 1);
  }
}

TEST(DigestFileTest, RejectsWhatIsNotADigestLine) {
  const struct {
    std::string line;
    std::string message;
  } cases[] = {
      {"not json", "digest line 'not json': not a JSON object"},
      {R"({"epoch": 1, "elements": 2, "multiset_xxh64": "zz", "ordered_xxh64": "00",)"
       R"( "duplicates_dropped": 0})",
       "malformed \"multiset_xxh64\""},
      {R"({"epoch": "one", "elements": 2})", "not a JSON object"},
      {R"({"epoch": 1, "multiset_xxh64": "01", "ordered_xxh64": "02", "duplicates_dropped": 0})",
       "missing or malformed \"elements\""},
  };
  for (const auto& c : cases) {
    absl::StatusOr<DigestLine> d = DigestLine::Parse(c.line);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(d.status().message(), HasSubstr(c.message)) << c.line;
  }
}

}  // namespace
}  // namespace granary
