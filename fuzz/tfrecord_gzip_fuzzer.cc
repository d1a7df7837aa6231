// Fuzz target: the TFRecord reader (pipeline/sources/tfrecord_reader.h) on a GZIP-compressed file, read
// through the gzip decompressor (common/gzip_file.h) as OpenMaybeCompressed does; also Skip()s
// through the decompressed bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/gzip_file.h"
#include "fuzz/fuzz_util.h"
#include "pipeline/sources/tfrecord_reader.h"

using granary::fuzz::StringFile;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  {
    absl::StatusOr<std::unique_ptr<granary::SequentialFile>> file =
        granary::NewGzipInputFile(std::make_unique<StringFile>(bytes, "fuzz.tfrecord.gz", 13));
    if (!file.ok()) return 0;
    granary::TfRecordReader reader(std::move(*file), "fuzz.tfrecord.gz", 0);
    // Bounded: a small gzip stream can expand to many records.
    for (int i = 0; i < 100000; ++i) {
      std::string record;
      bool end = false;
      if (!reader.ReadRecord(&record, &end).ok() || end) break;
    }
  }
  {
    absl::StatusOr<std::unique_ptr<granary::SequentialFile>> file =
        granary::NewGzipInputFile(std::make_unique<StringFile>(bytes, "fuzz.tfrecord.gz"));
    if (!file.ok()) return 0;
    char buffer[64];
    for (int i = 0; i < 100000; ++i) {
      if (!(*file)->Skip(1000).ok()) break;
      absl::StatusOr<size_t> n = (*file)->Read(sizeof(buffer), buffer);
      if (!n.ok() || *n == 0) break;
    }
  }
  return 0;
}
