#include "common/compressed_file.h"

#include "absl/strings/str_cat.h"
#include "common/gzip_file.h"
#include "common/status_macros.h"

namespace granary {

absl::StatusOr<Compression> ParseCompression(absl::string_view name) {
  if (name.empty()) return Compression::kNone;
  if (name == "GZIP") return Compression::kGzip;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compression '", name, "' (expected \"\" or \"GZIP\")"));
}

absl::string_view CompressionName(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "";
    case Compression::kGzip:
      return "GZIP";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<SequentialFile>> OpenMaybeCompressed(Env* env,
                                                                    const std::string& path,
                                                                    Compression compression) {
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
  if (compression == Compression::kGzip) return NewGzipInputFile(std::move(file));
  return file;
}

absl::StatusOr<std::unique_ptr<WritableFile>> CreateMaybeCompressed(Env* env,
                                                                    const std::string& path,
                                                                    Compression compression) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(path));
  if (compression == Compression::kGzip) return NewGzipOutputFile(std::move(file));
  return file;
}

}  // namespace granary
