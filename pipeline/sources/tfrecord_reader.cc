#include "pipeline/sources/tfrecord_reader.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"

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

// What the first bytes of a file that is no TFRecord file look like, as the end of the error
// "<path>: not a TFRecord file: <this>"; empty when they look like nothing in particular.
std::string DescribeWrongFormat(absl::string_view head) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(head[i]); };
  if (head.size() >= 2 && byte(0) == 0x1F && byte(1) == 0x8B) {
    return "it starts with the gzip magic 1F 8B: set compression to GZIP (or name the file *.gz "
           "with compression auto)";
  }
  if (head.size() >= 2 && (byte(0) & 0x0F) == 8 && (byte(0) >> 4) <= 7 &&
      (byte(0) * 256 + byte(1)) % 31 == 0) {
    return absl::StrFormat(
        "it starts with a zlib header %02X %02X: a TFRecord file written with compression ZLIB, "
        "which Granary does not read; rewrite it uncompressed or as GZIP",
        byte(0), byte(1));
  }
  if (absl::StartsWith(head, "\x89PNG\r\n\x1a\n")) {
    return "it is a PNG image (signature 89 50 4E 47): list TFRecord files in \"files\", or "
           "write the images into TFRecord files first";
  }
  if (head.size() >= 3 && byte(0) == 0xFF && byte(1) == 0xD8 && byte(2) == 0xFF) {
    return "it is a JPEG image (starts with FF D8 FF): list TFRecord files in \"files\", or "
           "write the images into TFRecord files first";
  }
  const bool text = !head.empty() && std::all_of(head.begin(), head.end(), [](char c) {
    return absl::ascii_isprint(static_cast<unsigned char>(c)) || c == '\n' || c == '\r' ||
           c == '\t';
  });
  if (text) {
    return absl::StrCat("it looks like text (\"", absl::CEscape(head),
                        "\"); the text_lines source reads text");
  }
  return "";
}

}  // namespace

TfRecordReader::TfRecordReader(std::unique_ptr<SequentialFile> file, std::string path,
                               int64_t offset, int64_t max_record_bytes)
    : file_(std::move(file)),
      path_(std::move(path)),
      max_record_bytes_(max_record_bytes),
      offset_(offset) {}

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
  const bool bad_header =
      got < kHeaderBytes || crc32c::Unmask(DecodeFixed32(header + 8)) != crc32c::Value({header, 8});
  if (bad_header && offset_ == 0) {
    // The first header: say so when the file looks like another format.
    const std::string wrong_format = DescribeWrongFormat({header, got});
    if (!wrong_format.empty()) {
      return Fail(
          absl::InvalidArgumentError(absl::StrCat(path_, ": not a TFRecord file: ", wrong_format)));
    }
  }
  if (got < kHeaderBytes) return Fail(Truncated());
  if (crc32c::Unmask(DecodeFixed32(header + 8)) != crc32c::Value({header, 8})) {
    return Fail(absl::DataLossError(
        absl::StrCat(path_, ": corrupt record length (CRC mismatch) at offset ", offset_)));
  }
  *length = DecodeFixed64(header);
  if (*length > static_cast<uint64_t>(max_record_bytes_)) {
    return Fail(absl::DataLossError(
        absl::StrCat(path_, ": record at offset ", offset_, " declares ", *length, " bytes (",
                     HumanBytes(static_cast<double>(*length)), "), above max_record_bytes (",
                     HumanBytes(static_cast<double>(max_record_bytes_)),
                     "): a corrupt length, or raise the source's \"max_record_bytes\" (at most ",
                     HumanBytes(kMaxElementBytes), ") if records this long are real")));
  }
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
                           int64_t max_record_bytes, const std::function<void(int64_t)>& visit) {
  TfRecordReader reader(std::move(file), path, 0, max_record_bytes);
  while (true) {
    const int64_t offset = reader.offset();
    bool end = false;
    RETURN_IF_ERROR(reader.SkipRecord(&end));
    if (end) return absl::OkStatus();
    visit(offset);
  }
}

}  // namespace granary
