#include "transport/compression.h"

#include <lz4.h>
#include <zstd.h>

#include "absl/strings/str_cat.h"

namespace granary {

absl::StatusOr<BufferRef> Compress(Compression compression, absl::string_view in,
                                   BufferPool* pool) {
  if (compression == COMPRESSION_LZ4) {
    if (in.size() > static_cast<size_t>(LZ4_MAX_INPUT_SIZE)) {
      return absl::InvalidArgumentError(
          absl::StrCat("lz4 compresses at most ", LZ4_MAX_INPUT_SIZE, " bytes, not ", in.size()));
    }
    const int bound = LZ4_compressBound(static_cast<int>(in.size()));
    absl::StatusOr<BufferRef> out = pool->Allocate(static_cast<size_t>(bound));
    if (!out.ok()) return out.status();
    const int n = LZ4_compress_default(in.data(), (*out)->data(), static_cast<int>(in.size()),
                                       bound);
    if (n <= 0) return absl::InvalidArgumentError("lz4 refused to compress an element");
    (*out)->Truncate(static_cast<size_t>(n));
    return out;
  }
  if (compression == COMPRESSION_ZSTD) {
    const size_t bound = ZSTD_compressBound(in.size());
    absl::StatusOr<BufferRef> out = pool->Allocate(bound);
    if (!out.ok()) return out.status();
    const size_t n = ZSTD_compress((*out)->data(), bound, in.data(), in.size(), 1);
    if (ZSTD_isError(n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("zstd refused to compress an element: ", ZSTD_getErrorName(n)));
    }
    (*out)->Truncate(n);
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat("no compression ", compression));
}

absl::Status Decompress(Compression compression, absl::string_view in, char* out,
                        size_t out_size) {
  if (compression == COMPRESSION_LZ4) {
    if (in.size() > static_cast<size_t>(INT32_MAX) || out_size > static_cast<size_t>(INT32_MAX)) {
      return absl::DataLossError("lz4 element larger than lz4 allows");
    }
    const int n = LZ4_decompress_safe(in.data(), out, static_cast<int>(in.size()),
                                      static_cast<int>(out_size));
    if (n < 0 || static_cast<size_t>(n) != out_size) {
      return absl::DataLossError(absl::StrCat("lz4 element of ", in.size(),
                                              " bytes does not decompress to ", out_size));
    }
    return absl::OkStatus();
  }
  if (compression == COMPRESSION_ZSTD) {
    const size_t n = ZSTD_decompress(out, out_size, in.data(), in.size());
    if (ZSTD_isError(n) || n != out_size) {
      return absl::DataLossError(absl::StrCat(
          "zstd element of ", in.size(), " bytes does not decompress to ", out_size,
          ZSTD_isError(n) ? absl::StrCat(": ", ZSTD_getErrorName(n)) : std::string()));
    }
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat("element with unknown compression ", compression));
}

absl::string_view CompressionName(Compression compression) {
  switch (compression) {
    case COMPRESSION_LZ4:
      return "lz4";
    case COMPRESSION_ZSTD:
      return "zstd";
    default:
      return "none";
  }
}

absl::StatusOr<Compression> CompressionFromName(absl::string_view name) {
  if (name == "none") return COMPRESSION_NONE;
  if (name == "lz4") return COMPRESSION_LZ4;
  if (name == "zstd") return COMPRESSION_ZSTD;
  return absl::InvalidArgumentError(
      absl::StrCat("compression '", name, "' is none of none, lz4, zstd"));
}

}  // namespace granary
