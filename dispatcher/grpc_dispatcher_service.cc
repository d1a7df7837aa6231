#include "dispatcher/grpc_dispatcher_service.h"

#include "common/grpc_status.h"

namespace granary {

grpc::Status GrpcDispatcherService::RegisterDataset(grpc::ServerContext*,
                                                    const RegisterDatasetRequest* request,
                                                    RegisterDatasetResponse* response) {
  return ToGrpcStatus(impl_->RegisterDataset(*request, response));
}

grpc::Status GrpcDispatcherService::GetOrCreateJob(grpc::ServerContext*,
                                                   const GetOrCreateJobRequest* request,
                                                   GetOrCreateJobResponse* response) {
  return ToGrpcStatus(impl_->GetOrCreateJob(*request, response));
}

grpc::Status GrpcDispatcherService::StartEpoch(grpc::ServerContext*,
                                               const StartEpochRequest* request,
                                               StartEpochResponse* response) {
  return ToGrpcStatus(impl_->StartEpoch(*request, response));
}

grpc::Status GrpcDispatcherService::RegisterWorker(grpc::ServerContext*,
                                                   const RegisterWorkerRequest* request,
                                                   RegisterWorkerResponse* response) {
  return ToGrpcStatus(impl_->RegisterWorker(*request, response));
}

grpc::Status GrpcDispatcherService::WorkerHeartbeat(grpc::ServerContext*,
                                                    const WorkerHeartbeatRequest* request,
                                                    WorkerHeartbeatResponse* response) {
  return ToGrpcStatus(impl_->WorkerHeartbeat(*request, response));
}

grpc::Status GrpcDispatcherService::ClientHeartbeat(grpc::ServerContext*,
                                                    const ClientHeartbeatRequest* request,
                                                    ClientHeartbeatResponse* response) {
  return ToGrpcStatus(impl_->ClientHeartbeat(*request, response));
}

grpc::Status GrpcDispatcherService::GetSplits(grpc::ServerContext*, const GetSplitsRequest* request,
                                              GetSplitsResponse* response) {
  return ToGrpcStatus(impl_->GetSplits(*request, response));
}

grpc::Status GrpcDispatcherService::TaskFinished(grpc::ServerContext*,
                                                 const TaskFinishedRequest* request,
                                                 TaskFinishedResponse* response) {
  return ToGrpcStatus(impl_->TaskFinished(*request, response));
}

grpc::Status GrpcDispatcherService::GetStatus(grpc::ServerContext*, const GetStatusRequest* request,
                                              GetStatusResponse* response) {
  return ToGrpcStatus(impl_->GetStatus(*request, response));
}

}  // namespace granary
