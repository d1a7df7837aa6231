// The "shm" transport, for a client on the worker's host: element images live in the worker's
// memfd segments and travel by segment — the answer names the segment, the client maps it
// copy-on-write and views the element there — while everything else (small elements, clients
// without a session) goes as over "tcp". The side channel and its checks are ShmServer's and
// ShmClient's (transport/shm_server.h has the walkthrough; SECURITY.md why each check is there);
// nothing is hashed or compressed by segment: the worker and the client read the same memory.
#ifndef GRANARY_TRANSPORT_SHM_TRANSPORT_H_
#define GRANARY_TRANSPORT_SHM_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/impl/channel_interface.h"
#include "transport/grpc_transport.h"
#include "transport/shm_client.h"
#include "transport/shm_server.h"

namespace granary {

inline constexpr char kShmTransport[] = "shm";

// Thread-safe.
class ShmElementServer final : public ElementServer {
 public:
  // Serves clients of the worker at `worker_address` from a pool of memfd segments for images
  // of at least `segment_min_bytes` (smaller ones come from malloc and go by bytes: each
  // segment is a file descriptor of the worker's). Unavailable when this host offers no shared
  // memory (no memfd_create; ShmServer::Start's errors).
  static absl::StatusOr<std::unique_ptr<ShmElementServer>> Start(const std::string& worker_address,
                                                                 size_t segment_min_bytes);

  const char* name() const override { return kShmTransport; }
  BufferPool* pool() override { return pool_.get(); }
  // The socket's nonce (RegisterWorkerRequest.shm_nonce).
  void Advertise(RegisterWorkerRequest* request) const override;
  // shared_memory, shm_sessions.
  void AddStatus(GetWorkerStatusResponse* status) const override;
  // An element in a segment goes by segment when the request names a session that can hold it
  // (ShmServer::Hold), which then holds it until the client releases it; any other by bytes
  // (PrepareBytes). "shm" when one went by segment, else "tcp".
  const char* Prepare(const GetElementsRequest& request, ElementsReply* reply) override;

 private:
  ShmElementServer(std::unique_ptr<BufferPool> pool, std::unique_ptr<ShmServer> server)
      : pool_(std::move(pool)), server_(std::move(server)) {}

  // Declared first: the server's sessions hold images of the pool.
  const std::unique_ptr<BufferPool> pool_;
  const std::unique_ptr<ShmServer> server_;
};

// Thread-safe.
class ShmElementChannel final : public ElementChannel {
 public:
  // The session with the worker at `worker_address` whose socket nonce is `nonce`
  // (TaskInfo.worker_shm_nonce), GetElements going over `channel`. Errors as
  // ShmClient::Connect's (it waits up to `hello_timeout` for the worker's hello).
  static absl::StatusOr<std::shared_ptr<ShmElementChannel>> Open(
      const std::string& worker_address, const std::string& nonce,
      std::shared_ptr<grpc::ChannelInterface> channel,
      absl::Duration hello_timeout = ShmClient::kHelloTimeout);

  const char* name() const override { return kShmTransport; }
  // The worker closed the session (it died or restarted; a restarted worker knows nothing of it).
  bool broken() const override { return shm_->broken(); }
  uint64_t session() const { return shm_->session(); }

  // The request names this channel's session.
  absl::Status Fetch(grpc::ClientContext* context, const GetElementsRequest& request,
                     ReceivedReply* reply) override;
  // A payload naming a segment: the segment mapped, the element viewed where the worker wrote
  // it (copied into an aligned layout if its tensors are not aligned), the mapping — and with it
  // the worker's hold of the segment — kept by the image's owner; failing to map it is kRetry.
  // Any other payload as GrpcElementChannel::Receive.
  ReceivedImage Receive(const ReceivedPayload& payload) override;

 private:
  ShmElementChannel(std::shared_ptr<ShmClient> shm, std::shared_ptr<grpc::ChannelInterface> channel)
      : shm_(std::move(shm)), bytes_(std::move(channel)) {}

  const std::shared_ptr<ShmClient> shm_;
  GrpcElementChannel bytes_;
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_SHM_TRANSPORT_H_
