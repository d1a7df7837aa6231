// TfRecordReader: reads TensorFlow's TFRecord framing, so files written by TensorFlow read
// unchanged (DESIGN.md §2).
//
// A TFRecord file is a sequence of records, each framed as
//
//   uint64 length         little-endian
//   uint32 length_crc     masked CRC-32C of the 8 length bytes
//   byte   data[length]
//   uint32 data_crc       masked CRC-32C of data
//
// (crc32c::Mask in common/crc32c.h). A GZIP-compressed TFRecord file is this byte sequence
// compressed as one gzip stream; open it with OpenMaybeCompressed (common/compressed_file.h) and
// all offsets here are offsets in the decompressed bytes.
#ifndef GRANARY_PIPELINE_SOURCES_TFRECORD_READER_H_
#define GRANARY_PIPELINE_SOURCES_TFRECORD_READER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/env.h"

namespace granary {

// Bytes of framing around each record's data: 8 length + 4 length CRC + 4 data CRC.
inline constexpr int64_t kTfRecordFramingBytes = 16;
// A TfRecordReader's max_record_bytes for no limit of its own.
inline constexpr int64_t kUnlimitedRecordBytes = std::numeric_limits<int64_t>::max();

// Reads records one after another. Thread-compatible.
//
// Errors name the file and the byte offset of the record at fault:
//   DataLoss "<path>: truncated record at offset N"      EOF inside a record's framing or data
//   DataLoss "<path>: corrupt record length (CRC mismatch) at offset N"
//   DataLoss "<path>: corrupt record data (CRC mismatch) at offset N"
//   DataLoss "<path>: record at offset N declares L bytes (3 GiB), above max_record_bytes
//   (256 MiB) ..."  a length beyond the reader's limit, refused before anything is allocated
//   or read (so also inside a gzip stream, where a small file can declare gigabytes of zeros)
// and errors of the file itself (I/O, corrupt gzip) are passed on with the same
// "<path>: record at offset N: " prefix. When the first record's header (offset 0) is bad and
// the file looks like another format, the error says so instead:
//   InvalidArgument "<path>: not a TFRecord file: it starts with the gzip magic 1F 8B: set
//   compression to GZIP ..." (likewise a zlib header, a PNG or JPEG image, text). After an error
//   every later call returns it again.
class TfRecordReader {
 public:
  // Takes ownership of `file`, which is positioned at byte `offset` of the file at `path`, the
  // start of a record (or the end of the file). `path` is used in error messages. A record
  // longer than `max_record_bytes` is an error (above); without a limit, a record is still
  // never allocated more than 16 MiB beyond the bytes actually read, which bounds memory by the
  // file's size for an uncompressed file only.
  TfRecordReader(std::unique_ptr<SequentialFile> file, std::string path, int64_t offset,
                 int64_t max_record_bytes = kUnlimitedRecordBytes);

  // Reads the next record into `*record`, checking both CRCs, and sets *end = false; or sets
  // *end = true when the file ends exactly at a record boundary (and keeps doing so).
  absl::Status ReadRecord(std::string* record, bool* end);

  // Like ReadRecord but skips the record's data without reading it into memory or checking its
  // CRC (the length CRC is checked, and a record cut short by the end of the file is still
  // reported as truncated). For enumerating record offsets quickly.
  absl::Status SkipRecord(bool* end);

  // The byte offset of the next record.
  int64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  // Reads and checks the next record's header; *end at a clean end of file.
  absl::Status ReadHeader(uint64_t* length, bool* end);
  // Reads up to `n` bytes, fewer only at end of file.
  absl::StatusOr<size_t> ReadFully(size_t n, char* dst);
  absl::Status Truncated() const;
  // Prefixes an error of the underlying file with the path and the record's offset.
  absl::Status FileError(const absl::Status& status) const;
  absl::Status Fail(absl::Status status);

  const std::unique_ptr<SequentialFile> file_;
  const std::string path_;
  const int64_t max_record_bytes_;
  int64_t offset_;
  absl::Status status_;
};

// Reads `file` (the file at `path`, from offset 0) to its end and calls `visit(offset)` with
// the byte offset of each record, checking framing, length CRCs and `max_record_bytes` but not
// reading the data: the RecordScanner of the TFRecord-framed sources (pipeline/sources/source_files.h).
absl::Status ScanTfRecords(std::unique_ptr<SequentialFile> file, const std::string& path,
                           int64_t max_record_bytes, const std::function<void(int64_t)>& visit);

}  // namespace granary

#endif  // GRANARY_PIPELINE_SOURCES_TFRECORD_READER_H_
