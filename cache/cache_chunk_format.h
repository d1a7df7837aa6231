// The records of cache chunk files (cache/FORMAT.md): what cache_write's sink writes and
// the cache_read source reads. A chunk is a TFRecord-framed file whose records are CachedElement
// protos (index + element with its provenance) whose element field holds the element's wire
// image (transport/FORMAT.md) as it is. (A chunk's MAC over its records: security/chunk_mac.h.)
#ifndef GRANARY_CACHE_CACHE_CHUNK_FORMAT_H_
#define GRANARY_CACHE_CACHE_CHUNK_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pipeline/core/element.h"

namespace granary {

// The record of `element` at index `index`.
std::string EncodeCachedElement(int64_t index, const Element& element);

// Decodes a record written by EncodeCachedElement (or any CachedElement) into its index and
// element: the element's image is copied once into an aligned buffer from `pool` and the
// element's tensors are views into it — nothing parsed into objects, nothing to serialize again
// (Element::Serialize hands the same image out). Errors (for the reader to prefix with the
// chunk and offset): DataLoss "not a cached element" when the bytes do not parse, and
// ParseImage's error for an inconsistent element. Never fails in any other way, whatever the
// bytes (but ResourceExhausted when no buffer can be had).
absl::Status DecodeCachedElement(absl::string_view record, int64_t* index, Element* element,
                                 BufferPool* pool = BufferPool::Default());

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_CHUNK_FORMAT_H_
