#include "cache/cache_chunk_format.h"

#include <cstring>
#include <utility>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "proto/cache.pb.h"

namespace granary {

std::string EncodeCachedElement(int64_t index, const Element& element) {
  using google::protobuf::internal::WireFormatLite;
  std::string image;
  element.AppendImage(&image);
  // The same bytes as CachedElement{index, element}'s serialization, the element being its
  // image: fields 1 (varint) and 2 (length-delimited).
  std::string record;
  record.reserve(image.size() + 24);
  google::protobuf::io::StringOutputStream stream(&record);
  {
    google::protobuf::io::CodedOutputStream out(&stream);
    if (index != 0) WireFormatLite::WriteInt64(CachedElement::kIndexFieldNumber, index, &out);
    WireFormatLite::WriteBytes(CachedElement::kElementFieldNumber, image, &out);
  }
  return record;
}

absl::Status DecodeCachedElement(absl::string_view record, int64_t* index, Element* element,
                                 BufferPool* pool) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(record.data()),
                                            static_cast<int>(record.size()));
  uint64_t decoded_index = 0;
  absl::string_view image;
  bool has_element = false;
  while (!in.ExpectAtEnd()) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return absl::DataLossError("not a cached element");
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto wire_type = WireFormatLite::GetTagWireType(tag);
    if (field == CachedElement::kIndexFieldNumber &&
        wire_type == WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(&decoded_index)) return absl::DataLossError("not a cached element");
    } else if (field == CachedElement::kElementFieldNumber &&
               wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length;
      if (!in.ReadVarint32(&length)) return absl::DataLossError("not a cached element");
      const int at = in.CurrentPosition();
      if (!in.Skip(static_cast<int>(length))) return absl::DataLossError("not a cached element");
      image = record.substr(static_cast<size_t>(at), length);
      has_element = true;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return absl::DataLossError("not a cached element");
    }
  }
  if (!has_element) return absl::DataLossError("not a cached element");
  absl::StatusOr<BufferRef> buffer = pool->Allocate(image.size());
  if (!buffer.ok()) return buffer.status();
  if (!image.empty()) std::memcpy((*buffer)->data(), image.data(), image.size());
  absl::StatusOr<Element> decoded = Element::FromImage(*std::move(buffer));
  if (!decoded.ok()) return decoded.status();
  *index = static_cast<int64_t>(decoded_index);
  *element = *std::move(decoded);
  return absl::OkStatus();
}

}  // namespace granary
