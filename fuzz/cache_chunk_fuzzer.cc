// Fuzz target: the cache chunk reader's decoding (cache/cache_chunk_format.h,
// cache/source_cache_read.cc): a TFRecord-framed chunk whose records are CachedElement
// protos, each decoded into an Element (tensors checked against their dtype and shape). A
// decoded element must encode back to a record that decodes to the same element.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cache/cache_chunk_format.h"
#include "fuzz/fuzz_util.h"
#include "pipeline/core/element.h"
#include "pipeline/sources/tfrecord_reader.h"

using granary::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  granary::TfRecordReader reader(std::make_unique<granary::fuzz::StringFile>(bytes, "fuzz.chunk"),
                                 "fuzz.chunk", 0);
  while (true) {
    std::string record;
    bool end = false;
    if (!reader.ReadRecord(&record, &end).ok() || end) break;
    int64_t index = 0;
    granary::Element element;
    if (!granary::DecodeCachedElement(record, &index, &element).ok()) break;
    const std::string again = granary::EncodeCachedElement(index, element);
    int64_t index2 = 0;
    granary::Element element2;
    Check(granary::DecodeCachedElement(again, &index2, &element2).ok(),
          "a re-encoded element decodes");
    Check(index2 == index, "the index survives re-encoding");
    Check(granary::EncodeCachedElement(index2, element2) == again,
          "encoding a decoded element is stable");
  }
  return 0;
}
