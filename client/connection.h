// Connection: what a Client, its Jobs and their EpochReaders share — the options, the
// dispatcher stub and one cached channel per worker address. Internal to the client library.
#ifndef GRANARY_CLIENT_CONNECTION_H_
#define GRANARY_CLIENT_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "granary/client.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/dispatcher.grpc.pb.h"
#include "transport/shm_client.h"

namespace granary {

// The channel arguments of every channel the client opens: no message size limit (a
// GetElements response carries up to max_bytes_per_request of payload, and at least one
// element however large), and a reconnect backoff capped at one second so that a worker or
// dispatcher restarted at the same address is found again quickly (gRPC's default cap is two
// minutes).
grpc::ChannelArguments ClientChannelArguments();

// Thread-safe. Shared (std::shared_ptr) by everything a Client creates, so that Jobs and
// EpochReaders may outlive the Client.
class Connection {
 public:
  // Opens the dispatcher channel and waits up to options.rpc_timeout_ms for it to connect.
  // Unavailable naming the address if it does not; at once (security/handshake_probe.h)
  // FailedPrecondition when the dispatcher speaks TLS and the options plain text or the reverse,
  // Unauthenticated when a certificate is refused; InvalidArgument for bad options — each error
  // naming the options as options.option_naming says. Every timer
  // of the client (stall timeouts, heartbeat intervals, back-offs) runs on `env`'s clock.
  static absl::StatusOr<std::shared_ptr<Connection>> Open(const ClientOptions& options,
                                                          Env* env = Env::Default());

  const ClientOptions& options() const { return options_; }
  Env* env() const { return env_; }
  Dispatcher::Stub& dispatcher() { return *dispatcher_; }

  // The channel to the worker at `address` (host:port), created on first use and kept for the
  // life of the Connection.
  std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& address);
  // The shared-memory channel to the worker at `address`, whose socket nonce is `shm_nonce`
  // (TaskInfo.worker_shm_nonce), when options.shared_memory is set and the worker serves one on
  // this host; null otherwise (read it over TCP). Kept while it works; a broken one (the worker
  // restarted) or one of another nonce is replaced by a new connection. Connecting runs
  // without the Connection's lock, one caller per address at a time: while one connects (up to
  // ShmClient::kHelloTimeout), the others get null and read over TCP. A socket whose listener
  // fails ShmClient::Connect's checks is logged as a warning naming it, and the worker is read
  // over TCP: for good when the listener is not the worker (PermissionDenied, DataLoss); for
  // kShmRetryAfterSilenceMicros when it sent no hello in time (a squatter, or a worker too busy to
  // answer), after which it is tried again.
  std::shared_ptr<ShmClient> WorkerShm(const std::string& address, const std::string& shm_nonce);

  // How long (on env()'s clock) a socket whose listener sent no hello in time is left alone.
  static constexpr uint64_t kShmRetryAfterSilenceMicros = 30'000'000;

  // A context for a dispatcher call: deadline rpc_timeout_ms, and wait_for_ready so that a
  // call made while the dispatcher restarts waits for it (up to the deadline) instead of
  // failing at once.
  std::unique_ptr<grpc::ClientContext> DispatcherContext() const;
  // Runs a dispatcher call (`call` gets a fresh DispatcherContext per attempt) and repeats it
  // while it fails Unavailable — the dispatcher restarting, or dying while it handled the call
  // (its RPCs are idempotent) — until options.stall_timeout_ms have passed. A retried
  // anonymous GetOrCreateJob whose first attempt was applied leaves that first job unused.
  grpc::Status CallDispatcher(
      const std::function<grpc::Status(grpc::ClientContext* context)>& call) const;
  // A context for a worker call: deadline rpc_timeout_ms, failing fast when the worker is down
  // (the reader then asks the dispatcher where the task runs now).
  std::unique_ptr<grpc::ClientContext> WorkerContext() const;

 private:
  Connection(const ClientOptions& options, Env* env,
             std::shared_ptr<grpc::ChannelCredentials> credentials)
      : options_(options), env_(env), credentials_(std::move(credentials)) {}

  const ClientOptions options_;
  Env* const env_;
  // Of every channel: the dispatcher's and the workers'.
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::unique_ptr<Dispatcher::Stub> dispatcher_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> workers_ ABSL_GUARDED_BY(mu_);
  struct WorkerShmChannel {
    std::string nonce;
    std::shared_ptr<ShmClient> client;
    // A WorkerShm call is connecting to `nonce`'s socket, without mu_.
    bool connecting = false;
  };
  // By worker address.
  std::map<std::string, WorkerShmChannel> shm_ ABSL_GUARDED_BY(mu_);
  // Sockets (ShmSocketName) whose listener failed ShmClient::Connect's checks, and the time
  // (env_'s micros) from which each may be tried again; UINT64_MAX: never.
  std::map<std::string, uint64_t> shm_refused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CLIENT_CONNECTION_H_
