#include "worker/grpc_worker_service.h"

#include "common/grpc_status.h"

namespace granary {
namespace {

const grpc::Status kStarting(grpc::StatusCode::UNAVAILABLE, "worker is starting");

}  // namespace

grpc::Status GrpcWorkerService::GetElements(grpc::ServerContext*,
                                            const GetElementsRequest* request,
                                            GetElementsResponse* response) {
  WorkerImpl* impl = impl_.load();
  return impl == nullptr ? kStarting : ToGrpcStatus(impl->GetElements(*request, response));
}

grpc::Status GrpcWorkerService::GetWorkerStatus(grpc::ServerContext*,
                                                const GetWorkerStatusRequest*,
                                                GetWorkerStatusResponse* response) {
  WorkerImpl* impl = impl_.load();
  return impl == nullptr ? kStarting : ToGrpcStatus(impl->GetStatus(response));
}

}  // namespace granary
