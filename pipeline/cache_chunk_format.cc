#include "pipeline/cache_chunk_format.h"

#include "common/deterministic_serialization.h"
#include "common/hash.h"
#include "proto/cache.pb.h"

namespace granary {

std::string EncodeCachedElement(int64_t index, const Element& element) {
  CachedElement record;
  record.set_index(index);
  element.ToProto(record.mutable_element());
  return SerializeDeterministically(record);
}

uint64_t ChainChunkChecksum(uint64_t checksum, absl::string_view record) {
  return Hash64(record, checksum);
}

}  // namespace granary
