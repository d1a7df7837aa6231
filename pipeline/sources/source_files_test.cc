// Tests of the file sources: what "tfrecord" and "text_lines" share (pipeline/sources/source_files.h),
// run against both, then what is particular to each (source_tfrecord.cc, source_text_lines.cc).
#include "pipeline/sources/source_files.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/compressed_file.h"
#include "common/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/sources/builtin_sources.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/source.h"
#include "pipeline/sources/tfrecord_reader.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_paths.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The parameters of a file source, as a pipeline's JSON would give them.
struct SourceParams {
  std::vector<std::string> files;
  std::optional<std::string> compression;
  std::optional<int64_t> per_split;
  std::optional<int64_t> max_record_bytes;

  SourceParams& WithMaxRecordBytes(int64_t n) {
    max_record_bytes = n;
    return *this;
  }
  SourceParams& WithCompression(std::string c) {
    compression = std::move(c);
    return *this;
  }
  SourceParams& WithPerSplit(std::optional<int64_t> n) {
    per_split = n;
    return *this;
  }
};

SourceParams Files(std::vector<std::string> files) {
  SourceParams p;
  p.files = std::move(files);
  return p;
}

absl::StatusOr<Params> MakeParams(const SourceInfo& info, const std::string& per_split_name,
                                  const SourceParams& p) {
  google::protobuf::Struct values;
  auto& fields = *values.mutable_fields();
  auto* files = fields["files"].mutable_list_value();
  for (const std::string& f : p.files) files->add_values()->set_string_value(f);
  if (p.compression) fields["compression"].set_string_value(*p.compression);
  if (p.per_split) fields[per_split_name].set_number_value(static_cast<double>(*p.per_split));
  if (p.max_record_bytes) {
    fields["max_record_bytes"].set_number_value(static_cast<double>(*p.max_record_bytes));
  }
  return Params::Create(values, info.params, absl::StrCat("source ", info.type));
}

// What reading one split produced.
struct SplitContents {
  std::vector<std::string> records;
  // The reader's offset() before each record, then at the end.
  std::vector<int64_t> offsets;
  absl::Status status;  // What ended reading (OK at the end of the split).
};

SplitContents ReadSplit(const SourceInfo& info, const Params& params, const Split& split,
                        int64_t offset, int64_t records_done) {
  SplitContents out;
  absl::StatusOr<std::unique_ptr<SplitReader>> reader =
      info.open(params, SplitOpenContext{}, split, offset, records_done);
  if (!reader.ok()) {
    out.status = reader.status();
    return out;
  }
  while (true) {
    out.offsets.push_back((*reader)->offset());
    Element element;
    bool end = false;
    out.status = (*reader)->Next(&element, &end);
    if (!out.status.ok() || end) return out;
    // Each record is one DT_STRING scalar.
    EXPECT_EQ(element.tensors.size(), 1u);
    if (element.tensors.size() != 1) continue;
    const Tensor& t = element.tensors[0];
    EXPECT_EQ(t.dtype(), DT_STRING);
    EXPECT_THAT(t.shape(), IsEmpty());
    EXPECT_EQ(t.strings().size(), 1u);
    if (t.strings().size() == 1) out.records.push_back(t.strings()[0]);
  }
}

SplitContents ReadSplit(const SourceInfo& info, const Params& params, const Split& split) {
  return ReadSplit(info, params, split, split.begin_offset(), 0);
}

std::string SplitString(const Split& s) {
  return absl::StrCat("{id ", s.id(), " ", s.file(), " offset ", s.begin_offset(), " record ",
                      s.begin_record(), " n ", s.num_records(), "}");
}

// One file format: how to write records in it, and which source reads it.
struct Format {
  std::string type;
  std::string per_split;
  // Writes `records` to `path`, GZIP-compressed when `gzip`.
  void (*write)(const std::string& path, const std::vector<std::string>& records, bool gzip);
};

void WriteTfRecords(const std::string& path, const std::vector<std::string>& records, bool gzip) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file =
      CreateMaybeCompressed(Env::Default(), path, gzip ? Compression::kGzip : Compression::kNone);
  ASSERT_TRUE(file.ok()) << file.status();
  TfRecordWriter writer(std::move(*file));
  for (const std::string& r : records) ASSERT_TRUE(writer.Write(r).ok());
  ASSERT_TRUE(writer.Close().ok());
}

void WriteText(const std::string& path, const std::string& text, bool gzip) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file =
      CreateMaybeCompressed(Env::Default(), path, gzip ? Compression::kGzip : Compression::kNone);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append(text).ok());
  ASSERT_TRUE((*file)->Close().ok());
}

void WriteLines(const std::string& path, const std::vector<std::string>& lines, bool gzip) {
  WriteText(path, lines.empty() ? "" : absl::StrJoin(lines, "\n") + "\n", gzip);
}

void PrintTo(const Format& f, std::ostream* os) { *os << f.type; }

class FileSourceTest : public ::testing::TestWithParam<Format> {
 protected:
  const SourceInfo& info() {
    if (!info_) info_ = GetParam().type == "tfrecord" ? TfRecordSource() : TextLinesSource();
    return *info_;
  }

  // Writes `n` distinct records named after `name` to dir/name; returns them.
  std::vector<std::string> WriteFile(const std::string& name, int n, bool gzip = false) {
    std::vector<std::string> records;
    for (int i = 0; i < n; ++i) {
      // Varying lengths, so that offsets are not a multiple of anything.
      records.push_back(absl::StrCat(name, " record ", i, std::string(i % 7, '+')));
    }
    GetParam().write(dir_.Join(name), records, gzip);
    return records;
  }

  absl::StatusOr<Params> Make(const SourceParams& p) {
    return MakeParams(info(), GetParam().per_split, p);
  }

  absl::StatusOr<std::vector<Split>> Enumerate(const SourceParams& p) {
    absl::StatusOr<Params> params = Make(p);
    if (!params.ok()) return params.status();
    return info().enumerate(*params, Env::Default());
  }

  testing::ScopedTempDir dir_;
  std::optional<SourceInfo> info_;
};

TEST_P(FileSourceTest, HasItsTypeAndParams) {
  EXPECT_EQ(info().type, GetParam().type);
  std::vector<std::string> names;
  for (const ParamSpec& spec : info().params) names.push_back(spec.name);
  EXPECT_THAT(names, ElementsAre("files", "compression", GetParam().per_split, "max_record_bytes"));
}

TEST_P(FileSourceTest, OneWholeFileSplitPerFileByDefault) {
  const std::vector<std::string> a = WriteFile("a", 5);
  const std::vector<std::string> b = WriteFile("b", 3);
  absl::StatusOr<Params> params = Make(Files({dir_.Join("*")}));
  ASSERT_TRUE(params.ok()) << params.status();
  absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Split& s = (*splits)[i];
    EXPECT_EQ(s.id(), i);
    EXPECT_EQ(s.file(), dir_.Join(i == 0 ? "a" : "b"));
    EXPECT_EQ(s.begin_offset(), 0);
    EXPECT_EQ(s.begin_record(), 0);
    EXPECT_EQ(s.num_records(), -1);
  }
  const SplitContents first = ReadSplit(info(), *params, (*splits)[0]);
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(first.records, a);
  const SplitContents second = ReadSplit(info(), *params, (*splits)[1]);
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(second.records, b);
}

TEST_P(FileSourceTest, PatternsExpandSortedInPatternOrderWithoutDuplicates) {
  for (const char* name : {"b2", "a1", "b1", "a2"}) WriteFile(name, 1);
  absl::StatusOr<std::vector<Split>> splits =
      Enumerate(Files({dir_.Join("b*"), dir_.Join("*"), dir_.Join("a1")}));
  ASSERT_TRUE(splits.ok()) << splits.status();
  std::vector<std::string> files;
  for (const Split& s : *splits) files.push_back(s.file());
  EXPECT_THAT(files,
              ElementsAre(dir_.Join("b1"), dir_.Join("b2"), dir_.Join("a1"), dir_.Join("a2")));
  for (size_t i = 0; i < splits->size(); ++i) EXPECT_EQ((*splits)[i].id(), i);
}

TEST_P(FileSourceTest, PatternMatchingNoFileIsNotFoundNamingThePattern) {
  WriteFile("a", 1);
  const std::string pattern = dir_.Join("missing*");
  const absl::Status status = Enumerate(Files({dir_.Join("a"), pattern})).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("source ", GetParam().type, ": pattern '", pattern,
                                     "' matches no file")));
}

TEST_P(FileSourceTest, EmptyFilesListIsInvalidArgument) {
  const absl::Status status = Enumerate(Files({})).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("'files'"));
}

TEST_P(FileSourceTest, UnknownCompressionIsInvalidArgument) {
  WriteFile("a", 1);
  const absl::Status status = Enumerate(Files({dir_.Join("a")}).WithCompression("ZLIB")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("'compression'"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("ZLIB"));
}

TEST_P(FileSourceTest, NegativeSplitSizeIsInvalidArgument) {
  WriteFile("a", 1);
  const absl::Status status = Enumerate(Files({dir_.Join("a")}).WithPerSplit(-1)).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().per_split));
}

// Splitting into runs of n records covers every record of every file exactly once, in order,
// and each split's begin_offset is where its first record starts.
TEST_P(FileSourceTest, SplitsOfNRecordsCoverEveryRecordExactlyOnce) {
  std::vector<std::string> all = WriteFile("a", 10);
  const std::vector<std::string> b = WriteFile("b", 3);
  all.insert(all.end(), b.begin(), b.end());
  WriteFile("c_empty", 0);
  for (int64_t n : {1, 3, 4, 10, 100}) {
    SCOPED_TRACE(absl::StrCat("per split ", n));
    absl::StatusOr<Params> params = Make(Files({dir_.Join("*")}).WithPerSplit(n));
    ASSERT_TRUE(params.ok()) << params.status();
    absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
    ASSERT_TRUE(splits.ok()) << splits.status();
    const size_t expected_splits = (10 + n - 1) / n + (3 + n - 1) / n;  // c_empty has none.
    ASSERT_EQ(splits->size(), expected_splits);

    std::vector<std::string> read;
    std::string file;
    int64_t next_record = 0;
    int64_t next_offset = 0;
    for (size_t i = 0; i < splits->size(); ++i) {
      const Split& s = (*splits)[i];
      SCOPED_TRACE(SplitString(s));
      EXPECT_EQ(s.id(), i);
      if (s.file() != file) {  // First split of a file.
        file = s.file();
        next_record = 0;
        next_offset = 0;
      }
      EXPECT_EQ(s.begin_record(), next_record);
      EXPECT_EQ(s.begin_offset(), next_offset);
      const int64_t file_records = absl::EndsWith(file, "/a") ? 10 : 3;
      EXPECT_EQ(s.num_records(), std::min(n, file_records - next_record));
      const SplitContents contents = ReadSplit(info(), *params, s);
      ASSERT_TRUE(contents.status.ok()) << contents.status;
      EXPECT_EQ(static_cast<int64_t>(contents.records.size()), s.num_records());
      read.insert(read.end(), contents.records.begin(), contents.records.end());
      next_record += s.num_records();
      next_offset = contents.offsets.back();
    }
    EXPECT_EQ(read, all);
  }
}

TEST_P(FileSourceTest, EmptyFileIsOneEmptySplitOrNone) {
  WriteFile("empty", 0);
  absl::StatusOr<Params> whole = Make(Files({dir_.Join("empty")}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<std::vector<Split>> splits = info().enumerate(*whole, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->size(), 1u);
  const SplitContents contents = ReadSplit(info(), *whole, (*splits)[0]);
  EXPECT_TRUE(contents.status.ok()) << contents.status;
  EXPECT_THAT(contents.records, IsEmpty());

  splits = Enumerate(Files({dir_.Join("empty")}).WithPerSplit(2));
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_THAT(*splits, IsEmpty());
}

// Opening a split at an offset its reader reported, with the records read so far, yields
// exactly the rest of the split: what a restored iterator does.
TEST_P(FileSourceTest, OpeningAtAMidSplitOffsetResumes) {
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    const std::string name = gzip ? "resume.gz" : "resume";
    const std::vector<std::string> records = WriteFile(name, 11, gzip);
    for (std::optional<int64_t> per_split : {std::optional<int64_t>(), std::optional<int64_t>(4)}) {
      absl::StatusOr<Params> params = Make(Files({dir_.Join(name)}).WithPerSplit(per_split));
      ASSERT_TRUE(params.ok()) << params.status();
      absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
      ASSERT_TRUE(splits.ok()) << splits.status();
      // The second split of 4 records (4..7), or the whole file.
      const Split& split = (*splits)[per_split ? 1 : 0];
      SCOPED_TRACE(SplitString(split));
      const SplitContents full = ReadSplit(info(), *params, split);
      ASSERT_TRUE(full.status.ok()) << full.status;
      for (size_t done = 0; done <= full.records.size(); ++done) {
        const SplitContents rest = ReadSplit(info(), *params, split, full.offsets[done], done);
        ASSERT_TRUE(rest.status.ok()) << rest.status << " after " << done;
        EXPECT_EQ(rest.records,
                  std::vector<std::string>(full.records.begin() + done, full.records.end()))
            << "after " << done;
        EXPECT_EQ(rest.offsets.front(), full.offsets[done]);
      }
      const std::vector<std::string> expected =
          per_split ? std::vector<std::string>(records.begin() + 4, records.begin() + 8) : records;
      EXPECT_EQ(full.records, expected);
    }
  }
}

TEST_P(FileSourceTest, CompressionAutoFollowsTheGzExtensionAndGzipCanBeForced) {
  const std::vector<std::string> gz = WriteFile("data.gz", 5, /*gzip=*/true);
  const std::vector<std::string> plain = WriteFile("data", 4, /*gzip=*/false);
  const std::vector<std::string> unnamed = WriteFile("zipped", 3, /*gzip=*/true);
  {
    absl::StatusOr<Params> params = Make(Files({dir_.Join("data*")}).WithPerSplit(2));
    ASSERT_TRUE(params.ok()) << params.status();
    absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
    ASSERT_TRUE(splits.ok()) << splits.status();
    std::vector<std::string> read;
    for (const Split& s : *splits) {
      const SplitContents c = ReadSplit(info(), *params, s);
      ASSERT_TRUE(c.status.ok()) << c.status;
      read.insert(read.end(), c.records.begin(), c.records.end());
    }
    std::vector<std::string> expected = plain;  // "data" sorts before "data.gz".
    expected.insert(expected.end(), gz.begin(), gz.end());
    EXPECT_EQ(read, expected);
  }
  {
    absl::StatusOr<Params> params = Make(Files({dir_.Join("zipped")}).WithCompression("GZIP"));
    ASSERT_TRUE(params.ok()) << params.status();
    absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
    ASSERT_TRUE(splits.ok()) << splits.status();
    const SplitContents c = ReadSplit(info(), *params, (*splits)[0]);
    ASSERT_TRUE(c.status.ok()) << c.status;
    EXPECT_EQ(c.records, unnamed);
  }
}

// A GZIP file read uncompressed says what to do rather than yielding garbage or a CRC mismatch,
// when reading and when scanning for splits (issue 13, defect 13).
TEST_P(FileSourceTest, GzipFileReadUncompressedSaysToSetCompression) {
  WriteFile("zipped", 3, /*gzip=*/true);
  const std::string path = dir_.Join("zipped");
  const std::string want =
      absl::StrCat(path, ": not a ", GetParam().type == "tfrecord" ? "TFRecord" : "text",
                   " file: it starts with the gzip magic 1F 8B: set compression to GZIP");
  for (const std::optional<int64_t> per_split :
       {std::optional<int64_t>(), std::optional<int64_t>(2)}) {
    absl::StatusOr<Params> params = Make(Files({path}).WithCompression("").WithPerSplit(per_split));
    ASSERT_TRUE(params.ok()) << params.status();
    absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
    absl::Status status = splits.status();
    if (splits.ok()) {
      ASSERT_EQ(splits->size(), 1u);
      status = ReadSplit(info(), *params, (*splits)[0]).status;
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(want));
  }
}

TEST_P(FileSourceTest, FileShorterThanItsSplitIsDataLossNamingIt) {
  WriteFile("shrinks", 10);
  absl::StatusOr<Params> params = Make(Files({dir_.Join("shrinks")}).WithPerSplit(4));
  ASSERT_TRUE(params.ok()) << params.status();
  absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->size(), 3u);
  WriteFile("shrinks", 6);  // Now split 1 (records 4..7) runs past the end.
  const SplitContents c = ReadSplit(info(), *params, (*splits)[1]);
  EXPECT_TRUE(absl::IsDataLoss(c.status)) << c.status;
  EXPECT_THAT(std::string(c.status.message()), HasSubstr(dir_.Join("shrinks")));
}

TEST_P(FileSourceTest, OpenRejectsImpossiblePositions) {
  WriteFile("a", 5);
  absl::StatusOr<Params> params = Make(Files({dir_.Join("a")}).WithPerSplit(2));
  ASSERT_TRUE(params.ok()) << params.status();
  absl::StatusOr<std::vector<Split>> splits = info().enumerate(*params, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  const Split& s = (*splits)[0];
  for (auto [offset, done] : {std::pair<int64_t, int64_t>{-1, 0}, {0, -1}, {0, 3}}) {
    const absl::Status status = info().open(*params, SplitOpenContext{}, s, offset, done).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << offset << "," << done << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(dir_.Join("a")));
  }
}

// A record (a TFRecord's data, a line) of max_record_bytes reads; one byte more fails its split
// with DataLoss naming the file, the record's offset and the limit — when reading and when
// scanning for splits, plain and GZIP.
TEST_P(FileSourceTest, ARecordOfMaxRecordBytesReadsAndOneByteMoreIsDataLoss) {
  const std::vector<std::string> records = {"short", std::string(1000, 'L'), "after"};
  const int64_t long_offset = GetParam().type == "tfrecord" ? kTfRecordFramingBytes + 5 : 6;
  for (const bool gzip : {false, true}) {
    const std::string path = dir_.Join(gzip ? "long.gz" : "long");
    GetParam().write(path, records, gzip);
    for (const std::optional<int64_t> per_split :
         {std::optional<int64_t>(), std::optional<int64_t>(1)}) {
      SCOPED_TRACE(absl::StrCat(path, " per_split ", per_split.value_or(0)));
      absl::StatusOr<Params> fits =
          Make(Files({path}).WithPerSplit(per_split).WithMaxRecordBytes(1000));
      ASSERT_TRUE(fits.ok()) << fits.status();
      absl::StatusOr<std::vector<Split>> splits = info().enumerate(*fits, Env::Default());
      ASSERT_TRUE(splits.ok()) << splits.status();
      std::vector<std::string> read;
      for (const Split& split : *splits) {
        const SplitContents c = ReadSplit(info(), *fits, split);
        ASSERT_TRUE(c.status.ok()) << c.status;
        read.insert(read.end(), c.records.begin(), c.records.end());
      }
      EXPECT_EQ(read, records);

      absl::StatusOr<Params> tight =
          Make(Files({path}).WithPerSplit(per_split).WithMaxRecordBytes(999));
      ASSERT_TRUE(tight.ok()) << tight.status();
      splits = info().enumerate(*tight, Env::Default());
      absl::Status status = splits.status();
      if (splits.ok()) {  // One whole-file split: reading it fails after the first record.
        ASSERT_EQ(splits->size(), 1u);
        const SplitContents c = ReadSplit(info(), *tight, (*splits)[0]);
        EXPECT_THAT(c.records, ElementsAre("short"));
        status = c.status;
      }
      EXPECT_TRUE(absl::IsDataLoss(status)) << status;
      EXPECT_THAT(std::string(status.message()),
                  AllOf(HasSubstr(absl::StrCat(path, ": ")),
                        HasSubstr(absl::StrCat(" at offset ", long_offset, " ")),
                        HasSubstr("max_record_bytes (999 bytes)")));
    }
  }
}

TEST_P(FileSourceTest, MaxRecordBytesOutsideOneTo2GiBIsInvalidArgument) {
  for (const int64_t bad : {int64_t{0}, int64_t{-5}, kMaxElementBytes + 1}) {
    absl::StatusOr<Params> params = Make(Files({dir_.Join("*")}).WithMaxRecordBytes(bad));
    ASSERT_TRUE(params.ok()) << params.status();
    const absl::Status status = info().validate(*params, nullptr);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("max_record_bytes")) << bad;
  }
  absl::StatusOr<Params> largest =
      Make(Files({dir_.Join("*")}).WithMaxRecordBytes(kMaxElementBytes));
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_TRUE(info().validate(*largest, nullptr).ok());
}

INSTANTIATE_TEST_SUITE_P(BothSources, FileSourceTest,
                         ::testing::Values(Format{"tfrecord", "records_per_split", WriteTfRecords},
                                           Format{"text_lines", "lines_per_split", WriteLines}),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return info.param.type;
                         });

// A source of unbounded records (as cache_read's): no "max_record_bytes", and its reader gets
// kUnlimitedRecordBytes.
TEST(FileSourceInfoTest, UnboundedRecordsTakeNoLimitParamAndReadWithoutLimit) {
  testing::ScopedTempDir dir;
  WriteTfRecords(dir.Join("a"), {"x", "yy"}, /*gzip=*/false);
  int64_t reader_limit = 0;
  const SourceInfo info = FileSourceInfo(
      {.type = "unbounded",
       .per_split_param = "records_per_split",
       .bounded_records = false,
       .scan = ScanTfRecords,
       .make_reader = [&reader_limit](const SplitOpenContext&, const Split&,
                                      OpenedFileSplit opened, int64_t,
                                      int64_t max_record_bytes)
           -> absl::StatusOr<std::unique_ptr<SplitReader>> {
         EXPECT_NE(opened.file, nullptr);
         reader_limit = max_record_bytes;
         return absl::UnimplementedError("no reader");
       }});
  std::vector<std::string> names;
  for (const ParamSpec& spec : info.params) names.push_back(spec.name);
  EXPECT_THAT(names, ElementsAre("files", "compression", "records_per_split"));

  absl::StatusOr<Params> params =
      MakeParams(info, "records_per_split", SourceParams{.files = {dir.Join("a")}});
  ASSERT_TRUE(params.ok()) << params.status();
  ASSERT_TRUE(info.validate(*params, Env::Default()).ok());
  absl::StatusOr<std::vector<Split>> splits = info.enumerate(*params, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->size(), 1u);
  EXPECT_EQ((*splits)[0].file(), dir.Join("a"));
  EXPECT_EQ(ReadSplit(info, *params, (*splits)[0]).status, absl::UnimplementedError("no reader"));
  EXPECT_EQ(reader_limit, kUnlimitedRecordBytes);
}

TEST(TfRecordSourceTest, ReadsTensorFlowsGzipFileInSplits) {
  const SourceInfo info = TfRecordSource();
  const std::string penguin = testing::TfRecordTestDataDir() + "/penguin_eval_gzip.tfrecord.gz";
  absl::StatusOr<Params> params =
      MakeParams(info, "records_per_split", Files({penguin}).WithPerSplit(30));
  ASSERT_TRUE(params.ok()) << params.status();
  absl::StatusOr<std::vector<Split>> splits = info.enumerate(*params, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const Split& s : *splits) {
    sizes.push_back(s.num_records());
    const SplitContents c = ReadSplit(info, *params, s);
    ASSERT_TRUE(c.status.ok()) << c.status;
    EXPECT_EQ(static_cast<int64_t>(c.records.size()), s.num_records());
    total += c.records.size();
  }
  EXPECT_THAT(sizes, ElementsAre(30, 30, 30, 10));
  EXPECT_EQ(total, 100);
}

TEST(TfRecordSourceTest, CorruptRecordErrorNamesFileAndOffset) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("bad.tfrecord");
  WriteTfRecords(path, {"good", "bad!"}, /*gzip=*/false);
  std::string data = *ReadFileToString(Env::Default(), path);
  data[16 + 4 + 12] ^= 1;  // The second record's first data byte.
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, data, false).ok());
  const SourceInfo info = TfRecordSource();
  absl::StatusOr<Params> params = MakeParams(info, "records_per_split", Files({path}));
  ASSERT_TRUE(params.ok()) << params.status();
  absl::StatusOr<std::vector<Split>> splits = info.enumerate(*params, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  const SplitContents c = ReadSplit(info, *params, (*splits)[0]);
  EXPECT_THAT(c.records, ElementsAre("good"));
  EXPECT_TRUE(absl::IsDataLoss(c.status)) << c.status;
  EXPECT_THAT(std::string(c.status.message()),
              HasSubstr(absl::StrCat(path, ": corrupt record data (CRC mismatch) at offset 20")));
}

TEST(TfRecordSourceTest, EnumeratingACorruptFileIsDataLossNamingIt) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("bad_length.tfrecord");
  WriteTfRecords(path, {"one", "two"}, /*gzip=*/false);
  std::string data = *ReadFileToString(Env::Default(), path);
  data[19] ^= 1;  // The second record's length.
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, data, false).ok());
  const SourceInfo info = TfRecordSource();
  absl::StatusOr<Params> params =
      MakeParams(info, "records_per_split", Files({path}).WithPerSplit(1));
  ASSERT_TRUE(params.ok()) << params.status();
  const absl::Status status = info.enumerate(*params, Env::Default()).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat(path, ": corrupt record length (CRC mismatch) at offset 19")));
}

// A GZIP TFRecord file of a few KiB whose second record declares 3 GiB of data (zeros compress
// a thousandfold): refused by the declared length, before any of it is read or allocated.
TEST(TfRecordSourceTest, AGzipRecordDeclaringGigabytesIsDataLossBeforeItIsRead) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("huge.tfrecord.gz");
  WriteTfRecords(dir.Join("ok.tfrecord"), {"ok"}, /*gzip=*/false);
  const std::string ok_record = *ReadFileToString(Env::Default(), dir.Join("ok.tfrecord"));
  const uint64_t length = uint64_t{3} << 30;
  std::string header(8, '\0');
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>(length >> (8 * i));
  const uint32_t length_crc = crc32c::Mask(crc32c::Value(header));
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>(length_crc >> (8 * i)));
  WriteText(path, absl::StrCat(ok_record, header, std::string(1 << 20, '\0')), /*gzip=*/true);
  ASSERT_LT(*Env::Default()->GetFileSize(path), 64 << 10);

  const SourceInfo info = TfRecordSource();
  for (const std::optional<int64_t> per_split :
       {std::optional<int64_t>(), std::optional<int64_t>(1)}) {
    absl::StatusOr<Params> params =
        MakeParams(info, "records_per_split", Files({path}).WithPerSplit(per_split));
    ASSERT_TRUE(params.ok()) << params.status();
    absl::StatusOr<std::vector<Split>> splits = info.enumerate(*params, Env::Default());
    absl::Status status = splits.status();
    if (splits.ok()) {
      ASSERT_EQ(splits->size(), 1u);
      const SplitContents c = ReadSplit(info, *params, (*splits)[0]);
      EXPECT_THAT(c.records, ElementsAre("ok"));
      status = c.status;
    }
    EXPECT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat(path,
                                       ": record at offset 18 declares 3221225472 bytes (3 GiB), "
                                       "above max_record_bytes (256 MiB)")));
  }
}

class TextLinesSourceTest : public ::testing::Test {
 protected:
  // Writes `text` to a file and reads it as one whole-file split and as splits of one line.
  std::vector<std::string> Lines(const std::string& text) {
    const std::string path = dir_.Join("lines.txt");
    WriteText(path, text, /*gzip=*/false);
    absl::StatusOr<Params> whole = MakeParams(info_, "lines_per_split", Files({path}));
    EXPECT_TRUE(whole.ok()) << whole.status();
    if (!whole.ok()) return {};
    absl::StatusOr<std::vector<Split>> splits = info_.enumerate(*whole, Env::Default());
    EXPECT_TRUE(splits.ok()) << splits.status();
    if (!splits.ok()) return {};
    const SplitContents c = ReadSplit(info_, *whole, (*splits)[0]);
    EXPECT_TRUE(c.status.ok()) << c.status;

    absl::StatusOr<Params> single =
        MakeParams(info_, "lines_per_split", Files({path}).WithPerSplit(1));
    EXPECT_TRUE(single.ok()) << single.status();
    if (!single.ok()) return {};
    splits = info_.enumerate(*single, Env::Default());
    EXPECT_TRUE(splits.ok()) << splits.status();
    std::vector<std::string> one_by_one;
    for (const Split& s : *splits) {
      const SplitContents line = ReadSplit(info_, *single, s);
      EXPECT_TRUE(line.status.ok()) << line.status;
      one_by_one.insert(one_by_one.end(), line.records.begin(), line.records.end());
    }
    EXPECT_EQ(one_by_one, c.records) << "line splits disagree with the whole file";
    return c.records;
  }

  const SourceInfo info_ = TextLinesSource();
  testing::ScopedTempDir dir_;
};

TEST_F(TextLinesSourceTest, LinesLoseTheirNewline) {
  EXPECT_THAT(Lines("a\nbb\nccc\n"), ElementsAre("a", "bb", "ccc"));
}

TEST_F(TextLinesSourceTest, ALastLineWithoutNewlineCounts) {
  EXPECT_THAT(Lines("a\nlast"), ElementsAre("a", "last"));
}

TEST_F(TextLinesSourceTest, CarriageReturnBeforeNewlineIsStripped) {
  EXPECT_THAT(Lines("dos\r\nunix\n\r\nmid\rline\n"), ElementsAre("dos", "unix", "", "mid\rline"));
}

TEST_F(TextLinesSourceTest, EmptyLinesAreElements) {
  EXPECT_THAT(Lines("\n\nx\n\n"), ElementsAre("", "", "x", ""));
  EXPECT_THAT(Lines("\n"), ElementsAre(""));
  EXPECT_THAT(Lines(""), IsEmpty());
}

TEST_F(TextLinesSourceTest, LinesLongerThanTheReadBuffer) {
  const std::string long_line(200000, 'L');
  EXPECT_THAT(Lines("short\n" + long_line + "\n" + long_line),
              ElementsAre("short", long_line, long_line));
}

// A file of 8 GiB without a newline (sparse: it costs no disk), like /dev/zero in a data root,
// fails with DataLoss after the default 256 MiB of the line, quickly and without holding the
// file in memory — when reading and when scanning for splits.
TEST_F(TextLinesSourceTest, AnEndlessLineIsDataLossAtTheDefaultLimitWithBoundedMemory) {
  const std::string path = dir_.Join("endless.txt");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{8} << 30), 0);
  ::close(fd);
  for (const std::optional<int64_t> per_split :
       {std::optional<int64_t>(), std::optional<int64_t>(1)}) {
    absl::StatusOr<Params> params =
        MakeParams(info_, "lines_per_split", Files({path}).WithPerSplit(per_split));
    ASSERT_TRUE(params.ok()) << params.status();
    const absl::Time start = absl::Now();
    absl::StatusOr<std::vector<Split>> splits = info_.enumerate(*params, Env::Default());
    absl::Status status = splits.status();
    if (splits.ok()) {
      ASSERT_EQ(splits->size(), 1u);
      const SplitContents c = ReadSplit(info_, *params, (*splits)[0]);
      EXPECT_THAT(c.records, IsEmpty());
      status = c.status;
    }
    EXPECT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(absl::StrCat(path,
                                       ": the line at offset 0 has no \"\\n\" within "
                                       "max_record_bytes (256 MiB)")));
    EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  }
  struct rusage usage;
  ASSERT_EQ(::getrusage(RUSAGE_SELF, &usage), 0);
  EXPECT_LT(usage.ru_maxrss, 1 << 20) << "peak resident KiB, for a file of 8 GiB";
}

TEST_F(TextLinesSourceTest, OffsetsAreLineStarts) {
  const std::string path = dir_.Join("offsets.txt");
  WriteText(path, "ab\r\n\ncdef\ng", /*gzip=*/false);
  absl::StatusOr<Params> params =
      MakeParams(info_, "lines_per_split", Files({path}).WithPerSplit(1));
  ASSERT_TRUE(params.ok()) << params.status();
  absl::StatusOr<std::vector<Split>> splits = info_.enumerate(*params, Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  std::vector<int64_t> offsets;
  for (const Split& s : *splits) offsets.push_back(s.begin_offset());
  EXPECT_THAT(offsets, ElementsAre(0, 4, 5, 10));
}

}  // namespace
}  // namespace granary
