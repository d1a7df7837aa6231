// The "text_lines" source: text files (plain or GZIP), one element per line holding the line
// without its "\n" (or "\r\n") as a DT_STRING scalar; a last line without "\n" counts too.
// Parameters: see pipeline/sources/source_files.h, with "lines_per_split" as the split size, and
// "max_record_bytes" bounding a line. A file read uncompressed that starts with the gzip magic is
// InvalidArgument saying to set compression.
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"
#include "pipeline/sources/builtin_sources.h"
#include "pipeline/core/source.h"
#include "pipeline/sources/source_files.h"

namespace granary {
namespace {

// Reads lines of at most `max_line_bytes` (without "\n") from a file positioned at byte
// `offset`, the start of a line. Thread-compatible.
class LineReader {
 public:
  LineReader(std::unique_ptr<SequentialFile> file, std::string path, int64_t offset,
             int64_t max_line_bytes)
      : file_(std::move(file)),
        path_(std::move(path)),
        max_line_bytes_(static_cast<size_t>(max_line_bytes)),
        buffer_(new char[kBufferSize]),
        offset_(offset) {}

  // Reads the next line into `*line` and sets *end = false, or sets *end = true at the end of
  // the file. Errors of the file are prefixed with the path and the line's offset. A line longer
  // than max_line_bytes is DataLoss naming both, found before more than that is read into *line.
  absl::Status ReadLine(std::string* line, bool* end) {
    line->clear();
    const int64_t line_offset = offset_;
    bool started = false;  // The line has at least one byte (maybe just its "\n").
    while (true) {
      if (pos_ == size_) {
        if (at_eof_) break;
        absl::StatusOr<size_t> got = file_->Read(kBufferSize, buffer_.get());
        if (!got.ok()) {
          return Annotate(got.status(), absl::StrCat(path_, ": line at offset ", line_offset));
        }
        pos_ = 0;
        size_ = *got;
        if (size_ == 0) {
          at_eof_ = true;
          break;
        }
        if (offset_ == 0 && size_ >= 2 && static_cast<uint8_t>(buffer_[0]) == 0x1F &&
            static_cast<uint8_t>(buffer_[1]) == 0x8B) {
          return absl::InvalidArgumentError(absl::StrCat(
              path_,
              ": not a text file: it starts with the gzip magic 1F 8B: set compression "
              "to GZIP (or name the file *.gz with compression auto)"));
        }
      }
      started = true;
      const char* begin = buffer_.get() + pos_;
      const size_t available = size_ - pos_;
      const char* newline = static_cast<const char*>(std::memchr(begin, '\n', available));
      const size_t length = newline != nullptr ? newline - begin : available;
      if (line->size() + length > max_line_bytes_) return TooLong(line_offset);
      if (newline != nullptr) {
        line->append(begin, length);
        pos_ += length + 1;
        offset_ += length + 1;
        if (!line->empty() && line->back() == '\r') line->pop_back();
        *end = false;
        return absl::OkStatus();
      }
      line->append(begin, length);
      pos_ = size_;
      offset_ += length;
    }
    *end = !started;
    return absl::OkStatus();
  }

  int64_t offset() const { return offset_; }

 private:
  static constexpr size_t kBufferSize = 1 << 16;

  absl::Status TooLong(int64_t line_offset) const {
    return absl::DataLossError(absl::StrCat(
        path_, ": the line at offset ", line_offset, " has no \"\\n\" within max_record_bytes (",
        HumanBytes(static_cast<double>(max_line_bytes_)),
        "): not a text file, or raise the source's \"max_record_bytes\" (at most ",
        HumanBytes(kMaxElementBytes), ") if lines this long are real"));
  }

  const std::unique_ptr<SequentialFile> file_;
  const std::string path_;
  const size_t max_line_bytes_;
  const std::unique_ptr<char[]> buffer_;
  size_t pos_ = 0;   // Next unread byte in buffer_.
  size_t size_ = 0;  // Bytes held in buffer_.
  bool at_eof_ = false;
  int64_t offset_;  // File offset of buffer_[pos_].
};

class TextLinesSplitReader : public FileSplitReader {
 public:
  TextLinesSplitReader(const Split& split, OpenedFileSplit opened, int64_t offset,
                       int64_t max_line_bytes)
      : FileSplitReader(split, opened.records_left),
        reader_(std::move(opened.file), split.file(), offset, max_line_bytes) {}

  int64_t offset() const override { return reader_.offset(); }

 protected:
  absl::Status ReadRecord(std::string* record, bool* end) override {
    return reader_.ReadLine(record, end);
  }

 private:
  LineReader reader_;
};

absl::Status ScanLines(std::unique_ptr<SequentialFile> file, const std::string& path,
                       int64_t max_line_bytes, const std::function<void(int64_t)>& visit) {
  LineReader reader(std::move(file), path, 0, max_line_bytes);
  std::string line;
  while (true) {
    const int64_t offset = reader.offset();
    bool end = false;
    RETURN_IF_ERROR(reader.ReadLine(&line, &end));
    if (end) return absl::OkStatus();
    visit(offset);
  }
}

}  // namespace

SourceInfo TextLinesSource() {
  return FileSourceInfo({.type = "text_lines",
                         .per_split_param = "lines_per_split",
                         .scan = ScanLines,
                         .make_reader = MakeFileSplitReader<TextLinesSplitReader>});
}

}  // namespace granary
