// `granary local` and `granary datagen` as a user runs them: digests are reproducible from the
// seed, shuffling changes order but not content, and bad pipeline files are rejected with an
// error naming the culprit while the exit code says so.
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_paths.h"
#include "tests/run_command.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using testing::RunCommand;

class LocalCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScopedTempDir();
    const auto r = RunCommand(absl::StrCat(GRANARY_BINARY, " datagen imagenet --out ", dir_->path(),
                                           "/data --images 96 --files 3 --size 32"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  static void TearDownTestSuite() { delete dir_; }

  static std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_->Join(name);
    EXPECT_TRUE(WriteStringToFile(Env::Default(), path, text, false).ok());
    return path;
  }

  static std::string Read(const std::string& path) {
    auto text = ReadFileToString(Env::Default(), path);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }

  // Runs `granary local` (with `flags`) and returns the digest file's contents; `output` gets
  // what it printed.
  static std::string Digests(const std::string& pipeline, uint64_t seed, const std::string& tag,
                             const std::string& flags = "", std::string* output = nullptr) {
    const std::string out = dir_->Join("digest_" + tag);
    const auto r = RunCommand(absl::StrCat("GRANARY_DATA=", dir_->path(), "/data ", GRANARY_BINARY,
                                           " local --epochs 2 --pipeline ", pipeline, " --seed ",
                                           seed, " --digest_out ", out, " ", flags));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (output != nullptr) *output = r.output;
    return Read(out);
  }

  static std::string Field(const std::string& digests, int line, const std::string& key) {
    std::istringstream in(digests);
    std::string l;
    for (int i = 0; i <= line; ++i) std::getline(in, l);
    const size_t at = l.find("\"" + key + "\":");
    return at == std::string::npos ? "" : l.substr(at, l.find(',', at) - at);
  }

  static testing::ScopedTempDir* dir_;
};

testing::ScopedTempDir* LocalCliTest::dir_ = nullptr;

TEST_F(LocalCliTest, SameSeedWritesIdenticalDigests) {
  const std::string pipeline = testing::SourceDir() + "/examples/imagenet_resnet.json";
  const std::string a = Digests(pipeline, 5, "a");
  const std::string b = Digests(pipeline, 5, "b");
  EXPECT_EQ(a, b) << "seed 5";
  EXPECT_THAT(a, HasSubstr(R"({"epoch":0,"elements":96,)"));
  EXPECT_THAT(a, HasSubstr(R"({"epoch":1,"elements":96,)"));
}

TEST_F(LocalCliTest, AutoOrderShowsItsOrderAndKeepsTheDigests) {
  // Normalize (4x the bytes) written before the crop and flip: AutoOrder runs them first.
  const std::string pipeline =
      testing::SourceDir() + "/examples/imagenet_resnet_normalize_first.json";
  std::string printed;
  const std::string reordered = Digests(pipeline, 9, "auto", "--auto_order", &printed);
  EXPECT_THAT(printed, HasSubstr("auto_order: shuffle parse_example decode_jpeg random_crop(op 4) "
                                 "random_flip(op 5) normalize(op 3) batch prefetch"));
  EXPECT_EQ(reordered, Digests(pipeline, 9, "as_written")) << "seed 9";
}

TEST_F(LocalCliTest, OtherSeedChangesOrderNotContentOfShuffledUnaugmentedPipeline) {
  const std::string pipeline = Write("shuffled.json", R"({
    "source": {"type": "tfrecord", "params": {"files": ["${GRANARY_DATA}/*.tfrecord"],
                                              "records_per_split": 8, "shuffle_splits": true}},
    "ops": [
      {"op": "shuffle", "params": {"buffer_size": 16}},
      {"op": "map", "udf": "parse_example",
       "udfParams": {"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]}},
      {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_jpeg"},
      {"op": "batch", "params": {"batch_size": 10}}]})");
  const std::string a = Digests(pipeline, 1, "s1");
  const std::string b = Digests(pipeline, 2, "s2");
  for (int epoch : {0, 1}) {
    EXPECT_EQ(Field(a, epoch, "multiset_xxh64"), Field(b, epoch, "multiset_xxh64"))
        << "seeds 1 and 2, epoch " << epoch;
    EXPECT_NE(Field(a, epoch, "ordered_xxh64"), Field(b, epoch, "ordered_xxh64"))
        << "seeds 1 and 2, epoch " << epoch;
    EXPECT_EQ(Field(a, epoch, "elements"), "\"elements\":96");
  }
}

struct BadPipeline {
  std::string name;
  std::string json;
  std::string culprit;  // what the error must name
};

void PrintTo(const BadPipeline& p, std::ostream* os) { *os << p.name; }

class BadPipelineCliTest : public LocalCliTest,
                           public ::testing::WithParamInterface<BadPipeline> {};

TEST_P(BadPipelineCliTest, IsRejectedNamingTheCulprit) {
  const std::string path = Write(GetParam().name + ".json", GetParam().json);
  const auto r = RunCommand(absl::StrCat(GRANARY_BINARY, " local --pipeline ", path));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(GetParam().culprit));
  EXPECT_THAT(r.output, HasSubstr(path)) << "the error names the pipeline file";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadPipelineCliTest,
    ::testing::Values(BadPipeline{"unknown_op",
                                  R"({"source": {"type": "range", "params": {"stop": 3}},
                        "ops": [{"op": "unbatch"}]})",
                                  "op 0 (unbatch): unknown op"},
                      BadPipeline{"unknown_udf",
                                  R"({"source": {"type": "range", "params": {"stop": 3}},
                        "ops": [{"op": "map", "udf": "decode_webp"}]})",
                                  "op 0 (map, udf 'decode_webp'): unknown UDF"},
                      BadPipeline{
                          "wrong_param_type",
                          R"({"source": {"type": "range", "params": {"stop": 3}},
                        "ops": [{"op": "batch", "params": {"batch_size": "32"}}]})",
                          "op 0 (batch): param 'batch_size' must be an integer, got string \"32\""},
                      BadPipeline{"missing_file",
                                  R"({"source": {"type": "tfrecord",
                                   "params": {"files": ["/nonexistent/train-*.tfrecord"]}}})",
                                  "pattern '/nonexistent/train-*.tfrecord' matches no file"},
                      BadPipeline{"not_json", R"({"source": )", "not a valid pipeline"}),
    [](const auto& info) { return info.param.name; });

TEST_F(LocalCliTest, MissingPipelineFileIsNamed) {
  const auto r = RunCommand(absl::StrCat(GRANARY_BINARY, " local --pipeline /nonexistent/p.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/p.json"));
}

TEST_F(LocalCliTest, UnknownCommandIsNamed) {
  const auto r = RunCommand(absl::StrCat(GRANARY_BINARY, " frobnicate"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown command 'frobnicate'"));
}

// Issue 13 defect 15: every command's flags live in one Abseil namespace; a subcommand refuses
// the others' by name, before doing anything.
TEST_F(LocalCliTest, AnotherCommandsFlagIsRefusedByName) {
  const auto run = RunCommand(absl::StrCat(GRANARY_BINARY,
                                           " run --dispatcher=127.0.0.1:1 --pipeline=p.json "
                                           "--journal_dir=x"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("granary run: --journal_dir is not a flag of granary run (it "
                                    "belongs to granary dispatcher, granary journal)"));
  const auto local = RunCommand(
      absl::StrCat(GRANARY_BINARY, " local --pipeline ", dir_->path(), "/none.json --worker_id w"));
  EXPECT_EQ(local.exit_code, 2) << local.output;
  EXPECT_THAT(local.output, HasSubstr("--worker_id is not a flag of granary local"));
  // --help lists the command's own flags (Abseil's listed none).
  const auto help = RunCommand(absl::StrCat(GRANARY_BINARY, " status --help"));
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("flags of granary status:\n  --config (A client "
                                     "configuration file"));
  EXPECT_THAT(help.output,
              HasSubstr("\n  --dispatcher (Dispatcher address, host:port; for a replicated "
                        "dispatcher its replicas' addresses separated by commas (calls follow "
                        "the leader).); default: ;\n"));
  EXPECT_THAT(help.output, ::testing::Not(HasSubstr("--journal_dir")));
}

TEST_F(LocalCliTest, DatagenIsDeterministic) {
  for (const char* tag : {"x", "y"}) {
    const auto r = RunCommand(absl::StrCat(GRANARY_BINARY, " datagen imagenet --out ", dir_->path(),
                                           "/gen_", tag, " --images 5 --files 2 --size 16"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  for (const char* file : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"}) {
    const std::string x = Read(absl::StrCat(dir_->path(), "/gen_x/", file));
    EXPECT_FALSE(x.empty());
    // Compare hashes: a byte dump of two JPEG datasets helps nobody.
    EXPECT_EQ(Hash64(x), Hash64(Read(absl::StrCat(dir_->path(), "/gen_y/", file)))) << file;
  }
}

}  // namespace
}  // namespace granary
