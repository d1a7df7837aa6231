// TfRecordWriter: writes TensorFlow's TFRecord framing (the format is described in
// pipeline/sources/tfrecord_reader.h), readable by TfRecordReader and by TensorFlow.
#ifndef GRANARY_PIPELINE_SOURCES_TFRECORD_WRITER_H_
#define GRANARY_PIPELINE_SOURCES_TFRECORD_WRITER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace granary {

// Appends records to a file. Thread-compatible.
//
// To write a GZIP TFRecord file, pass a file from CreateMaybeCompressed(env, path,
// Compression::kGzip) (common/compressed_file.h). Errors are the file's (they name its path).
class TfRecordWriter {
 public:
  // Takes ownership of `file`, written from its current end, which counts as offset 0.
  explicit TfRecordWriter(std::unique_ptr<WritableFile> file);

  // Appends one framed record.
  absl::Status Write(absl::string_view record);
  // Pushes the records written so far to the OS (WritableFile::Flush).
  absl::Status Flush();
  // Makes the records written so far durable (WritableFile::Sync).
  absl::Status Sync();
  // Closes the file. REQUIRES: no call but the destructor follows.
  absl::Status Close();

  // Bytes written so far (uncompressed): the offset the next record will start at.
  int64_t offset() const { return offset_; }

 private:
  const std::unique_ptr<WritableFile> file_;
  int64_t offset_ = 0;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_SOURCES_TFRECORD_WRITER_H_
