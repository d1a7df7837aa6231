// What the file-reading sources (tfrecord, text_lines) share: their "files" and "compression"
// parameters, glob expansion, splitting files into runs of records, and opening a split.
//
//   "files"        string list, required: shell glob patterns. Each must match at least one
//                  file; the matches are concatenated in pattern order, each pattern's matches
//                  sorted, and a file matched again by a later pattern is dropped.
//   "compression"  "" (none), "GZIP", or "auto" (the default): GZIP when the path ends in ".gz".
//   "records_per_split" (tfrecord) / "lines_per_split" (text_lines)  int, default 0: 0 makes
//                  one split per file; n > 0 scans each file and makes a split of every n
//                  records (the last split of a file may be shorter; an empty file has none).
//   "max_record_bytes" (tfrecord, text_lines)  int, default kDefaultMaxRecordBytes (256 MiB),
//                  at most kMaxElementBytes (2 GiB; pipeline/core/limits.h): the longest record (a
//                  TFRecord's data, a line without its "\n") read. A longer one fails the
//                  split with DataLoss naming the file, the record's offset and the limit, after
//                  at most this many bytes of it are read (a TFRecord's declared length is
//                  refused before any of its data is read).
//
// Offsets are byte offsets in a file's decompressed bytes. Opening a split of a GZIP file at a
// non-zero offset decompresses and discards the bytes before it.
#ifndef GRANARY_PIPELINE_SOURCES_SOURCE_FILES_H_
#define GRANARY_PIPELINE_SOURCES_SOURCE_FILES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compressed_file.h"
#include "common/env.h"
#include "pipeline/core/params.h"
#include "pipeline/core/source.h"
#include "proto/pipeline.pb.h"

namespace granary {

// The specs of "files", "compression" and the int parameter `per_split_param`.
std::vector<ParamSpec> FileSourceParams(absl::string_view per_split_param);
// FileSourceParams and "max_record_bytes": the params of a source reading records of
// unbounded length (tfrecord, text_lines).
std::vector<ParamSpec> RecordSourceParams(absl::string_view per_split_param);

// The "max_record_bytes" param, kDefaultMaxRecordBytes when absent. InvalidArgument
// (params.Invalid) below 1 or above kMaxElementBytes.
absl::StatusOr<int64_t> MaxRecordBytes(const Params& params);

// The files named by the "files" patterns, in the order described above. NotFound
// "source <source_type>: pattern '<p>' matches no file" for a pattern matching nothing;
// InvalidArgument (params.Invalid) for an empty list; Env::Glob's errors.
absl::StatusOr<std::vector<std::string>> ExpandFilePatterns(const Params& params, Env* env,
                                                            absl::string_view source_type);

// A file source's `validate` (source.h): a non-empty "files", a known "compression", a
// non-negative `per_split_param`; with an `env` (not null) also ExpandFilePatterns, so a pattern
// matching nothing is the same NotFound as from enumeration.
absl::Status ValidateFileSource(const Params& params, Env* env, absl::string_view source_type,
                                absl::string_view per_split_param);

// How `path` is compressed according to the "compression" parameter. InvalidArgument
// (params.Invalid) for a value other than "", "GZIP" and "auto".
absl::StatusOr<Compression> FileCompression(const Params& params, const std::string& path);

// Reads the whole of `file` (the decompressed bytes of `path`, from offset 0) and calls
// `visit(offset)` with the byte offset at which each of its records starts, in order; a record
// longer than `max_record_bytes` is an error. Errors name the path and offset at fault.
using RecordScanner = std::function<absl::Status(std::unique_ptr<SequentialFile> file,
                                                 const std::string& path, int64_t max_record_bytes,
                                                 const std::function<void(int64_t)>& visit)>;

// A file source's `enumerate`: the files of ExpandFilePatterns, each one split
// {id, file, begin_offset 0, begin_record 0, num_records -1} when the int parameter
// `per_split_param` is 0 (or absent), else scanned with `scan` (given `max_record_bytes`) and cut
// into splits of that many records (a file without records has no split). Ids count 0, 1, 2, ...
// across all files.
// InvalidArgument for a negative `per_split_param`; the errors of the functions above and of
// `scan`.
absl::StatusOr<std::vector<Split>> EnumerateFileSplits(const Params& params, Env* env,
                                                       absl::string_view source_type,
                                                       absl::string_view per_split_param,
                                                       int64_t max_record_bytes,
                                                       const RecordScanner& scan);

// A file split opened for reading at `offset`, with `records_done` of its records read.
struct OpenedFileSplit {
  // The decompressed bytes of split.file, positioned at `offset`.
  std::unique_ptr<SequentialFile> file;
  // How many records are left to read: split.num_records - records_done, or -1 for "to the end
  // of the file".
  int64_t records_left = -1;
};

// The common part of a file source's `open`. InvalidArgument for a negative offset or
// records_done, or records_done beyond split.num_records; errors of opening and skipping.
absl::StatusOr<OpenedFileSplit> OpenFileSplit(const Params& params, Env* env, const Split& split,
                                              int64_t offset, int64_t records_done);

// The SplitReader of a file source: yields each record that ReadRecord produces as an element
// of one DT_STRING scalar tensor, and ends after `records_left` records (-1: at the end of the
// file). A file that ends before the split's records do is DataLoss naming the path and
// offset (the file changed since its splits were enumerated). Thread-compatible.
class FileSplitReader : public SplitReader {
 public:
  FileSplitReader(const Split& split, int64_t records_left);

  absl::Status Next(Element* out, bool* end) final;

 protected:
  // Reads the next record into `*record` and sets *end = false, or sets *end = true at the end
  // of the file.
  virtual absl::Status ReadRecord(std::string* record, bool* end) = 0;

 private:
  const Split split_;
  int64_t records_left_;
};

// Makes the SplitReader of `split`, whose decompressed file OpenFileSplit opened at `offset`.
// `max_record_bytes` is the source's record limit (FileSourceSpec.bounded_records).
using FileSplitReaderFactory = std::function<absl::StatusOr<std::unique_ptr<SplitReader>>(
    const SplitOpenContext& context, const Split& split, OpenedFileSplit opened, int64_t offset,
    int64_t max_record_bytes)>;

// A FileSplitReaderFactory for a reader constructed as Reader(split, opened, offset,
// max_record_bytes).
template <typename Reader>
absl::StatusOr<std::unique_ptr<SplitReader>> MakeFileSplitReader(const SplitOpenContext&,
                                                                 const Split& split,
                                                                 OpenedFileSplit opened,
                                                                 int64_t offset,
                                                                 int64_t max_record_bytes) {
  return std::make_unique<Reader>(split, std::move(opened), offset, max_record_bytes);
}

// What makes a file source one: the rest of its SourceInfo follows (FileSourceInfo).
struct FileSourceSpec {
  std::string type;             // "tfrecord", "text_lines"
  std::string per_split_param;  // "records_per_split", "lines_per_split"
  // Whether the source takes "max_record_bytes" (RecordSourceParams) and bounds its records by
  // it; otherwise its params are FileSourceParams and its records are unbounded
  // (kUnlimitedRecordBytes: files Granary wrote itself, whose lengths are checked against the
  // file before anything is allocated).
  bool bounded_records = true;
  // Finds the records of a file, for splits of `per_split_param` records.
  RecordScanner scan;
  FileSplitReaderFactory make_reader;
};

// The SourceInfo of a file source: its params as above; `validate` is ValidateFileSource plus
// MaxRecordBytes; `enumerate` is EnumerateFileSplits with `scan`; `open` is OpenFileSplit then
// `make_reader`. A source that differs in more (cache_read: its provenance, its manifest
// chunks) sets those fields of the result, wrapping `open` where it needs to.
SourceInfo FileSourceInfo(FileSourceSpec spec);

}  // namespace granary

#endif  // GRANARY_PIPELINE_SOURCES_SOURCE_FILES_H_
