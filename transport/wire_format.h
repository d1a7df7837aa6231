// The bits of protobuf's wire format (https://protobuf.dev/programming-guides/encoding/) that the
// data plane writes and reads by hand, so that an element's bytes never pass through a message
// object: varints, tags, wire types. Used by element_image.cc and elements_reply.cc.
#ifndef GRANARY_TRANSPORT_WIRE_FORMAT_H_
#define GRANARY_TRANSPORT_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace granary::wire {

inline constexpr int kVarint = 0;
inline constexpr int kFixed64 = 1;
inline constexpr int kLengthDelimited = 2;
inline constexpr int kFixed32 = 5;

// A one-byte tag (fields 1..15).
constexpr char Tag(int field, int wire_type) { return static_cast<char>(field << 3 | wire_type); }

inline size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

inline void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

inline void AppendFixed64(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

}  // namespace granary::wire

#endif  // GRANARY_TRANSPORT_WIRE_FORMAT_H_
