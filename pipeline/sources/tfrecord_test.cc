// Tests of TfRecordReader and TfRecordWriter (pipeline/sources/tfrecord_reader.h, tfrecord_writer.h),
// including files written by TensorFlow itself.
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/compressed_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/sources/tfrecord_reader.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_paths.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// Writes `records` to `path`; returns the offset of each record and, last, the end offset.
std::vector<int64_t> WriteRecords(const std::string& path, const std::vector<std::string>& records,
                                  Compression compression = Compression::kNone) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file =
      CreateMaybeCompressed(Env::Default(), path, compression);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  TfRecordWriter writer(std::move(*file));
  std::vector<int64_t> offsets;
  for (const std::string& record : records) {
    offsets.push_back(writer.offset());
    EXPECT_TRUE(writer.Write(record).ok());
  }
  offsets.push_back(writer.offset());
  EXPECT_TRUE(writer.Sync().ok());
  EXPECT_TRUE(writer.Close().ok());
  return offsets;
}

std::unique_ptr<TfRecordReader> OpenReader(const std::string& path,
                                           Compression compression = Compression::kNone,
                                           int64_t offset = 0) {
  absl::StatusOr<std::unique_ptr<SequentialFile>> file =
      OpenMaybeCompressed(Env::Default(), path, compression);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  if (offset > 0) {
    EXPECT_TRUE((*file)->Skip(offset).ok());
  }
  return std::make_unique<TfRecordReader>(std::move(*file), path, offset);
}

// Reads records until the end or an error; returns the status that stopped it.
absl::Status ReadAll(TfRecordReader& reader, std::vector<std::string>* records) {
  while (true) {
    std::string record;
    bool end = false;
    absl::Status status = reader.ReadRecord(&record, &end);
    if (!status.ok() || end) return status;
    records->push_back(std::move(record));
  }
}

absl::StatusOr<int64_t> CountBySkipping(TfRecordReader& reader) {
  int64_t count = 0;
  while (true) {
    bool end = false;
    absl::Status status = reader.SkipRecord(&end);
    if (!status.ok()) return status;
    if (end) return count;
    ++count;
  }
}

std::vector<std::string> SampleRecords(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string big(1 << 20, '\0');
  for (char& c : big) c = static_cast<char>(rng());
  return {"", "a", std::string("bin\0ary\xff", 8), big, "last"};
}

class TfRecordTest : public ::testing::Test {
 protected:
  // Rewrites the file at `path` with `edit` applied to its bytes.
  void EditFile(const std::string& path, const std::function<void(std::string&)>& edit) {
    std::string data = *ReadFileToString(Env::Default(), path);
    edit(data);
    ASSERT_TRUE(WriteStringToFile(Env::Default(), path, data, /*sync=*/false).ok());
  }

  // Reads `path` from the start and expects records 0 and 1 of {r0, r1, r2}, then `want_error`.
  void ExpectErrorAtThirdRecord(const std::string& path, const std::string& want_error) {
    std::unique_ptr<TfRecordReader> reader = OpenReader(path);
    ASSERT_NE(reader, nullptr);
    std::vector<std::string> records;
    const absl::Status status = ReadAll(*reader, &records);
    EXPECT_EQ(records.size(), 2u);
    EXPECT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(want_error));
  }

  testing::ScopedTempDir dir_;
  const std::vector<std::string> three_ = {"record zero", "record one", "record two"};
};

TEST_F(TfRecordTest, RoundTripsPlain) {
  const uint64_t seed = std::random_device()();
  const std::vector<std::string> records = SampleRecords(seed);
  const std::string path = dir_.Join("plain.tfrecord");
  const std::vector<int64_t> offsets = WriteRecords(path, records);
  int64_t expected_end = 0;
  for (const std::string& r : records) expected_end += 16 + static_cast<int64_t>(r.size());
  EXPECT_EQ(offsets.back(), expected_end);
  EXPECT_EQ(static_cast<int64_t>(*Env::Default()->GetFileSize(path)), expected_end);

  std::unique_ptr<TfRecordReader> reader = OpenReader(path);

  ASSERT_NE(reader, nullptr);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(reader->offset(), offsets[i]) << "record " << i;
    std::string record;
    bool end = true;
    ASSERT_TRUE(reader->ReadRecord(&record, &end).ok()) << "seed " << seed;
    ASSERT_FALSE(end);
    EXPECT_EQ(record, records[i]) << "record " << i << " seed " << seed;
  }
  EXPECT_EQ(reader->offset(), offsets.back());
  for (int i = 0; i < 2; ++i) {  // The end is sticky.
    std::string record;
    bool end = false;
    ASSERT_TRUE(reader->ReadRecord(&record, &end).ok());
    EXPECT_TRUE(end);
  }
}

TEST_F(TfRecordTest, RoundTripsGzip) {
  const uint64_t seed = std::random_device()();
  const std::vector<std::string> records = SampleRecords(seed);
  const std::string path = dir_.Join("compressed.tfrecord.gz");
  const std::vector<int64_t> offsets = WriteRecords(path, records, Compression::kGzip);
  EXPECT_EQ(ReadFileToString(Env::Default(), path)->substr(0, 2), "\x1f\x8b");

  std::unique_ptr<TfRecordReader> reader = OpenReader(path, Compression::kGzip);

  ASSERT_NE(reader, nullptr);
  std::vector<std::string> read;
  ASSERT_TRUE(ReadAll(*reader, &read).ok()) << "seed " << seed;
  EXPECT_EQ(read, records) << "seed " << seed;
  // Offsets are in the decompressed bytes.
  EXPECT_EQ(reader->offset(), offsets.back());
}

TEST_F(TfRecordTest, ReaderStartsAtTheGivenOffset) {
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    const std::string path = dir_.Join(c == Compression::kGzip ? "mid.gz" : "mid");
    const std::vector<int64_t> offsets = WriteRecords(path, three_, c);
    std::unique_ptr<TfRecordReader> reader = OpenReader(path, c, offsets[1]);
    ASSERT_NE(reader, nullptr);
    EXPECT_EQ(reader->offset(), offsets[1]);
    std::vector<std::string> read;
    ASSERT_TRUE(ReadAll(*reader, &read).ok());
    EXPECT_EQ(read, std::vector<std::string>(three_.begin() + 1, three_.end()));
    EXPECT_EQ(reader->offset(), offsets.back());
  }
}

TEST_F(TfRecordTest, SkipRecordVisitsTheSameOffsetsAsReadRecord) {
  const std::string path = dir_.Join("skip");
  const std::vector<int64_t> offsets = WriteRecords(path, SampleRecords(1));
  std::unique_ptr<TfRecordReader> reader = OpenReader(path);
  ASSERT_NE(reader, nullptr);
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    EXPECT_EQ(reader->offset(), offsets[i]);
    bool end = true;
    ASSERT_TRUE(reader->SkipRecord(&end).ok());
    ASSERT_FALSE(end);
  }
  bool end = false;
  ASSERT_TRUE(reader->SkipRecord(&end).ok());
  EXPECT_TRUE(end);
  EXPECT_EQ(reader->offset(), offsets.back());
}

TEST_F(TfRecordTest, EmptyFileEndsAtOnce) {
  const std::string path = dir_.Join("empty");
  WriteRecords(path, {});
  std::unique_ptr<TfRecordReader> reader = OpenReader(path);
  ASSERT_NE(reader, nullptr);
  std::string record;
  bool end = false;
  ASSERT_TRUE(reader->ReadRecord(&record, &end).ok());
  EXPECT_TRUE(end);
  EXPECT_EQ(reader->offset(), 0);
}

TEST_F(TfRecordTest, TruncatedHeaderIsDataLossNamingPathAndOffset) {
  const std::string path = dir_.Join("cut_header");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data.resize(offsets[2] + 5); });
  ExpectErrorAtThirdRecord(path, absl::StrCat(path, ": truncated record at offset ", offsets[2]));
}

TEST_F(TfRecordTest, TruncatedDataIsDataLossNamingPathAndOffset) {
  const std::string path = dir_.Join("cut_data");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data.resize(offsets[2] + 12 + 3); });
  ExpectErrorAtThirdRecord(path, absl::StrCat(path, ": truncated record at offset ", offsets[2]));
}

TEST_F(TfRecordTest, TruncatedDataCrcIsDataLossNamingPathAndOffset) {
  const std::string path = dir_.Join("cut_crc");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data.resize(data.size() - 1); });
  ExpectErrorAtThirdRecord(path, absl::StrCat(path, ": truncated record at offset ", offsets[2]));
}

TEST_F(TfRecordTest, BadLengthCrcIsDataLossNamingPathAndOffset) {
  const std::string path = dir_.Join("bad_length");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data[offsets[2] + 1] ^= 0x01; });
  ExpectErrorAtThirdRecord(
      path, absl::StrCat(path, ": corrupt record length (CRC mismatch) at offset ", offsets[2]));
}

TEST_F(TfRecordTest, BadDataCrcIsDataLossNamingPathAndOffset) {
  const std::string path = dir_.Join("bad_data");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data[offsets[2] + 12 + 4] ^= 0x20; });
  ExpectErrorAtThirdRecord(
      path, absl::StrCat(path, ": corrupt record data (CRC mismatch) at offset ", offsets[2]));
}

// A file of another format read as TFRecord says what it looks like instead of reporting a CRC
// mismatch at offset 0 (issue 13, defect 13).
TEST_F(TfRecordTest, WrongFormatAtOffsetZeroIsNamed) {
  const std::string gz = dir_.Join("records.tfrecord.gz");
  WriteRecords(gz, three_, Compression::kGzip);
  const struct {
    std::string name;
    std::string bytes;  // Empty: the gzip TFRecord file written above.
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {"gzip", "", absl::StatusCode::kInvalidArgument,
       "not a TFRecord file: it starts with the gzip magic 1F 8B: set compression to GZIP"},
      {"zlib", std::string("\x78\x9c\xcb\x48\xcd\xc9\xc9\x07\x00\x06\x2c\x02\x15\x00", 14),
       absl::StatusCode::kInvalidArgument,
       "not a TFRecord file: it starts with a zlib header 78 9C"},
      {"png", std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16),
       absl::StatusCode::kInvalidArgument, "not a TFRecord file: it is a PNG image"},
      {"jpeg", std::string("\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01", 13),
       absl::StatusCode::kInvalidArgument, "not a TFRecord file: it is a JPEG image"},
      {"text", "first line of text\nsecond line\n", absl::StatusCode::kInvalidArgument,
       "not a TFRecord file: it looks like text (\"first line o\"); the text_lines source reads "
       "text"},
      {"short_text", "hi there\n", absl::StatusCode::kInvalidArgument,
       "not a TFRecord file: it looks like text (\"hi there\\n\")"},
      {"garbage", std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d", 13),
       absl::StatusCode::kDataLoss, "corrupt record length (CRC mismatch) at offset 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = gz;
    if (!c.bytes.empty()) {
      path = dir_.Join(c.name);
      ASSERT_TRUE(WriteStringToFile(Env::Default(), path, c.bytes, false).ok());
    }
    for (const bool skip : {false, true}) {
      std::unique_ptr<TfRecordReader> reader = OpenReader(path);  // Uncompressed.
      ASSERT_NE(reader, nullptr);
      std::vector<std::string> records;
      const absl::Status status =
          skip ? CountBySkipping(*reader).status() : ReadAll(*reader, &records);
      EXPECT_EQ(status.code(), c.code) << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat(path, ": ", c.message)));
    }
  }
}

// Past offset 0 a bad header stays a CRC mismatch: the file was a TFRecord file.
TEST_F(TfRecordTest, TextAfterTheFirstRecordIsACrcMismatch) {
  const std::string path = dir_.Join("appended_text");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) {
    data.resize(offsets[2]);
    data += "some text appended to the file\n";
  });
  ExpectErrorAtThirdRecord(
      path, absl::StrCat(path, ": corrupt record length (CRC mismatch) at offset ", offsets[2]));
}

TEST_F(TfRecordTest, ErrorsAreSticky) {
  const std::string path = dir_.Join("sticky");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data[offsets[0] + 12] ^= 0x20; });
  std::unique_ptr<TfRecordReader> reader = OpenReader(path);
  ASSERT_NE(reader, nullptr);
  std::string record;
  bool end = false;
  const absl::Status first = reader->ReadRecord(&record, &end);
  ASSERT_TRUE(absl::IsDataLoss(first)) << first;
  EXPECT_EQ(reader->ReadRecord(&record, &end), first);
  EXPECT_EQ(reader->SkipRecord(&end), first);
}

TEST_F(TfRecordTest, SkipRecordDoesNotCheckTheDataCrc) {
  const std::string path = dir_.Join("skip_bad_data");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data[offsets[1] + 12] ^= 0x20; });
  std::unique_ptr<TfRecordReader> reader = OpenReader(path);
  ASSERT_NE(reader, nullptr);
  absl::StatusOr<int64_t> count = CountBySkipping(*reader);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 3);
}

TEST_F(TfRecordTest, SkipRecordChecksTheLengthCrc) {
  const std::string path = dir_.Join("skip_bad_length");
  const std::vector<int64_t> offsets = WriteRecords(path, three_);
  EditFile(path, [&](std::string& data) { data[offsets[1]] ^= 0x04; });
  std::unique_ptr<TfRecordReader> reader = OpenReader(path);
  ASSERT_NE(reader, nullptr);
  const absl::Status status = CountBySkipping(*reader).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat(path, ": corrupt record length (CRC mismatch) at offset ",
                                     offsets[1])));
}

TEST_F(TfRecordTest, SkipRecordReportsATruncatedLastRecord) {
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    const std::string path = dir_.Join(c == Compression::kGzip ? "skip_cut.gz" : "skip_cut");
    const std::vector<int64_t> offsets = WriteRecords(path, three_);
    // Cut inside the last record's data CRC: only its final byte is missing.
    EditFile(path, [&](std::string& data) { data.resize(data.size() - 1); });
    if (c == Compression::kGzip) {
      // Re-compress the cut bytes so that the gzip stream itself is intact.
      const std::string cut = *ReadFileToString(Env::Default(), path);
      absl::StatusOr<std::unique_ptr<WritableFile>> out =
          CreateMaybeCompressed(Env::Default(), path, c);
      ASSERT_TRUE(out.ok());
      ASSERT_TRUE((*out)->Append(cut).ok());
      ASSERT_TRUE((*out)->Close().ok());
    }
    std::unique_ptr<TfRecordReader> reader = OpenReader(path, c);
    ASSERT_NE(reader, nullptr);
    const absl::Status status = CountBySkipping(*reader).status();
    EXPECT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat(path, ": truncated record at offset ", offsets[2])));
  }
}

TEST_F(TfRecordTest, CorruptGzipIsDataLossNamingPathAndRecordOffset) {
  const std::string path = dir_.Join("corrupt.gz");
  std::vector<std::string> records;
  for (int i = 0; i < 2000; ++i) records.push_back(absl::StrCat("record number ", i * 7919));
  WriteRecords(path, records, Compression::kGzip);
  EditFile(path, [](std::string& data) { data[data.size() / 2] ^= 0x5a; });
  std::unique_ptr<TfRecordReader> reader = OpenReader(path, Compression::kGzip);
  ASSERT_NE(reader, nullptr);
  std::vector<std::string> read;
  const absl::Status status = ReadAll(*reader, &read);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr("offset"));
}

// The record counts of tests/testdata/tfrecord/SOURCES.md.
const std::map<std::string, int64_t>& TensorFlowFiles() {
  static const auto* const files = new std::map<std::string, int64_t>{
      {"imagenet_inception_train-00000-of-00001.tfrecord", 1},
      {"cifar10_png.tfrecord", 4},
      {"tutorial_images.tfrecord", 2},
      {"tutorial_features.tfrecord", 42},
      {"penguin_eval_gzip.tfrecord.gz", 100},
  };
  return *files;
}

Compression CompressionOf(const std::string& name) {
  return absl::EndsWith(name, ".gz") ? Compression::kGzip : Compression::kNone;
}

TEST(TfRecordTensorFlowFilesTest, ReadsEveryFileWithItsRecordCount) {
  const std::string dir = testing::TfRecordTestDataDir();
  absl::StatusOr<std::vector<std::string>> names = Env::Default()->GetChildren(dir);
  ASSERT_TRUE(names.ok()) << names.status();
  std::set<std::string> seen;
  for (const std::string& name : *names) {
    if (name == "SOURCES.md") continue;
    SCOPED_TRACE(name);
    const auto expected = TensorFlowFiles().find(name);
    ASSERT_NE(expected, TensorFlowFiles().end()) << "no expected record count for " << name;
    seen.insert(name);
    const std::string path = dir + "/" + name;

    std::unique_ptr<TfRecordReader> reader = OpenReader(path, CompressionOf(name));

    ASSERT_NE(reader, nullptr);
    std::vector<std::string> records;
    const absl::Status status = ReadAll(*reader, &records);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(static_cast<int64_t>(records.size()), expected->second);
    // Every record is a serialized tf.train.Example: field 1 (features), length-delimited.
    for (const std::string& record : records) {
      ASSERT_FALSE(record.empty());
      EXPECT_EQ(record[0], '\x0a');
    }

    std::unique_ptr<TfRecordReader> skipper = OpenReader(path, CompressionOf(name));

    ASSERT_NE(skipper, nullptr);
    absl::StatusOr<int64_t> count = CountBySkipping(*skipper);
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(*count, expected->second);
    EXPECT_EQ(skipper->offset(), reader->offset());
  }
  EXPECT_EQ(seen.size(), TensorFlowFiles().size()) << "a file listed in SOURCES.md is missing";
}

// Rewriting TensorFlow's records with TfRecordWriter reproduces TensorFlow's bytes exactly.
TEST(TfRecordTensorFlowFilesTest, WriterReproducesTensorFlowBytes) {
  testing::ScopedTempDir tmp;
  const std::string dir = testing::TfRecordTestDataDir();
  for (const auto& [name, count] : TensorFlowFiles()) {
    SCOPED_TRACE(name);
    const Compression compression = CompressionOf(name);
    std::unique_ptr<TfRecordReader> reader = OpenReader(dir + "/" + name, compression);
    ASSERT_NE(reader, nullptr);
    std::vector<std::string> records;
    ASSERT_TRUE(ReadAll(*reader, &records).ok());
    const std::string copy = tmp.Join(name);
    WriteRecords(copy, records, compression);
    // Compare decompressed bytes (gzip output differs between compressor versions).
    absl::StatusOr<std::unique_ptr<SequentialFile>> original =
        OpenMaybeCompressed(Env::Default(), dir + "/" + name, compression);
    absl::StatusOr<std::unique_ptr<SequentialFile>> rewritten =
        OpenMaybeCompressed(Env::Default(), copy, compression);
    ASSERT_TRUE(original.ok() && rewritten.ok());
    std::string a, b;
    char buf[4096];
    for (auto [file, out] : {std::pair{original->get(), &a}, std::pair{rewritten->get(), &b}}) {
      while (true) {
        absl::StatusOr<size_t> n = file->Read(sizeof(buf), buf);
        ASSERT_TRUE(n.ok()) << n.status();
        if (*n == 0) break;
        out->append(buf, *n);
      }
    }
    EXPECT_EQ(a.size(), b.size());
    EXPECT_TRUE(a == b) << "rewritten bytes differ";
  }
}

}  // namespace
}  // namespace granary
