#include "pipeline/sources/tfrecord_writer.h"

#include <utility>

#include "common/crc32c.h"
#include "common/status_macros.h"
#include "pipeline/sources/tfrecord_reader.h"

namespace granary {
namespace {

void EncodeFixed64(uint64_t v, char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

void EncodeFixed32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

TfRecordWriter::TfRecordWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}

absl::Status TfRecordWriter::Write(absl::string_view record) {
  char header[12];
  EncodeFixed64(record.size(), header);
  EncodeFixed32(crc32c::Mask(crc32c::Value({header, 8})), header + 8);
  char footer[4];
  EncodeFixed32(crc32c::Mask(crc32c::Value(record)), footer);
  RETURN_IF_ERROR(file_->Append({header, sizeof(header)}));
  RETURN_IF_ERROR(file_->Append(record));
  RETURN_IF_ERROR(file_->Append({footer, sizeof(footer)}));
  offset_ += kTfRecordFramingBytes + static_cast<int64_t>(record.size());
  return absl::OkStatus();
}

absl::Status TfRecordWriter::Flush() { return file_->Flush(); }

absl::Status TfRecordWriter::Sync() { return file_->Sync(); }

absl::Status TfRecordWriter::Close() { return file_->Close(); }

}  // namespace granary
