// Wire compression of element images for clients on other hosts (issue 14): LZ4 (Debian's
// liblz4, fast, modest ratios) or Zstandard (libzstd, level 1: better ratios, slower). A job's
// trainers ask for it per request (JobSpec.compression); the worker compresses each element it
// sends by bytes, and the client decompresses it straight into the element's buffer. Elements
// sent through shared memory are never compressed (nothing travels). Thread-safe (stateless).
#ifndef GRANARY_TRANSPORT_COMPRESSION_H_
#define GRANARY_TRANSPORT_COMPRESSION_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/worker.pb.h"
#include "transport/buffer_pool.h"

namespace granary {

// The largest image a client decompresses (a corrupt size cannot make it allocate more).
inline constexpr size_t kMaxUncompressedBytes = size_t{4} << 30;

// `in` compressed, in a buffer from `pool`. InvalidArgument for an unknown compression or an
// input the library refuses; ResourceExhausted without memory. REQUIRES: compression != NONE.
absl::StatusOr<BufferRef> Compress(Compression compression, absl::string_view in,
                                   BufferPool* pool);

// Decompresses `in` into exactly `out_size` bytes at `out`. DataLoss naming the compression when
// `in` does not decompress to exactly that many bytes.
absl::Status Decompress(Compression compression, absl::string_view in, char* out,
                        size_t out_size);

// "none", "lz4", "zstd"; and back (InvalidArgument naming the value).
absl::string_view CompressionName(Compression compression);
absl::StatusOr<Compression> CompressionFromName(absl::string_view name);

}  // namespace granary

#endif  // GRANARY_TRANSPORT_COMPRESSION_H_
