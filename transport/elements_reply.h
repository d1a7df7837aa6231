// The GetElements answer (proto/worker.proto GetElementsResponse) on the wire, without copying
// an element's bytes on either side.
//
// Worker side: an ElementsReply holds each element's wire image by reference (the BufferRef the
// worker's window holds). gRPC serializes it through the SerializationTraits below into
// GetElementsResponse's protobuf encoding, in which each payload is a gRPC slice pointing at
// the image itself — released, dropping the reference, once gRPC has sent it. The window can
// acknowledge and drop an element while it is still being sent.
//
// Client side: a ReceivedReply keeps the slices gRPC received the response in, and each payload
// as the pieces of those slices it spans (ReceivedBytes). The payload's XXH3 is computed over the
// pieces; the bytes are made contiguous only once, into the buffer the trainer's tensor views
// point into (or not at all, when the payload lies whole and aligned in one slice).
//
// Any protobuf GetElementsResponse parses as a ReceivedReply and any ElementsReply as a
// GetElementsResponse: clients and tools using the generated stubs interoperate.
#ifndef GRANARY_TRANSPORT_ELEMENTS_REPLY_H_
#define GRANARY_TRANSPORT_ELEMENTS_REPLY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/channel_interface.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/impl/serialization_traits.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "proto/worker.pb.h"
#include "transport/buffer_pool.h"

namespace granary {

struct ReplyElement {
  int64_t index = 0;
  // XXH3-64 of the image's bytes, when `hashed` (an image in shared memory is hashed only if
  // it travels over TCP).
  uint64_t checksum = 0;
  bool hashed = false;
  BufferRef image;
  // Sent by segment rather than by bytes: the client's session holds the image
  // (transport/shm_server.h).
  bool in_shm = false;
  // Sent compressed: these bytes instead of the image's (then `checksum` is theirs).
  Compression compression = COMPRESSION_NONE;
  BufferRef compressed;
};

struct ElementsReply {
  std::vector<ReplyElement> elements;
  bool end_of_task = false;
  int64_t num_elements = 0;
  int64_t recomputed = 0;
  // GetElementsResponse.trainer_tail, serialized (a TrainerTailDef); empty: none.
  std::string trainer_tail;
};

// Bytes received in pieces of gRPC slices. Copyable (copies share the slices).
class ReceivedBytes {
 public:
  // Bytes `size` long starting `offset` into slice `slice`, possibly running on into the next.
  struct Piece {
    size_t slice;
    size_t offset;
    size_t size;
  };
  ReceivedBytes() = default;
  ReceivedBytes(std::shared_ptr<const std::vector<grpc::Slice>> slices, std::vector<Piece> pieces);

  size_t size() const { return size_; }
  // XXH3-64 over the pieces, as if they were contiguous.
  uint64_t Hash() const;
  // The bytes in one piece, when they lie in a single slice (empty view otherwise).
  absl::string_view Single() const;
  // Copies the bytes into `out` (size() bytes) and returns their XXH3-64, hashing each stretch
  // right after copying it, while it is in cache: one pass over memory, not two.
  uint64_t CopyAndHash(char* out) const;

 private:
  std::shared_ptr<const std::vector<grpc::Slice>> slices_;
  std::vector<Piece> pieces_;
  size_t size_ = 0;
};

struct ReceivedPayload {
  int64_t index = 0;
  uint64_t checksum = 0;
  ReceivedBytes payload;
  // Non-zero: the element is the first shm_size bytes of this shared-memory segment.
  uint64_t shm_segment = 0;
  int64_t shm_size = 0;
  // A compressed payload (transport/compression.h) and its image's size.
  Compression compression = COMPRESSION_NONE;
  int64_t uncompressed_size = 0;

  // The element's size as sent: its segment's share, or its payload's bytes.
  int64_t element_size() const {
    return shm_segment != 0 ? shm_size : static_cast<int64_t>(payload.size());
  }
};

struct ReceivedReply {
  std::vector<ReceivedPayload> elements;
  bool end_of_task = false;
  int64_t num_elements = 0;
  int64_t recomputed = 0;
  // GetElementsResponse.trainer_tail, serialized; empty: none.
  std::string trainer_tail;
  // What a malformed response was (the client retries it like a failed call); OK otherwise.
  absl::Status malformed;
};

// Calls Worker.GetElements on `channel` and receives the answer as a ReceivedReply.
grpc::Status CallGetElements(grpc::ChannelInterface* channel, grpc::ClientContext* context,
                             const GetElementsRequest& request, ReceivedReply* reply);

}  // namespace granary

namespace grpc {

template <>
class SerializationTraits<granary::ElementsReply> {
 public:
  static Status Serialize(const granary::ElementsReply& reply, ByteBuffer* buffer,
                          bool* own_buffer);
};

template <>
class SerializationTraits<granary::ReceivedReply> {
 public:
  // Never fails: a response that does not parse is reported in reply->malformed.
  static Status Deserialize(ByteBuffer* buffer, granary::ReceivedReply* reply);
};

}  // namespace grpc

#endif  // GRANARY_TRANSPORT_ELEMENTS_REPLY_H_
