#include "pipeline/tfrecord_reader.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr size_t kHeaderBytes = 12;
constexpr size_t kFooterBytes = 4;
// A record's buffer grows at most this far ahead of the data actually read, so that a length
// larger than the file (a truncated file) is reported, not allocated.
constexpr uint64_t kReadChunk = uint64_t{1} << 24;

uint64_t DecodeFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint32_t DecodeFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

TfRecordReader::TfRecordReader(std::unique_ptr<SequentialFile> file, std::string path,
                               int64_t offset)
    : file_(std::move(file)), path_(std::move(path)), offset_(offset) {}

absl::Status TfRecordReader::ReadRecord(std::string* record, bool* end) {
  RETURN_IF_ERROR(status_);
  uint64_t length = 0;
  RETURN_IF_ERROR(ReadHeader(&length, end));
  if (*end) return absl::OkStatus();
  record->clear();
  while (record->size() < length) {
    const size_t old_size = record->size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(length - old_size, kReadChunk));
    record->resize(old_size + want);
    ASSIGN_OR_RETURN(const size_t got, ReadFully(want, record->data() + old_size));
    if (got < want) return Fail(Truncated());
  }
  char footer[kFooterBytes];
  ASSIGN_OR_RETURN(const size_t got, ReadFully(kFooterBytes, footer));
  if (got < kFooterBytes) return Fail(Truncated());
  if (crc32c::Unmask(DecodeFixed32(footer)) != crc32c::Value(*record)) {
    return Fail(absl::DataLossError(
        absl::StrCat(path_, ": corrupt record data (CRC mismatch) at offset ", offset_)));
  }
  offset_ += kTfRecordFramingBytes + static_cast<int64_t>(length);
  return absl::OkStatus();
}

absl::Status TfRecordReader::SkipRecord(bool* end) {
  RETURN_IF_ERROR(status_);
  uint64_t length = 0;
  RETURN_IF_ERROR(ReadHeader(&length, end));
  if (*end) return absl::OkStatus();
  // Skip all but the last byte of data + data CRC, then read that byte: SequentialFile::Skip
  // does not say how far it got, and this tells a complete record from a truncated one.
  const uint64_t rest = length + kFooterBytes;
  absl::Status skipped = file_->Skip(rest - 1);
  if (!skipped.ok()) return Fail(FileError(skipped));
  char last;
  ASSIGN_OR_RETURN(const size_t got, ReadFully(1, &last));
  if (got < 1) return Fail(Truncated());
  offset_ += kTfRecordFramingBytes + static_cast<int64_t>(length);
  return absl::OkStatus();
}

absl::Status TfRecordReader::ReadHeader(uint64_t* length, bool* end) {
  char header[kHeaderBytes];
  ASSIGN_OR_RETURN(const size_t got, ReadFully(kHeaderBytes, header));
  if (got == 0) {
    *end = true;
    return absl::OkStatus();
  }
  if (got < kHeaderBytes) return Fail(Truncated());
  if (crc32c::Unmask(DecodeFixed32(header + 8)) != crc32c::Value({header, 8})) {
    return Fail(absl::DataLossError(
        absl::StrCat(path_, ": corrupt record length (CRC mismatch) at offset ", offset_)));
  }
  *length = DecodeFixed64(header);
  // A record that would end beyond the largest possible offset cannot be complete.
  const uint64_t max_length =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - offset_ - kTfRecordFramingBytes);
  if (*length > max_length) return Fail(Truncated());
  *end = false;
  return absl::OkStatus();
}

absl::StatusOr<size_t> TfRecordReader::ReadFully(size_t n, char* dst) {
  size_t done = 0;
  while (done < n) {
    absl::StatusOr<size_t> got = file_->Read(n - done, dst + done);
    if (!got.ok()) return Fail(FileError(got.status()));
    if (*got == 0) break;
    done += *got;
  }
  return done;
}

absl::Status TfRecordReader::Truncated() const {
  return absl::DataLossError(absl::StrCat(path_, ": truncated record at offset ", offset_));
}

absl::Status TfRecordReader::FileError(const absl::Status& status) const {
  return Annotate(status, absl::StrCat(path_, ": record at offset ", offset_));
}

absl::Status TfRecordReader::Fail(absl::Status status) {
  status_ = status;
  return status;
}

absl::Status ScanTfRecords(std::unique_ptr<SequentialFile> file, const std::string& path,
                           const std::function<void(int64_t)>& visit) {
  TfRecordReader reader(std::move(file), path, 0);
  while (true) {
    const int64_t offset = reader.offset();
    bool end = false;
    RETURN_IF_ERROR(reader.SkipRecord(&end));
    if (end) return absl::OkStatus();
    visit(offset);
  }
}

}  // namespace granary
