// The "tcp" transport: every element travels by bytes in the GetElements answer over gRPC,
// without a copy on either side (transport/elements_reply.h), compressed if the client asks and
// checked against its XXH3-64 checksum on arrival (transport/FORMAT.md, "GetElements on the
// wire"). Every worker serves it, and every other transport falls back on it for what it cannot
// carry.
#ifndef GRANARY_TRANSPORT_GRPC_TRANSPORT_H_
#define GRANARY_TRANSPORT_GRPC_TRANSPORT_H_

#include <memory>

#include "grpcpp/impl/channel_interface.h"
#include "transport/element_channel.h"
#include "transport/element_server.h"

namespace granary {

inline constexpr char kTcpTransport[] = "tcp";

// Thread-safe (stateless).
class GrpcElementServer final : public ElementServer {
 public:
  const char* name() const override { return kTcpTransport; }
  // Every element by bytes (PrepareBytes).
  const char* Prepare(const GetElementsRequest& request, ElementsReply* reply) override;
};

// Thread-safe.
class GrpcElementChannel final : public ElementChannel {
 public:
  explicit GrpcElementChannel(std::shared_ptr<grpc::ChannelInterface> channel)
      : channel_(std::move(channel)) {}

  const char* name() const override { return kTcpTransport; }
  absl::Status Fetch(grpc::ClientContext* context, const GetElementsRequest& request,
                     ReceivedReply* reply) override;
  // A payload sent by bytes: viewed in the one receive slice it lies in when it lies whole in
  // one with its tensors aligned; otherwise copied — and hashed while copied — into one buffer,
  // the only copy an element's bytes see on the client. A compressed payload's checksum is of
  // the compressed bytes, which are decompressed straight into the element's buffer. A payload
  // naming a shared-memory segment is kRetry (this channel maps none).
  ReceivedImage Receive(const ReceivedPayload& payload) override;

 private:
  const std::shared_ptr<grpc::ChannelInterface> channel_;
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_GRPC_TRANSPORT_H_
