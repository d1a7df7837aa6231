#include "worker/grpc_worker_service.h"

#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/method_handler.h"
#include "proto/worker.grpc.pb.h"
#include "security/peer_identity.h"

namespace granary {
namespace {

const grpc::Status kStarting(grpc::StatusCode::UNAVAILABLE, "worker is starting");

// "/granary.Worker/<method>", as the generated stubs call it.
const char* MethodName(const char* method) {
  static const std::string* names[2] = {
      new std::string(std::string("/") + Worker::service_full_name() + "/GetElements"),
      new std::string(std::string("/") + Worker::service_full_name() + "/GetWorkerStatus")};
  return std::string(method) == "GetElements" ? names[0]->c_str() : names[1]->c_str();
}

}  // namespace

GrpcWorkerService::GrpcWorkerService(bool enforce_identity) : enforce_identity_(enforce_identity) {
  using grpc::internal::RpcMethod;
  using grpc::internal::RpcMethodHandler;
  using grpc::internal::RpcServiceMethod;
  AddMethod(new RpcServiceMethod(
      MethodName("GetElements"), RpcMethod::NORMAL_RPC,
      new RpcMethodHandler<GrpcWorkerService, GetElementsRequest, ElementsReply>(
          [](GrpcWorkerService* service, grpc::ServerContext* context,
             const GetElementsRequest* request,
             ElementsReply* reply) { return service->GetElements(context, request, reply); },
          this)));
  AddMethod(new RpcServiceMethod(
      MethodName("GetWorkerStatus"), RpcMethod::NORMAL_RPC,
      new RpcMethodHandler<GrpcWorkerService, GetWorkerStatusRequest, GetWorkerStatusResponse>(
          [](GrpcWorkerService* service, grpc::ServerContext* context,
             const GetWorkerStatusRequest* request, GetWorkerStatusResponse* response) {
            return service->GetWorkerStatus(context, request, response);
          },
          this)));
}

absl::StatusOr<std::optional<std::string>> GrpcWorkerService::CheckClient(
    grpc::ServerContext* context, absl::string_view rpc) const {
  if (!enforce_identity_) return std::nullopt;
  const PeerIdentity peer = IdentityOf(*context->auth_context());
  RETURN_IF_ERROR(RequireClient(peer, rpc));
  return peer.name;
}

grpc::Status GrpcWorkerService::GetElements(grpc::ServerContext*, const GetElementsRequest* request,
                                            ElementsReply* reply) {
  WorkerImpl* impl = impl_.load();
  return impl == nullptr ? kStarting : ToGrpcStatus(impl->GetElements(*request, reply));
}

grpc::Status GrpcWorkerService::GetWorkerStatus(grpc::ServerContext* context,
                                                const GetWorkerStatusRequest*,
                                                GetWorkerStatusResponse* response) {
  const absl::StatusOr<std::optional<std::string>> viewer = CheckClient(context, "GetWorkerStatus");
  if (!viewer.ok()) return ToGrpcStatus(viewer.status());
  WorkerImpl* impl = impl_.load();
  return impl == nullptr ? kStarting : ToGrpcStatus(impl->GetStatus(response, *viewer));
}

}  // namespace granary
