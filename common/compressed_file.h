// Files whose bytes may be compressed, named as TensorFlow's TFRecordOptions names them.
//
// Readers of TFRecord and text files open them through here, so that a compressed file reads
// as its decompressed bytes and every offset is an offset in those bytes.
#ifndef GRANARY_COMMON_COMPRESSED_FILE_H_
#define GRANARY_COMMON_COMPRESSED_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace granary {

enum class Compression { kNone, kGzip };

// "" → kNone, "GZIP" → kGzip (TFRecordOptions' compression_type). InvalidArgument naming
// `name` otherwise ("ZLIB", TensorFlow's other choice, is not supported).
absl::StatusOr<Compression> ParseCompression(absl::string_view name);
// The inverse of ParseCompression.
absl::string_view CompressionName(Compression compression);

// Opens `path` for reading its (decompressed) bytes from the start. Errors as
// Env::NewSequentialFile and NewGzipInputFile.
absl::StatusOr<std::unique_ptr<SequentialFile>> OpenMaybeCompressed(Env* env,
                                                                    const std::string& path,
                                                                    Compression compression);

// Creates or truncates `path` for writing bytes that are compressed as `compression` on disk.
// Errors as Env::NewWritableFile.
absl::StatusOr<std::unique_ptr<WritableFile>> CreateMaybeCompressed(Env* env,
                                                                    const std::string& path,
                                                                    Compression compression);

}  // namespace granary

#endif  // GRANARY_COMMON_COMPRESSED_FILE_H_
