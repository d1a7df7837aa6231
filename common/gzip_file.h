// GZIP (RFC 1952) streams over SequentialFile / WritableFile, by zlib.
//
// This is the compression TensorFlow's TFRecordOptions calls "GZIP": a TFRecord file whose bytes
// are one gzip stream. Offsets seen through these wrappers are offsets in the decompressed bytes.
#ifndef GRANARY_COMMON_GZIP_FILE_H_
#define GRANARY_COMMON_GZIP_FILE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace granary {

// Returns a SequentialFile yielding the decompressed bytes of the gzip data in `compressed`,
// which it takes ownership of (read from its current position on). path() is the inner file's.
//
// Several gzip members back to back (as `cat a.gz b.gz` makes) read as the concatenation of
// their contents. A file holding no bytes at all reads as empty (as TensorFlow reads it).
// Skip(n) decompresses and discards n bytes (gzip cannot seek); past the end it stops at the end.
//
// Errors: data that is not gzip, fails its CRC-32 or length check, or ends inside a member is
// DataLoss "<path>: ... at compressed offset N"; errors of the inner file are passed on. After an
// error every later call returns the same error. Thread-compatible.
absl::StatusOr<std::unique_ptr<SequentialFile>> NewGzipInputFile(
    std::unique_ptr<SequentialFile> compressed);

// Returns a WritableFile that gzip-compresses everything appended to it into `inner`, which it
// takes ownership of. path() is the inner file's.
//
// Flush() and Sync() first flush the deflate stream (Z_SYNC_FLUSH), so that everything appended
// so far can be decompressed from the inner file's bytes; Sync() then syncs the inner file.
// Frequent flushes cost compression ratio. Close() finishes the gzip stream (trailer with CRC-32
// and length) and closes the inner file; the destructor closes the file if Close() was not
// called, ignoring errors. After Close() or any error, later calls return FailedPrecondition or
// that error. Thread-compatible.
std::unique_ptr<WritableFile> NewGzipOutputFile(std::unique_ptr<WritableFile> inner);

}  // namespace granary

#endif  // GRANARY_COMMON_GZIP_FILE_H_
