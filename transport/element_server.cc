#include "transport/element_server.h"

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "glog/logging.h"
#include "transport/compression.h"

namespace granary {

absl::Status CheckElementsRequest(const GetElementsRequest& request) {
  if (!Compression_IsValid(request.compression())) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetElements: unknown compression ", request.compression()));
  }
  return absl::OkStatus();
}

void PrepareBytes(const GetElementsRequest& request, ReplyElement& element) {
  if (request.compression() != COMPRESSION_NONE) {
    absl::StatusOr<BufferRef> compressed =
        Compress(request.compression(), element.image->bytes(), BufferPool::Default());
    if (compressed.ok()) {
      element.compression = request.compression();
      element.compressed = *std::move(compressed);
      element.checksum = Hash3_64(element.compressed->bytes());
      element.hashed = true;
      return;
    }
    LOG(WARNING) << "task " << request.task_id() << " element " << element.index
                 << ": sent uncompressed: " << compressed.status();
  }
  if (!element.hashed) {
    element.checksum = Hash3_64(element.image->bytes());
    element.hashed = true;
  }
}

}  // namespace granary
