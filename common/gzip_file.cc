#include "common/gzip_file.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr size_t kBufferSize = 1 << 16;
// zlib counts in uInt; larger requests are served in pieces of this size.
constexpr size_t kMaxZlibChunk = size_t{1} << 30;

std::string ZlibMessage(const z_stream& stream, int rc) {
  if (stream.msg != nullptr) return stream.msg;
  return absl::StrCat("zlib error ", rc);
}

class GzipInputFile : public SequentialFile {
 public:
  explicit GzipInputFile(std::unique_ptr<SequentialFile> file)
      : file_(std::move(file)), input_(new char[kBufferSize]) {}

  ~GzipInputFile() override {
    if (initialized_) inflateEnd(&stream_);
  }

  absl::Status Init() {
    const int rc = inflateInit2(&stream_, 16 + MAX_WBITS);  // 16: expect a gzip wrapper.
    if (rc != Z_OK) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path(), ": cannot start gzip decompression: ", ZlibMessage(stream_, rc)));
    }
    initialized_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(size_t n, char* scratch) override {
    RETURN_IF_ERROR(status_);
    if (n == 0 || finished_) return 0;
    n = std::min(n, kMaxZlibChunk);
    stream_.next_out = reinterpret_cast<Bytef*>(scratch);
    stream_.avail_out = static_cast<uInt>(n);
    // Loop until at least one byte comes out or the compressed input ends between members.
    while (stream_.avail_out == n) {
      if (stream_.avail_in == 0) {
        RETURN_IF_ERROR(FillInput());
        if (stream_.avail_in == 0) {
          if (in_member_) {
            return Fail(absl::DataLossError(absl::StrCat(
                path(), ": truncated gzip data at compressed offset ", CompressedOffset())));
          }
          finished_ = true;
          break;
        }
      }
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // One member done (its CRC-32 and length verified); another may follow.
        in_member_ = false;
        inflateReset(&stream_);
      } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
        in_member_ = true;
      } else if (rc == Z_MEM_ERROR) {
        return Fail(absl::ResourceExhaustedError(
            absl::StrCat(path(), ": out of memory decompressing gzip data")));
      } else {
        return Fail(absl::DataLossError(
            absl::StrCat(path(), ": corrupt gzip data at compressed offset ", CompressedOffset(),
                         " (", ZlibMessage(stream_, rc), ")")));
      }
    }
    return n - stream_.avail_out;
  }

  absl::Status Skip(uint64_t n) override {
    if (discard_ == nullptr) discard_.reset(new char[kBufferSize]);
    while (n > 0) {
      ASSIGN_OR_RETURN(
          const size_t got,
          Read(static_cast<size_t>(std::min<uint64_t>(n, kBufferSize)), discard_.get()));
      if (got == 0) break;  // At the end: stay there.
      n -= got;
    }
    return absl::OkStatus();
  }

  const std::string& path() const override { return file_->path(); }

 private:
  // Refills the input buffer; leaves avail_in == 0 at the end of the compressed file.
  absl::Status FillInput() {
    absl::StatusOr<size_t> got = file_->Read(kBufferSize, input_.get());
    if (!got.ok()) return Fail(got.status());
    stream_.next_in = reinterpret_cast<Bytef*>(input_.get());
    stream_.avail_in = static_cast<uInt>(*got);
    compressed_read_ += *got;
    return absl::OkStatus();
  }

  uint64_t CompressedOffset() const { return compressed_read_ - stream_.avail_in; }

  absl::Status Fail(absl::Status status) {
    status_ = status;
    return status;
  }

  const std::unique_ptr<SequentialFile> file_;
  const std::unique_ptr<char[]> input_;
  std::unique_ptr<char[]> discard_;
  z_stream stream_{};
  bool initialized_ = false;
  // Inside a gzip member: running out of input now means the file is truncated.
  bool in_member_ = false;
  // The compressed input ended cleanly after a member.
  bool finished_ = false;
  uint64_t compressed_read_ = 0;
  absl::Status status_;
};

class GzipOutputFile : public WritableFile {
 public:
  explicit GzipOutputFile(std::unique_ptr<WritableFile> inner)
      : inner_(std::move(inner)), output_(new char[kBufferSize]) {
    const int rc = deflateInit2(&stream_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS,
                                /*memLevel=*/8, Z_DEFAULT_STRATEGY);
    if (rc == Z_OK) {
      initialized_ = true;
    } else {
      status_ = absl::ResourceExhaustedError(
          absl::StrCat(path(), ": cannot start gzip compression: ", ZlibMessage(stream_, rc)));
    }
  }

  ~GzipOutputFile() override {
    if (!closed_) Close().IgnoreError();
    if (initialized_) deflateEnd(&stream_);
  }

  absl::Status Append(absl::string_view data) override {
    RETURN_IF_ERROR(CheckWritable());
    while (!data.empty()) {
      const size_t chunk = std::min(data.size(), kMaxZlibChunk);
      RETURN_IF_ERROR(Deflate(data.data(), chunk, Z_NO_FLUSH));
      data.remove_prefix(chunk);
      unflushed_ = true;
    }
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    RETURN_IF_ERROR(CheckWritable());
    RETURN_IF_ERROR(SyncFlush());
    return Check(inner_->Flush());
  }

  absl::Status Sync() override {
    RETURN_IF_ERROR(CheckWritable());
    RETURN_IF_ERROR(SyncFlush());
    return Check(inner_->Sync());
  }

  absl::Status Close() override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat(path(), ": already closed"));
    closed_ = true;
    absl::Status status = status_;
    if (status.ok()) status = Deflate(nullptr, 0, Z_FINISH);
    // Close the inner file even after an error so that it is not leaked.
    const absl::Status close_status = inner_->Close();
    if (status.ok()) status = close_status;
    return status;
  }

  const std::string& path() const override { return inner_->path(); }

 private:
  absl::Status CheckWritable() {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat(path(), ": already closed"));
    return status_;
  }

  absl::Status Check(absl::Status status) {
    if (!status.ok() && status_.ok()) status_ = status;
    return status;
  }

  // Ends the current deflate block so that all data appended so far is decodable.
  absl::Status SyncFlush() {
    if (!unflushed_) return absl::OkStatus();
    RETURN_IF_ERROR(Deflate(nullptr, 0, Z_SYNC_FLUSH));
    unflushed_ = false;
    return absl::OkStatus();
  }

  // Feeds data[0, n) to deflate with `flush` and appends all output it produces to the inner
  // file. Returns with all input consumed (and, for Z_FINISH, the stream ended).
  absl::Status Deflate(const char* data, size_t n, int flush) {
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    stream_.avail_in = static_cast<uInt>(n);
    while (true) {
      stream_.next_out = reinterpret_cast<Bytef*>(output_.get());
      stream_.avail_out = static_cast<uInt>(kBufferSize);
      const int rc = deflate(&stream_, flush);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        return Check(absl::InternalError(
            absl::StrCat(path(), ": gzip compression failed: ", ZlibMessage(stream_, rc))));
      }
      const size_t produced = kBufferSize - stream_.avail_out;
      if (produced > 0) RETURN_IF_ERROR(Check(inner_->Append({output_.get(), produced})));
      if (flush == Z_FINISH ? rc == Z_STREAM_END : stream_.avail_out != 0) break;
    }
    return absl::OkStatus();
  }

  const std::unique_ptr<WritableFile> inner_;
  const std::unique_ptr<char[]> output_;
  z_stream stream_{};
  bool initialized_ = false;
  bool closed_ = false;
  // Data was appended since the last Z_SYNC_FLUSH.
  bool unflushed_ = false;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SequentialFile>> NewGzipInputFile(
    std::unique_ptr<SequentialFile> compressed) {
  auto file = std::make_unique<GzipInputFile>(std::move(compressed));
  RETURN_IF_ERROR(file->Init());
  return std::unique_ptr<SequentialFile>(std::move(file));
}

std::unique_ptr<WritableFile> NewGzipOutputFile(std::unique_ptr<WritableFile> inner) {
  return std::make_unique<GzipOutputFile>(std::move(inner));
}

}  // namespace granary
