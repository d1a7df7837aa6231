#include "dispatcher/grpc_dispatcher_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "security/peer_identity.h"

namespace granary {

absl::StatusOr<Caller> GrpcDispatcherService::ClientCaller(grpc::ServerContext* context,
                                                           absl::string_view rpc) const {
  if (!enforce_identity_) return Caller{};
  const PeerIdentity peer = IdentityOfCall(*context, tokens_);
  if (absl::Status allowed = RequireClient(peer, rpc); !allowed.ok()) return allowed;
  const std::vector<std::string>& admins = impl_->admin_clients();
  return Caller{.authenticated = true,
                .client = peer.name,
                .admin = std::find(admins.begin(), admins.end(), peer.name) != admins.end()};
}

absl::Status GrpcDispatcherService::CheckWorker(grpc::ServerContext* context,
                                                const std::string& worker_id,
                                                absl::string_view rpc) const {
  if (!enforce_identity_) return absl::OkStatus();
  return RequireWorker(IdentityOfCall(*context, tokens_), worker_id, rpc);
}

absl::Status GrpcDispatcherService::CheckTaskWorker(grpc::ServerContext* context, int64_t task_id,
                                                    absl::string_view rpc) const {
  if (!enforce_identity_) return absl::OkStatus();
  const PeerIdentity peer = IdentityOfCall(*context, tokens_);
  if (peer.role != PeerIdentity::Role::kWorker) return RequireWorker(peer, "", rpc);
  absl::StatusOr<std::string> holder = impl_->TaskWorker(task_id);
  if (!holder.ok()) return holder.status();
  if (*holder != peer.name) {
    return absl::PermissionDeniedError(absl::StrCat(rpc, " for task ", task_id,
                                                    " refused: it is held by worker '", *holder,
                                                    "', and the caller is ", peer.ToString()));
  }
  return absl::OkStatus();
}

grpc::Status GrpcDispatcherService::RegisterDataset(grpc::ServerContext* context,
                                                    const RegisterDatasetRequest* request,
                                                    RegisterDatasetResponse* response) {
  if (absl::StatusOr<Caller> caller = ClientCaller(context, "RegisterDataset"); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  return ToGrpcStatus(impl_->RegisterDataset(*request, response));
}

grpc::Status GrpcDispatcherService::GetOrCreateJob(grpc::ServerContext* context,
                                                   const GetOrCreateJobRequest* request,
                                                   GetOrCreateJobResponse* response) {
  const absl::StatusOr<Caller> caller = ClientCaller(context, "GetOrCreateJob");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(impl_->GetOrCreateJob(*request, response, *caller));
}

grpc::Status GrpcDispatcherService::StartEpoch(grpc::ServerContext* context,
                                               const StartEpochRequest* request,
                                               StartEpochResponse* response) {
  const absl::StatusOr<Caller> caller = ClientCaller(context, "StartEpoch");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(impl_->StartEpoch(*request, response, *caller));
}

grpc::Status GrpcDispatcherService::RegisterWorker(grpc::ServerContext* context,
                                                   const RegisterWorkerRequest* request,
                                                   RegisterWorkerResponse* response) {
  if (absl::Status allowed = CheckWorker(context, request->worker_id(), "RegisterWorker");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return ToGrpcStatus(impl_->RegisterWorker(*request, response));
}

grpc::Status GrpcDispatcherService::WorkerHeartbeat(grpc::ServerContext* context,
                                                    const WorkerHeartbeatRequest* request,
                                                    WorkerHeartbeatResponse* response) {
  if (absl::Status allowed = CheckWorker(context, request->worker_id(), "WorkerHeartbeat");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return ToGrpcStatus(impl_->WorkerHeartbeat(*request, response));
}

grpc::Status GrpcDispatcherService::ClientHeartbeat(grpc::ServerContext* context,
                                                    const ClientHeartbeatRequest* request,
                                                    ClientHeartbeatResponse* response) {
  const absl::StatusOr<Caller> caller = ClientCaller(context, "ClientHeartbeat");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(impl_->ClientHeartbeat(*request, response, *caller));
}

grpc::Status GrpcDispatcherService::GetSplits(grpc::ServerContext* context,
                                              const GetSplitsRequest* request,
                                              GetSplitsResponse* response) {
  if (absl::Status allowed = CheckTaskWorker(context, request->task_id(), "GetSplits");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return ToGrpcStatus(impl_->GetSplits(*request, response));
}

grpc::Status GrpcDispatcherService::TaskFinished(grpc::ServerContext* context,
                                                 const TaskFinishedRequest* request,
                                                 TaskFinishedResponse* response) {
  if (absl::Status allowed = CheckTaskWorker(context, request->task_id(), "TaskFinished");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return ToGrpcStatus(impl_->TaskFinished(*request, response));
}

grpc::Status GrpcDispatcherService::RecomputeCacheChunk(grpc::ServerContext* context,
                                                        const RecomputeCacheChunkRequest* request,
                                                        RecomputeCacheChunkResponse* response) {
  if (absl::Status allowed = CheckTaskWorker(context, request->task_id(), "RecomputeCacheChunk");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return ToGrpcStatus(impl_->RecomputeCacheChunk(*request, response));
}

grpc::Status GrpcDispatcherService::ReportCacheProfile(grpc::ServerContext* context,
                                                       const ReportCacheProfileRequest* request,
                                                       ReportCacheProfileResponse* response) {
  if (absl::Status allowed = CheckWorker(context, request->worker_id(), "ReportCacheProfile");
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  return ToGrpcStatus(impl_->ReportCacheProfile(*request, response));
}

grpc::Status GrpcDispatcherService::ScaleJob(grpc::ServerContext* context,
                                             const ScaleJobRequest* request,
                                             ScaleJobResponse* response) {
  const absl::StatusOr<Caller> caller = ClientCaller(context, "ScaleJob");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(impl_->ScaleJob(*request, response, *caller));
}

grpc::Status GrpcDispatcherService::GetStatus(grpc::ServerContext* context,
                                              const GetStatusRequest* request,
                                              GetStatusResponse* response) {
  const absl::StatusOr<Caller> caller = ClientCaller(context, "GetStatus");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(impl_->GetStatus(*request, response, *caller));
}

}  // namespace granary
