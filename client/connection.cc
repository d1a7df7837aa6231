#include "client/connection.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/client_security.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "security/handshake_probe.h"
#include "security/transport_security.h"
#include "transport/grpc_transport.h"
#include "transport/shm_transport.h"
#include "transport/transport_registry.h"

namespace granary {
namespace {

std::chrono::system_clock::time_point DeadlineAfter(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

grpc::ChannelArguments ClientChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

absl::StatusOr<std::shared_ptr<Connection>> Connection::Open(const ClientOptions& options,
                                                             Env* env) {
  if (options.dispatcher_address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ClientOptionNamesFor(options.option_naming).dispatcher_address, " is empty"));
  }
  if (options.max_outstanding_requests < 1) {
    return absl::InvalidArgumentError("ClientOptions.max_outstanding_requests must be at least 1");
  }
  if (options.max_bytes_per_request < 1) {
    return absl::InvalidArgumentError("ClientOptions.max_bytes_per_request must be at least 1");
  }
  if (options.heartbeat_interval_ms < 1 || options.rpc_timeout_ms < 1 ||
      options.stall_timeout_ms < 1) {
    return absl::InvalidArgumentError(
        "ClientOptions: heartbeat_interval_ms, rpc_timeout_ms and stall_timeout_ms must be "
        "positive");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                   ClientChannelCredentials(options));
  std::shared_ptr<Connection> connection(new Connection(options, env, std::move(credentials)));
  ASSIGN_OR_RETURN(
      connection->dispatcher_,
      DispatcherTargets::Create(options.dispatcher_address,
                                ClientOptionNamesFor(options.option_naming).dispatcher_address,
                                connection->credentials_, ClientChannelArguments()));
  // One reachable dispatcher (of the replicas given) is enough to start.
  absl::Status reached;
  for (size_t i = 0; i < connection->dispatcher_->addresses().size(); ++i) {
    const DispatcherTargets::Target target = connection->dispatcher_->Current();
    reached = WaitForChannel(*target.channel, "dispatcher", target.address,
                             ClientTransportSecurity(options),
                             absl::Milliseconds(options.rpc_timeout_ms));
    if (reached.ok()) return connection;
    if (!absl::IsUnavailable(reached)) return reached;
    connection->dispatcher_->MoveOn(target.address);
  }
  return reached;
}

Connection::Worker& Connection::WorkerAt(const std::string& address) {
  Worker& worker = workers_[address];
  if (worker.grpc == nullptr) {
    worker.grpc = grpc::CreateCustomChannel(address, credentials_, ClientChannelArguments());
    worker.tcp = std::make_shared<GrpcElementChannel>(worker.grpc);
  }
  return worker;
}

std::shared_ptr<grpc::Channel> Connection::WorkerChannel(const std::string& address) {
  absl::MutexLock lock(&mu_);
  return WorkerAt(address).grpc;
}

std::shared_ptr<ElementChannel> Connection::ElementChannelTo(const std::string& address,
                                                             const std::string& shm_nonce) {
  std::shared_ptr<ElementChannel> shm = SharedMemoryChannel(address, shm_nonce);
  if (shm != nullptr) return shm;
  absl::MutexLock lock(&mu_);
  return WorkerAt(address).tcp;
}

std::shared_ptr<ElementChannel> Connection::SharedMemoryChannel(const std::string& address,
                                                                const std::string& shm_nonce) {
  if (!options_.shared_memory || shm_nonce.empty()) return nullptr;
  const std::pair<std::string, std::string> socket(address, shm_nonce);
  ElementChannelOptions channel;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = WorkerAt(address);
    if (worker.shm_nonce == shm_nonce && worker.shm != nullptr && !worker.shm->broken()) {
      return worker.shm;
    }
    if (worker.shm_opening) return nullptr;  // "tcp" until that caller is done
    worker.shm_nonce = shm_nonce;
    worker.shm = nullptr;
    auto refused = shm_refused_.find(socket);
    if (refused != shm_refused_.end()) {
      if (env_->NowMicros() < refused->second) return nullptr;
      shm_refused_.erase(refused);
    }
    worker.shm_opening = true;
    channel = {address, worker.grpc, shm_nonce};
  }
  // Without mu_: opening may wait up to the hello timeout, and every reader takes mu_.
  absl::StatusOr<std::shared_ptr<ElementChannel>> opened =
      TransportRegistry::BuiltIn().OpenChannel(kShmTransport, channel);
  absl::MutexLock lock(&mu_);
  Worker& worker = WorkerAt(address);
  worker.shm_opening = false;
  if (opened.ok()) {
    worker.shm = *std::move(opened);
    return worker.shm;
  }
  // Unavailable: the worker is elsewhere (no such socket here), refused this user or accepts
  // nothing now, and says so at once: cheap to ask again. A silent listener may be a squatter
  // or a worker too busy to answer: asked again after a while. Anything else is a listener
  // that is not the worker.
  if (absl::IsUnavailable(opened.status())) return nullptr;
  const bool silent = absl::IsDeadlineExceeded(opened.status());
  shm_refused_[socket] = silent ? env_->NowMicros() + kShmRetryAfterSilenceMicros : UINT64_MAX;
  LOG(WARNING) << "reading from worker " << address
               << " over TCP, not shared memory: " << opened.status()
               << (silent ? absl::StrCat("; trying it again in ",
                                         kShmRetryAfterSilenceMicros / 1'000'000, " s")
                          : "; not trying it again");
  return nullptr;
}

std::unique_ptr<grpc::ClientContext> Connection::DispatcherContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(DeadlineAfter(options_.rpc_timeout_ms));
  // Replicated, a dead replica must fail at once so that the call moves to the next one.
  context->set_wait_for_ready(dispatcher_->addresses().size() == 1);
  return context;
}

grpc::Status Connection::CallDispatcher(const DispatcherTargets::Rpc& call) const {
  grpc::Status status;
  RepeatWhileUnreachable([&] {
    // Redirects to the leader are followed at once, within one Call.
    status = dispatcher_->Call([this] { return DispatcherContext(); }, call);
    // A deadline passes when the dispatcher is paused, slowed by its journal's disk, or its
    // packets are lost (a partition).
    return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  });
  return status;
}

void Connection::RepeatWhileUnreachable(const std::function<bool()>& attempt) const {
  const uint64_t give_up =
      env_->NowMicros() + static_cast<uint64_t>(options_.stall_timeout_ms) * 1000;
  // A single dispatcher that is down is restarting (seconds); a replicated one is electing a
  // standby that serves at once (about the lease TTL), so a leaderless moment is polled closely.
  const uint64_t max_backoff_us = dispatcher_->addresses().size() == 1 ? 1'000'000 : 200'000;
  uint64_t backoff_us = 50'000;
  while (attempt()) {
    if (env_->NowMicros() + backoff_us > give_up) return;
    env_->SleepForMicros(backoff_us);
    backoff_us = std::min<uint64_t>(backoff_us * 2, max_backoff_us);
  }
}

std::unique_ptr<grpc::ClientContext> Connection::WorkerContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(DeadlineAfter(options_.rpc_timeout_ms));
  return context;
}

}  // namespace granary
