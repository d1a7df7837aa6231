#include "transport/elements_reply.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/rpc_method.h"
#include "transport/wire_format.h"

namespace granary {
namespace {

// GetElementsResponse's and IndexedElement's fields (proto/worker.proto).
constexpr int kResponseElements = 1, kResponseEndOfTask = 2, kResponseNumElements = 3,
              kResponseRecomputed = 4, kResponseTrainerTail = 5;
constexpr int kElementIndex = 1, kElementPayload = 2, kElementChecksum = 3,
              kElementShmSegment = 4, kElementShmSize = 5, kElementCompression = 6,
              kElementUncompressedSize = 7;

// Reads protobuf wire bytes spread over slices, without copying them.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices) total_ += s.size();
  }
  size_t pos() const { return pos_; }
  size_t total() const { return total_; }

  bool Byte(uint8_t* byte) {
    if (!SkipEmpty()) return false;
    *byte = slices_[slice_].begin()[offset_++];
    ++pos_;
    return true;
  }
  bool Varint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      uint8_t byte;
      if (!Byte(&byte)) return false;
      if (shift < 64) result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *value = result;
        return true;
      }
    }
    return false;
  }
  bool Fixed(int width, uint64_t* value) {
    uint64_t result = 0;
    for (int i = 0; i < width; ++i) {
      uint8_t byte;
      if (!Byte(&byte)) return false;
      result |= static_cast<uint64_t>(byte) << (8 * i);
    }
    *value = result;
    return true;
  }
  // The next `size` bytes as pieces of the slices; false if there are fewer.
  bool Pieces(size_t size, std::vector<ReceivedBytes::Piece>* pieces) {
    if (size > total_ - pos_) return false;
    while (size > 0) {
      SkipEmpty();
      const size_t take = std::min(size, slices_[slice_].size() - offset_);
      if (pieces != nullptr) pieces->push_back({slice_, offset_, take});
      offset_ += take;
      pos_ += take;
      size -= take;
    }
    return true;
  }
  bool Skip(int wire_type) {
    uint64_t value;
    switch (wire_type) {
      case wire::kVarint:
        return Varint(&value);
      case wire::kFixed64:
        return Fixed(8, &value);
      case wire::kFixed32:
        return Fixed(4, &value);
      case wire::kLengthDelimited:
        return Varint(&value) && Pieces(value, nullptr);
      default:
        return false;
    }
  }

 private:
  bool SkipEmpty() {
    while (slice_ < slices_.size() && offset_ >= slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
    }
    return slice_ < slices_.size();
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  size_t pos_ = 0;
  size_t total_ = 0;
};

// Parses one IndexedElement ending at `end`.
bool ParseElement(SliceCursor& in, size_t end, ReceivedPayload* element,
                  std::vector<ReceivedBytes::Piece>* pieces) {
  while (in.pos() < end) {
    uint64_t tag, value;
    if (!in.Varint(&tag)) return false;
    const int field = static_cast<int>(tag >> 3);
    const int wire_type = static_cast<int>(tag & 7);
    if (field == kElementIndex && wire_type == wire::kVarint) {
      if (!in.Varint(&value)) return false;
      element->index = static_cast<int64_t>(value);
    } else if (field == kElementPayload && wire_type == wire::kLengthDelimited) {
      pieces->clear();
      if (!in.Varint(&value) || value > end - std::min(end, in.pos()) ||
          !in.Pieces(value, pieces)) {
        return false;
      }
    } else if (field == kElementChecksum && wire_type == wire::kFixed64) {
      if (!in.Fixed(8, &element->checksum)) return false;
    } else if (field == kElementShmSegment && wire_type == wire::kFixed64) {
      if (!in.Fixed(8, &element->shm_segment)) return false;
    } else if (field == kElementShmSize && wire_type == wire::kVarint) {
      if (!in.Varint(&value)) return false;
      element->shm_size = static_cast<int64_t>(value);
    } else if (field == kElementCompression && wire_type == wire::kVarint) {
      if (!in.Varint(&value)) return false;
      element->compression = static_cast<Compression>(static_cast<int>(value));
    } else if (field == kElementUncompressedSize && wire_type == wire::kVarint) {
      if (!in.Varint(&value)) return false;
      element->uncompressed_size = static_cast<int64_t>(value);
    } else if (!in.Skip(wire_type)) {
      return false;
    }
  }
  return in.pos() == end;
}

void DestroyImageRef(void* ref) { delete static_cast<BufferRef*>(ref); }

}  // namespace

ReceivedBytes::ReceivedBytes(std::shared_ptr<const std::vector<grpc::Slice>> slices,
                             std::vector<Piece> pieces)
    : slices_(std::move(slices)), pieces_(std::move(pieces)) {
  for (const Piece& p : pieces_) size_ += p.size;
}

uint64_t ReceivedBytes::Hash() const {
  if (pieces_.size() == 1) return Hash3_64(Single());
  StreamingHash3 hash;
  for (const Piece& p : pieces_) hash.Update((*slices_)[p.slice].begin() + p.offset, p.size);
  return hash.Digest();
}

absl::string_view ReceivedBytes::Single() const {
  if (pieces_.size() != 1) return absl::string_view();
  const Piece& p = pieces_[0];
  return absl::string_view(reinterpret_cast<const char*>((*slices_)[p.slice].begin()) + p.offset,
                           p.size);
}

uint64_t ReceivedBytes::CopyAndHash(char* out) const {
  constexpr size_t kStretch = 128 << 10;  // Well within a core's L2.
  StreamingHash3 hash;
  for (const Piece& p : pieces_) {
    const uint8_t* in = (*slices_)[p.slice].begin() + p.offset;
    for (size_t done = 0; done < p.size; done += kStretch) {
      const size_t n = std::min(kStretch, p.size - done);
      std::memcpy(out, in + done, n);
      hash.Update(out, n);
      out += n;
    }
  }
  return hash.Digest();
}

grpc::Status CallGetElements(grpc::ChannelInterface* channel, grpc::ClientContext* context,
                             const GetElementsRequest& request, ReceivedReply* reply) {
  static const std::string* const name =
      new std::string(absl::StrCat("/", GetElementsRequest::descriptor()->file()->package(),
                                   ".Worker/GetElements"));
  const grpc::internal::RpcMethod method(name->c_str(), grpc::internal::RpcMethod::NORMAL_RPC);
  return grpc::internal::BlockingUnaryCall(channel, method, context, request, reply);
}

}  // namespace granary

namespace grpc {

Status SerializationTraits<granary::ElementsReply>::Serialize(const granary::ElementsReply& reply,
                                                              ByteBuffer* buffer,
                                                              bool* own_buffer) {
  using namespace granary::wire;  // NOLINT: the wire-format helpers.
  std::vector<Slice> slices;
  slices.reserve(2 * reply.elements.size() + 1);
  // The framing between payloads, copied into small slices; each payload a slice of its image.
  std::string framing;
  for (const granary::ReplyElement& e : reply.elements) {
    if (e.in_shm) {  // By segment: no bytes.
      std::string body;
      if (e.index != 0) {
        body.push_back(Tag(granary::kElementIndex, kVarint));
        AppendVarint(static_cast<uint64_t>(e.index), &body);
      }
      body.push_back(Tag(granary::kElementShmSegment, kFixed64));
      AppendFixed64(e.image->segment_id(), &body);
      body.push_back(Tag(granary::kElementShmSize, kVarint));
      AppendVarint(e.image->size(), &body);
      framing.push_back(Tag(granary::kResponseElements, kLengthDelimited));
      AppendVarint(body.size(), &framing);
      framing += body;
      continue;
    }
    const granary::BufferRef& bytes = e.compressed != nullptr ? e.compressed : e.image;
    const size_t payload = bytes->size();
    size_t body = 1 + VarintSize(payload) + payload;
    if (e.index != 0) body += 1 + VarintSize(static_cast<uint64_t>(e.index));
    if (e.checksum != 0) body += 9;
    if (e.compressed != nullptr) {
      body += 2 + VarintSize(e.compression) + VarintSize(e.image->size());
    }
    framing.push_back(Tag(granary::kResponseElements, kLengthDelimited));
    AppendVarint(body, &framing);
    if (e.index != 0) {
      framing.push_back(Tag(granary::kElementIndex, kVarint));
      AppendVarint(static_cast<uint64_t>(e.index), &framing);
    }
    framing.push_back(Tag(granary::kElementPayload, kLengthDelimited));
    AppendVarint(payload, &framing);
    slices.emplace_back(framing.data(), framing.size());
    framing.clear();
    if (payload > 0) {
      // gRPC reads the image where it lies and drops this reference once it is sent.
      slices.emplace_back(bytes->data(), payload, granary::DestroyImageRef,
                          new granary::BufferRef(bytes));
    }
    if (e.checksum != 0) {
      framing.push_back(Tag(granary::kElementChecksum, kFixed64));
      AppendFixed64(e.checksum, &framing);
    }
    if (e.compressed != nullptr) {
      framing.push_back(Tag(granary::kElementCompression, kVarint));
      AppendVarint(e.compression, &framing);
      framing.push_back(Tag(granary::kElementUncompressedSize, kVarint));
      AppendVarint(e.image->size(), &framing);
    }
  }
  if (reply.end_of_task) {
    framing.push_back(Tag(granary::kResponseEndOfTask, kVarint));
    framing.push_back(1);
  }
  if (reply.num_elements != 0) {
    framing.push_back(Tag(granary::kResponseNumElements, kVarint));
    AppendVarint(static_cast<uint64_t>(reply.num_elements), &framing);
  }
  if (reply.recomputed != 0) {
    framing.push_back(Tag(granary::kResponseRecomputed, kVarint));
    AppendVarint(static_cast<uint64_t>(reply.recomputed), &framing);
  }
  if (!reply.trainer_tail.empty()) {
    framing.push_back(Tag(granary::kResponseTrainerTail, kLengthDelimited));
    AppendVarint(reply.trainer_tail.size(), &framing);
    framing += reply.trainer_tail;
  }
  if (!framing.empty()) slices.emplace_back(framing.data(), framing.size());
  ByteBuffer out(slices.data(), slices.size());
  buffer->Swap(&out);
  *own_buffer = true;
  return Status::OK;
}

Status SerializationTraits<granary::ReceivedReply>::Deserialize(ByteBuffer* buffer,
                                                                granary::ReceivedReply* reply) {
  auto slices = std::make_shared<std::vector<Slice>>();
  if (!buffer->Dump(slices.get()).ok()) {
    reply->malformed = absl::DataLossError("GetElements response: unreadable byte buffer");
    return Status::OK;
  }
  buffer->Clear();
  granary::SliceCursor in(*slices);
  const auto malformed = [&in, reply](absl::string_view what) {
    reply->malformed = absl::DataLossError(
        absl::StrCat("GetElements response: ", what, " at byte ", in.pos(), " of ", in.total()));
    return Status::OK;
  };
  std::vector<granary::ReceivedBytes::Piece> pieces;
  while (in.pos() < in.total()) {
    uint64_t tag, value;
    if (!in.Varint(&tag)) return malformed("truncated tag");
    const int field = static_cast<int>(tag >> 3);
    const int wire_type = static_cast<int>(tag & 7);
    if (field == granary::kResponseElements && wire_type == granary::wire::kLengthDelimited) {
      if (!in.Varint(&value) || value > in.total() - in.pos()) {
        return malformed("element length runs past the end");
      }
      granary::ReceivedPayload element;
      pieces.clear();
      if (!granary::ParseElement(in, in.pos() + value, &element, &pieces)) {
        return malformed("malformed element");
      }
      element.payload = granary::ReceivedBytes(slices, pieces);
      reply->elements.push_back(std::move(element));
    } else if (field == granary::kResponseTrainerTail &&
               wire_type == granary::wire::kLengthDelimited) {
      if (!in.Varint(&value) || value > in.total() - in.pos()) {
        return malformed("trainer_tail length runs past the end");
      }
      pieces.clear();
      if (!in.Pieces(value, &pieces)) return malformed("truncated trainer_tail");
      reply->trainer_tail.resize(value);
      granary::ReceivedBytes(slices, pieces).CopyAndHash(reply->trainer_tail.data());
    } else if (wire_type == granary::wire::kVarint &&
               (field == granary::kResponseEndOfTask || field == granary::kResponseNumElements ||
                field == granary::kResponseRecomputed)) {
      if (!in.Varint(&value)) return malformed("truncated varint");
      if (field == granary::kResponseEndOfTask) reply->end_of_task = value != 0;
      if (field == granary::kResponseNumElements) reply->num_elements = static_cast<int64_t>(value);
      if (field == granary::kResponseRecomputed) reply->recomputed = static_cast<int64_t>(value);
    } else if (!in.Skip(wire_type)) {
      return malformed("malformed field");
    }
  }
  return Status::OK;
}

}  // namespace grpc
