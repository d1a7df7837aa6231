// The gRPC face of the worker: forwards to WorkerImpl and translates the status.
//
// It is the Worker service of proto/worker.proto, registered by hand rather than through the
// generated Worker::Service, so that GetElements answers with an ElementsReply — the same
// GetElementsResponse on the wire, its payloads slices of the window's element images
// (transport/elements_reply.h) — instead of a message its payloads would be copied into.
#ifndef GRANARY_WORKER_GRPC_WORKER_SERVICE_H_
#define GRANARY_WORKER_GRPC_WORKER_SERVICE_H_

#include <atomic>
#include <optional>
#include <string>

#include "grpcpp/impl/service_type.h"
#include "grpcpp/server_context.h"
#include "proto/worker.pb.h"
#include "transport/elements_reply.h"
#include "worker/worker_impl.h"

namespace granary {

// Thread-safe. Answers UNAVAILABLE until set_impl: a worker listens before it registers (the
// address it registers must already answer). The impl must outlive its use here. With
// enforce_identity (a TLS server, SECURITY.md) GetWorkerStatus is for clients only
// (security/peer_identity.h: Unauthenticated without a certificate naming one, PermissionDenied
// for a worker's) and shows a client only the tasks of jobs it may read, unless it is an admin
// (WorkerImpl::GetStatus); GetElements is guarded by the task's capability instead (WorkerImpl
// checks it), which token-authenticated clients without a certificate hold too.
class GrpcWorkerService final : public grpc::Service {
 public:
  explicit GrpcWorkerService(bool enforce_identity);

  void set_impl(WorkerImpl* impl) { impl_ = impl; }

  grpc::Status GetElements(grpc::ServerContext*, const GetElementsRequest* request,
                           ElementsReply* reply);
  grpc::Status GetWorkerStatus(grpc::ServerContext*, const GetWorkerStatusRequest* request,
                               GetWorkerStatusResponse* response);

 private:
  // The calling client's name when identities are enforced (nullopt when not: everyone sees
  // everything); Unauthenticated or PermissionDenied when the caller is not a client.
  absl::StatusOr<std::optional<std::string>> CheckClient(grpc::ServerContext* context,
                                                         absl::string_view rpc) const;

  const bool enforce_identity_;
  std::atomic<WorkerImpl*> impl_{nullptr};
};

}  // namespace granary

#endif  // GRANARY_WORKER_GRPC_WORKER_SERVICE_H_
