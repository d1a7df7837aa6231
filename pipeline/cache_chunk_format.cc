#include "pipeline/cache_chunk_format.h"

#include <utility>

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

absl::Status DecodeCachedElement(absl::string_view record, int64_t* index, Element* element) {
  CachedElement cached;
  if (!cached.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    return absl::DataLossError("not a cached element");
  }
  absl::StatusOr<Element> decoded = Element::FromProto(cached.element());
  if (!decoded.ok()) return decoded.status();
  *index = cached.index();
  *element = std::move(*decoded);
  return absl::OkStatus();
}

uint64_t ChainChunkChecksum(uint64_t checksum, absl::string_view record) {
  return Hash64(record, checksum);
}

}  // namespace granary
