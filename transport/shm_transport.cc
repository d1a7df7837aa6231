#include "transport/shm_transport.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "transport/element_image.h"
#include "transport/shm_backing.h"

namespace granary {
namespace {

// The element in the first `size` bytes of shared-memory segment `segment`, viewed where the
// worker wrote it.
absl::StatusOr<ReceivedImage> MapSegment(ShmClient& shm, uint64_t segment, int64_t size) {
  if (size < 0) return absl::DataLossError(absl::StrCat("negative element size ", size));
  ReceivedImage image;
  image.mapped = true;
  ASSIGN_OR_RETURN(image.owner, shm.Take(segment, static_cast<size_t>(size), &image.bytes));
  ASSIGN_OR_RETURN(ImageView view, ParseImage(image.bytes));
  if (!ContentsAligned(view)) {
    ASSIGN_OR_RETURN(BufferRef aligned, WriteAlignedImage(view, BufferPool::Default()));
    image.bytes = aligned->bytes();
    image.owner = std::move(aligned);
  }
  return image;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmElementServer>> ShmElementServer::Start(
    const std::string& worker_address, size_t segment_min_bytes) {
  if (!MemfdBacking::Available()) return absl::UnavailableError("this kernel has no memfd_create");
  ASSIGN_OR_RETURN(std::unique_ptr<ShmServer> server, ShmServer::Start(worker_address));
  BufferPoolOptions pool;
  pool.backing = std::make_shared<MemfdBacking>();
  pool.pooled_bytes = segment_min_bytes;
  return std::unique_ptr<ShmElementServer>(
      new ShmElementServer(std::make_unique<BufferPool>(pool), std::move(server)));
}

void ShmElementServer::Advertise(RegisterWorkerRequest* request) const {
  request->set_shm_nonce(server_->nonce());
}

void ShmElementServer::AddStatus(GetWorkerStatusResponse* status) const {
  status->set_shared_memory(true);
  status->set_shm_sessions(server_->stats().sessions);
}

const char* ShmElementServer::Prepare(const GetElementsRequest& request, ElementsReply* reply) {
  bool by_segment = false;
  for (ReplyElement& e : reply->elements) {
    if (request.shm_session() != 0 && server_->Hold(request.shm_session(), e.image)) {
      e.in_shm = by_segment = true;
    } else {
      PrepareBytes(request, e);
    }
  }
  return by_segment ? kShmTransport : kTcpTransport;
}

absl::StatusOr<std::shared_ptr<ShmElementChannel>> ShmElementChannel::Open(
    const std::string& worker_address, const std::string& nonce,
    std::shared_ptr<grpc::ChannelInterface> channel, absl::Duration hello_timeout) {
  ASSIGN_OR_RETURN(std::shared_ptr<ShmClient> shm,
                   ShmClient::Connect(worker_address, nonce, hello_timeout));
  return std::shared_ptr<ShmElementChannel>(
      new ShmElementChannel(std::move(shm), std::move(channel)));
}

absl::Status ShmElementChannel::Fetch(grpc::ClientContext* context,
                                      const GetElementsRequest& request, ReceivedReply* reply) {
  GetElementsRequest with_session = request;
  with_session.set_shm_session(shm_->session());
  return bytes_.Fetch(context, with_session, reply);
}

ReceivedImage ShmElementChannel::Receive(const ReceivedPayload& payload) {
  if (payload.shm_segment == 0) return bytes_.Receive(payload);
  absl::StatusOr<ReceivedImage> mapped = MapSegment(*shm_, payload.shm_segment, payload.shm_size);
  if (mapped.ok()) return *std::move(mapped);
  ReceivedImage failed;
  failed.outcome = ReceivedImage::Outcome::kRetry;
  failed.error = mapped.status();
  return failed;
}

}  // namespace granary
