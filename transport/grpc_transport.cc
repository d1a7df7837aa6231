#include "transport/grpc_transport.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "transport/compression.h"
#include "transport/element_image.h"

namespace granary {
namespace {

using Outcome = ReceivedImage::Outcome;

ReceivedImage Failed(Outcome outcome, absl::Status error) {
  ReceivedImage image;
  image.outcome = outcome;
  image.error = std::move(error);
  return image;
}

ReceivedImage Image(std::shared_ptr<const void> owner, absl::string_view bytes) {
  ReceivedImage image;
  image.owner = std::move(owner);
  image.bytes = bytes;
  return image;
}

// The image in `buffer`, laid out anew if its contents are not aligned (an image from another
// writer).
absl::StatusOr<BufferRef> Aligned(BufferRef buffer) {
  ASSIGN_OR_RETURN(ImageView view, ParseImage(buffer->bytes()));
  if (!ContentsAligned(view)) {
    ASSIGN_OR_RETURN(buffer, WriteAlignedImage(view, BufferPool::Default()));
  }
  return buffer;
}

// `buffer`'s image once the checksum matched: kNotAnElement unless it parses; kRetry without
// memory to align it.
ReceivedImage ImageIn(BufferRef buffer) {
  absl::StatusOr<BufferRef> aligned = Aligned(std::move(buffer));
  if (!aligned.ok()) {
    return Failed(
        absl::IsResourceExhausted(aligned.status()) ? Outcome::kRetry : Outcome::kNotAnElement,
        aligned.status());
  }
  const absl::string_view bytes = (*aligned)->bytes();
  return Image(*std::move(aligned), bytes);
}

ReceivedImage Mismatch(uint64_t checksum) {
  return Failed(Outcome::kChecksumMismatch,
                absl::DataLossError(absl::StrCat("payload checksum mismatch (expected XXH3 ",
                                                 HashToHex(checksum), ")")));
}

ReceivedImage NoMemory(const absl::Status& status) { return Failed(Outcome::kRetry, status); }

ReceivedImage ReceiveCompressed(const ReceivedPayload& e) {
  if (e.uncompressed_size < 0 || static_cast<size_t>(e.uncompressed_size) > kMaxUncompressedBytes) {
    // A size no image has: the bytes cannot be the ones sent.
    return Mismatch(e.checksum);
  }
  // Copied first only when the compressed bytes arrived in pieces.
  BufferRef pieces;
  absl::string_view compressed = e.payload.Single();
  if (compressed.size() == e.payload.size()) {
    if (Hash3_64(compressed) != e.checksum) return Mismatch(e.checksum);
  } else {
    absl::StatusOr<BufferRef> allocated = BufferPool::Default()->Allocate(e.payload.size());
    if (!allocated.ok()) return NoMemory(allocated.status());
    pieces = *std::move(allocated);
    if (e.payload.CopyAndHash(pieces->data()) != e.checksum) return Mismatch(e.checksum);
    compressed = pieces->bytes();
  }
  absl::StatusOr<BufferRef> buffer =
      BufferPool::Default()->Allocate(static_cast<size_t>(e.uncompressed_size));
  if (!buffer.ok()) return NoMemory(buffer.status());
  if (absl::Status status =
          Decompress(e.compression, compressed, (*buffer)->data(), (*buffer)->size());
      !status.ok()) {
    return Failed(Outcome::kNotAnElement, status);
  }
  return ImageIn(*std::move(buffer));
}

}  // namespace

const char* GrpcElementServer::Prepare(const GetElementsRequest& request, ElementsReply* reply) {
  for (ReplyElement& e : reply->elements) PrepareBytes(request, e);
  return kTcpTransport;
}

absl::Status GrpcElementChannel::Fetch(grpc::ClientContext* context,
                                       const GetElementsRequest& request, ReceivedReply* reply) {
  return FromGrpcStatus(CallGetElements(channel_.get(), context, request, reply));
}

ReceivedImage GrpcElementChannel::Receive(const ReceivedPayload& e) {
  if (e.shm_segment != 0) {
    return Failed(Outcome::kRetry,
                  absl::UnavailableError("answered by shared memory to a TCP request"));
  }
  if (e.compression != COMPRESSION_NONE) return ReceiveCompressed(e);
  if (const absl::string_view single = e.payload.Single(); !single.empty()) {
    absl::StatusOr<ImageView> view = ParseImage(single);
    if (view.ok() && ContentsAligned(*view)) {
      if (Hash3_64(single) != e.checksum) return Mismatch(e.checksum);
      return Image(std::make_shared<ReceivedBytes>(e.payload), single);
    }
  }
  absl::StatusOr<BufferRef> buffer = BufferPool::Default()->Allocate(e.payload.size());
  if (!buffer.ok()) return NoMemory(buffer.status());
  if (e.payload.CopyAndHash((*buffer)->data()) != e.checksum) return Mismatch(e.checksum);
  return ImageIn(*std::move(buffer));
}

}  // namespace granary
