// Connection: what a Client, its Jobs and their EpochReaders share — the options, the
// dispatcher stub and one cached channel per worker address. Internal to the client library.
#ifndef GRANARY_CLIENT_CONNECTION_H_
#define GRANARY_CLIENT_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/dispatcher_targets.h"
#include "common/env.h"
#include "granary/client.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/dispatcher.grpc.pb.h"
#include "transport/element_channel.h"

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
  // The dispatcher (or, replicated, the replica) calls go to now, and how to move on after a
  // failed call (common/dispatcher_targets.h).
  DispatcherTargets& dispatcher() const { return *dispatcher_; }

  // The channel to the worker at `address` (host:port), created on first use and kept for the
  // life of the Connection.
  std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& address);
  // The channel the elements of the worker at `address` come through
  // (transport/transport_registry.h): "shm" when options.shared_memory is set, the worker
  // serves shared memory on this host (`shm_nonce`, TaskInfo.worker_shm_nonce, names its
  // socket) and a session with it opens; else "tcp", over WorkerChannel(address). An "shm"
  // channel is kept while it works; a broken one (the worker restarted) or one of another
  // nonce is replaced by a new one. Opening runs without the Connection's lock, one caller per
  // address at a time: while one opens (up to ShmClient::kHelloTimeout), the others get "tcp".
  // A socket whose listener fails ShmClient::Connect's checks is logged as a warning naming it,
  // and the worker is read over "tcp": for good when the listener is not the worker
  // (PermissionDenied, DataLoss); for kShmRetryAfterSilenceMicros when it sent no hello in time
  // (a squatter, or a worker too busy to answer), after which it is tried again.
  std::shared_ptr<ElementChannel> ElementChannelTo(const std::string& address,
                                                   const std::string& shm_nonce);

  // How long (on env()'s clock) a socket whose listener sent no hello in time is left alone.
  static constexpr uint64_t kShmRetryAfterSilenceMicros = 30'000'000;

  // A context for a dispatcher call: deadline rpc_timeout_ms, and — given one dispatcher
  // address — wait_for_ready, so that a call made while the dispatcher restarts waits for it
  // (up to the deadline) instead of failing at once. Given a replicated dispatcher's replicas,
  // a call to a dead one fails at once and the next is tried.
  std::unique_ptr<grpc::ClientContext> DispatcherContext() const;
  // Runs a dispatcher call (`call` gets the current dispatcher's stub and a fresh
  // DispatcherContext per attempt) and repeats it while it fails Unavailable — the dispatcher
  // restarting, or dying while it handled the call (its RPCs are idempotent), or a replica that
  // does not lead (its redirect is followed at once) — or DeadlineExceeded — the dispatcher
  // paused, slowed by its journal's disk, or cut off by a partition that drops packets — until
  // options.stall_timeout_ms have passed, waiting 50 ms, then twice as long each time, up to 1 s
  // (one dispatcher) or 200 ms (replicas: a failover takes about the lease TTL). A retried
  // anonymous GetOrCreateJob whose first attempt was applied leaves that first job unused.
  grpc::Status CallDispatcher(const DispatcherTargets::Rpc& call) const;
  // CallDispatcher's repetition, for a dispatcher call made otherwise: calls `attempt` again
  // while it returns true (its call failed Unavailable or DeadlineExceeded), with the same waits
  // and bound.
  void RepeatWhileUnreachable(const std::function<bool()>& attempt) const;
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
  std::unique_ptr<DispatcherTargets> dispatcher_;
  absl::Mutex mu_;
  // The "shm" channel to the worker at `address` per ElementChannelTo, or null (read it over
  // "tcp").
  std::shared_ptr<ElementChannel> SharedMemoryChannel(const std::string& address,
                                                      const std::string& shm_nonce)
      ABSL_LOCKS_EXCLUDED(mu_);

  struct Worker {
    std::shared_ptr<grpc::Channel> grpc;
    // "tcp", over `grpc`.
    std::shared_ptr<ElementChannel> tcp;
    // "shm": the nonce of the worker's socket and the channel opened to it (null: none).
    std::string shm_nonce;
    std::shared_ptr<ElementChannel> shm;
    // A caller is opening an "shm" channel to `shm_nonce`'s socket, without mu_.
    bool shm_opening = false;
  };
  // Created on an address' first use (its channels live as long as the Connection).
  Worker& WorkerAt(const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  // (address, shm nonce) of sockets whose listener failed ShmClient::Connect's checks, and the
  // time (env_'s micros) from which each may be tried again; UINT64_MAX: never.
  std::map<std::pair<std::string, std::string>, uint64_t> shm_refused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CLIENT_CONNECTION_H_
