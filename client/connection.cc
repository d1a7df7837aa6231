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
#include "transport/shm_protocol.h"

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
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      options.dispatcher_address, connection->credentials_, ClientChannelArguments());
  RETURN_IF_ERROR(WaitForChannel(*channel, "dispatcher", options.dispatcher_address,
                                 ClientTransportSecurity(options),
                                 absl::Milliseconds(options.rpc_timeout_ms)));
  connection->dispatcher_ = Dispatcher::NewStub(channel);
  return connection;
}

std::shared_ptr<grpc::Channel> Connection::WorkerChannel(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = workers_[address];
  if (channel == nullptr) {
    channel = grpc::CreateCustomChannel(address, credentials_, ClientChannelArguments());
  }
  return channel;
}

std::shared_ptr<ShmClient> Connection::WorkerShm(const std::string& address,
                                                 const std::string& shm_nonce) {
  if (!options_.shared_memory || shm_nonce.empty()) return nullptr;
  const std::string socket = ShmSocketName(address, shm_nonce);
  {
    absl::MutexLock lock(&mu_);
    WorkerShmChannel& shm = shm_[address];
    if (shm.nonce == shm_nonce && shm.client != nullptr && !shm.client->broken()) {
      return shm.client;
    }
    if (shm.connecting) return nullptr;  // TCP until that caller is done
    shm.nonce = shm_nonce;
    shm.client = nullptr;
    auto refused = shm_refused_.find(socket);
    if (refused != shm_refused_.end()) {
      if (env_->NowMicros() < refused->second) return nullptr;
      shm_refused_.erase(refused);
    }
    shm.connecting = true;
  }
  // Without mu_: Connect may wait up to its hello timeout, and every reader takes mu_.
  absl::StatusOr<std::shared_ptr<ShmClient>> connected = ShmClient::Connect(address, shm_nonce);
  absl::MutexLock lock(&mu_);
  WorkerShmChannel& shm = shm_[address];
  shm.connecting = false;
  if (connected.ok()) {
    shm.client = *std::move(connected);
    return shm.client;
  }
  // Unavailable: the worker is elsewhere (no such socket here), refused this user or accepts
  // nothing now, and says so at once: cheap to ask again. A silent listener may be a squatter
  // or a worker too busy to answer: asked again after a while. Anything else is a listener
  // that is not the worker.
  if (absl::IsUnavailable(connected.status())) return nullptr;
  const bool silent = absl::IsDeadlineExceeded(connected.status());
  shm_refused_[socket] = silent ? env_->NowMicros() + kShmRetryAfterSilenceMicros : UINT64_MAX;
  LOG(WARNING) << "reading from worker " << address << " over TCP, not through " << socket << ": "
               << connected.status()
               << (silent ? absl::StrCat("; trying it again in ",
                                         kShmRetryAfterSilenceMicros / 1'000'000, " s")
                          : "; not trying it again");
  return nullptr;
}

std::unique_ptr<grpc::ClientContext> Connection::DispatcherContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(DeadlineAfter(options_.rpc_timeout_ms));
  context->set_wait_for_ready(true);
  return context;
}

grpc::Status Connection::CallDispatcher(
    const std::function<grpc::Status(grpc::ClientContext* context)>& call) const {
  const uint64_t give_up =
      env_->NowMicros() + static_cast<uint64_t>(options_.stall_timeout_ms) * 1000;
  uint64_t backoff_us = 50'000;
  while (true) {
    const grpc::Status status = call(DispatcherContext().get());
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        env_->NowMicros() + backoff_us > give_up) {
      return status;
    }
    env_->SleepForMicros(backoff_us);
    backoff_us = std::min<uint64_t>(backoff_us * 2, 1'000'000);
  }
}

std::unique_ptr<grpc::ClientContext> Connection::WorkerContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(DeadlineAfter(options_.rpc_timeout_ms));
  return context;
}

}  // namespace granary
