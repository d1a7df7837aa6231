#include "transport/transport_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "transport/grpc_transport.h"
#include "transport/shm_transport.h"

namespace granary {

TransportRegistry& TransportRegistry::BuiltIn() {
  static TransportRegistry* const registry = [] {
    auto* r = new TransportRegistry;
    r->Register(
         kTcpTransport,
         [](const ElementServerOptions&) -> absl::StatusOr<std::unique_ptr<ElementServer>> {
           return std::make_unique<GrpcElementServer>();
         },
         [](const ElementChannelOptions& o) -> absl::StatusOr<std::shared_ptr<ElementChannel>> {
           return std::make_shared<GrpcElementChannel>(o.grpc_channel);
         })
        .IgnoreError();
    r->Register(
         kShmTransport,
         [](const ElementServerOptions& o) -> absl::StatusOr<std::unique_ptr<ElementServer>> {
           return ShmElementServer::Start(o.worker_address, o.segment_min_bytes);
         },
         [](const ElementChannelOptions& o) -> absl::StatusOr<std::shared_ptr<ElementChannel>> {
           return ShmElementChannel::Open(o.worker_address, o.advertised, o.grpc_channel);
         })
        .IgnoreError();
    return r;
  }();
  return *registry;
}

absl::Status TransportRegistry::Register(const std::string& name, ServerFactory server,
                                         ChannelFactory channel) {
  absl::MutexLock lock(&mu_);
  if (!transports_.emplace(name, Transport{std::move(server), std::move(channel)}).second) {
    return absl::AlreadyExistsError(absl::StrCat("transport '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

std::vector<std::string> TransportRegistry::names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, transport] : transports_) names.push_back(name);
  return names;
}

absl::StatusOr<TransportRegistry::Transport> TransportRegistry::Find(absl::string_view name) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = transports_.find(name);
    if (it != transports_.end()) return it->second;
  }
  return absl::NotFoundError(absl::StrCat("no element transport '", name,
                                          "' (known: ", absl::StrJoin(names(), ", "), ")"));
}

absl::StatusOr<std::unique_ptr<ElementServer>> TransportRegistry::StartServer(
    absl::string_view name, const ElementServerOptions& options) const {
  ASSIGN_OR_RETURN(Transport transport, Find(name));
  return transport.server(options);
}

absl::StatusOr<std::shared_ptr<ElementChannel>> TransportRegistry::OpenChannel(
    absl::string_view name, const ElementChannelOptions& options) const {
  ASSIGN_OR_RETURN(Transport transport, Find(name));
  return transport.channel(options);
}

}  // namespace granary
