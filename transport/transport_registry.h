// TransportRegistry: the element transports by name, each a worker end (ElementServer,
// transport/element_server.h) and a client end (ElementChannel, transport/element_channel.h).
//
// Built in: "tcp" (transport/grpc_transport.h: by bytes over gRPC, zero-copy; every worker
// serves it and every client can use it) and "shm" (transport/shm_transport.h: by memfd segment
// to a client on the worker's host). A worker starts the server of the transport it is
// configured for (WorkerOptions.local_transport), falling back to "tcp" when that one is not
// available here; a client opens, per worker, the channel of the best transport that worker
// advertised (its registration's fields, handed to clients with its address: today the shm
// nonce) and that passes its checks, else "tcp" (client/connection.h has the negotiation).
//
// A new transport is a header and a source file beside these — an ElementServer and an
// ElementChannel — and one line in BuiltIn() (transport_registry.cc) that names them.
//
// Thread-safe.
#ifndef GRANARY_TRANSPORT_TRANSPORT_REGISTRY_H_
#define GRANARY_TRANSPORT_TRANSPORT_REGISTRY_H_

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/impl/channel_interface.h"
#include "transport/element_channel.h"
#include "transport/element_server.h"

namespace granary {

// What a worker's transport server is started with.
struct ElementServerOptions {
  // The address clients reach the worker at (as registered with the dispatcher).
  std::string worker_address;
  // Images at least this large are allocated where the transport can send them without bytes
  // (shared memory: its segments); smaller ones come from malloc.
  size_t segment_min_bytes = kPooledBytes;
};

// What a client's channel to one worker is opened with.
struct ElementChannelOptions {
  std::string worker_address;
  // The gRPC channel to the worker (GetElements is always a gRPC call).
  std::shared_ptr<grpc::ChannelInterface> grpc_channel;
  // What the worker advertised for the transport (ElementServer::Advertise; shm: its nonce).
  std::string advertised;
};

class TransportRegistry {
 public:
  using ServerFactory = std::function<absl::StatusOr<std::unique_ptr<ElementServer>>(
      const ElementServerOptions& options)>;
  using ChannelFactory = std::function<absl::StatusOr<std::shared_ptr<ElementChannel>>(
      const ElementChannelOptions& options)>;

  // The process' registry, holding the built-in transports.
  static TransportRegistry& BuiltIn();

  // Adds transport `name`. AlreadyExists naming it when one of that name is registered.
  absl::Status Register(const std::string& name, ServerFactory server, ChannelFactory channel)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The registered names, sorted.
  std::vector<std::string> names() const ABSL_LOCKS_EXCLUDED(mu_);

  // Starts transport `name`'s server: NotFound naming it and the known transports when none is
  // registered under it; otherwise the factory's errors (Unavailable: not on this host).
  absl::StatusOr<std::unique_ptr<ElementServer>> StartServer(
      absl::string_view name, const ElementServerOptions& options) const ABSL_LOCKS_EXCLUDED(mu_);
  // Opens transport `name`'s channel to a worker: NotFound as StartServer; otherwise the
  // factory's errors, which the client's negotiation reads (client/connection.h): Unavailable
  // (not reachable now: try again next time), DeadlineExceeded (no answer in time: try again
  // later), any other (the peer is not the worker: never again).
  absl::StatusOr<std::shared_ptr<ElementChannel>> OpenChannel(
      absl::string_view name, const ElementChannelOptions& options) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Transport {
    ServerFactory server;
    ChannelFactory channel;
  };
  // The transport registered as `name`, or NotFound naming it and the known ones.
  absl::StatusOr<Transport> Find(absl::string_view name) const ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Transport, std::less<>> transports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_TRANSPORT_REGISTRY_H_
