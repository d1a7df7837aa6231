// The records of cache chunk files (checkpoint/FORMAT.md): what cache_write's sink writes and
// the cache_read source reads. A chunk is a TFRecord-framed file whose records are
// deterministically serialized CachedElement protos (index + element with its provenance); its
// checksum chains XXH64 over the records' bytes in order.
#ifndef GRANARY_PIPELINE_CACHE_CHUNK_FORMAT_H_
#define GRANARY_PIPELINE_CACHE_CHUNK_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pipeline/element.h"

namespace granary {

// The record of `element` at index `index`.
std::string EncodeCachedElement(int64_t index, const Element& element);

// Decodes a record written by EncodeCachedElement into its index and element. Errors (for the
// reader to prefix with the chunk and offset): DataLoss "not a cached element" when the bytes
// do not parse, and Element::FromProto's error for an element whose tensors are inconsistent.
// Never fails in any other way, whatever the bytes.
absl::Status DecodeCachedElement(absl::string_view record, int64_t* index, Element* element);

// The checksum of a chunk after one more record: XXH64(record) seeded with the checksum of the
// records before it (0 for an empty chunk).
uint64_t ChainChunkChecksum(uint64_t checksum, absl::string_view record);

}  // namespace granary

#endif  // GRANARY_PIPELINE_CACHE_CHUNK_FORMAT_H_
