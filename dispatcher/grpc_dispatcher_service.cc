#include "dispatcher/grpc_dispatcher_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/leader_redirect.h"
#include "security/peer_identity.h"

namespace granary {

GrpcDispatcherService::GrpcDispatcherService(DispatcherImpl* impl, bool enforce_identity,
                                             const BearerTokens* tokens)
    : GrpcDispatcherService(
          // Not owned: the aliasing constructor's empty owner.
          [impl]() -> absl::StatusOr<std::shared_ptr<DispatcherImpl>> {
            return std::shared_ptr<DispatcherImpl>(std::shared_ptr<void>(), impl);
          },
          enforce_identity, tokens) {}

grpc::Status GrpcDispatcherService::WithImpl(
    grpc::ServerContext* context, const std::function<grpc::Status(DispatcherImpl&)>& rpc) const {
  const absl::StatusOr<std::shared_ptr<DispatcherImpl>> impl = current_();
  if (!impl.ok()) {
    if (std::optional<std::string> leader = RedirectedLeader(impl.status())) {
      context->AddTrailingMetadata(std::string(kLeaderMetadataKey), *leader);
    }
    if (std::optional<uint64_t> applied = AppliedSeqOf(impl.status())) {
      context->AddTrailingMetadata(std::string(kAppliedSeqMetadataKey), absl::StrCat(*applied));
    }
    return ToGrpcStatus(impl.status());
  }
  return rpc(**impl);
}

absl::StatusOr<Caller> GrpcDispatcherService::ClientCaller(const DispatcherImpl& impl,
                                                           grpc::ServerContext* context,
                                                           absl::string_view rpc) const {
  if (!enforce_identity_) return Caller{};
  const PeerIdentity peer = IdentityOfCall(*context, tokens_);
  if (absl::Status allowed = RequireClient(peer, rpc); !allowed.ok()) return allowed;
  const std::vector<std::string>& admins = impl.admin_clients();
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

absl::Status GrpcDispatcherService::CheckTaskWorker(const DispatcherImpl& impl,
                                                    grpc::ServerContext* context, int64_t task_id,
                                                    absl::string_view rpc) const {
  if (!enforce_identity_) return absl::OkStatus();
  const PeerIdentity peer = IdentityOfCall(*context, tokens_);
  if (peer.role != PeerIdentity::Role::kWorker) return RequireWorker(peer, "", rpc);
  absl::StatusOr<std::string> holder = impl.TaskWorker(task_id);
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
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    absl::StatusOr<Caller> caller = ClientCaller(impl, context, "RegisterDataset");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.RegisterDataset(*request, response, *caller));
  });
}

grpc::Status GrpcDispatcherService::GetOrCreateJob(grpc::ServerContext* context,
                                                   const GetOrCreateJobRequest* request,
                                                   GetOrCreateJobResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    const absl::StatusOr<Caller> caller = ClientCaller(impl, context, "GetOrCreateJob");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.GetOrCreateJob(*request, response, *caller));
  });
}

grpc::Status GrpcDispatcherService::StartEpoch(grpc::ServerContext* context,
                                               const StartEpochRequest* request,
                                               StartEpochResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    const absl::StatusOr<Caller> caller = ClientCaller(impl, context, "StartEpoch");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.StartEpoch(*request, response, *caller));
  });
}

grpc::Status GrpcDispatcherService::RegisterWorker(grpc::ServerContext* context,
                                                   const RegisterWorkerRequest* request,
                                                   RegisterWorkerResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    if (absl::Status allowed = CheckWorker(context, request->worker_id(), "RegisterWorker");
        !allowed.ok()) {
      return ToGrpcStatus(allowed);
    }
    return ToGrpcStatus(impl.RegisterWorker(*request, response));
  });
}

grpc::Status GrpcDispatcherService::WorkerHeartbeat(grpc::ServerContext* context,
                                                    const WorkerHeartbeatRequest* request,
                                                    WorkerHeartbeatResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    if (absl::Status allowed = CheckWorker(context, request->worker_id(), "WorkerHeartbeat");
        !allowed.ok()) {
      return ToGrpcStatus(allowed);
    }
    return ToGrpcStatus(impl.WorkerHeartbeat(*request, response));
  });
}

grpc::Status GrpcDispatcherService::ClaimConsumer(grpc::ServerContext* context,
                                                  const ClaimConsumerRequest* request,
                                                  ClaimConsumerResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    const absl::StatusOr<Caller> caller = ClientCaller(impl, context, "ClaimConsumer");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.ClaimConsumer(*request, response, *caller));
  });
}

grpc::Status GrpcDispatcherService::ReleaseConsumer(grpc::ServerContext* context,
                                                    const ReleaseConsumerRequest* request,
                                                    ReleaseConsumerResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    const absl::StatusOr<Caller> caller = ClientCaller(impl, context, "ReleaseConsumer");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.ReleaseConsumer(*request, *caller));
  });
}

grpc::Status GrpcDispatcherService::ClientHeartbeat(grpc::ServerContext* context,
                                                    const ClientHeartbeatRequest* request,
                                                    ClientHeartbeatResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    const absl::StatusOr<Caller> caller = ClientCaller(impl, context, "ClientHeartbeat");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.ClientHeartbeat(*request, response, *caller));
  });
}

grpc::Status GrpcDispatcherService::GetSplits(grpc::ServerContext* context,
                                              const GetSplitsRequest* request,
                                              GetSplitsResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    if (absl::Status allowed = CheckTaskWorker(impl, context, request->task_id(), "GetSplits");
        !allowed.ok()) {
      return ToGrpcStatus(allowed);
    }
    return ToGrpcStatus(impl.GetSplits(*request, response));
  });
}

grpc::Status GrpcDispatcherService::TaskFinished(grpc::ServerContext* context,
                                                 const TaskFinishedRequest* request,
                                                 TaskFinishedResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    if (absl::Status allowed = CheckTaskWorker(impl, context, request->task_id(), "TaskFinished");
        !allowed.ok()) {
      return ToGrpcStatus(allowed);
    }
    return ToGrpcStatus(impl.TaskFinished(*request, response));
  });
}

grpc::Status GrpcDispatcherService::RecomputeCacheChunk(grpc::ServerContext* context,
                                                        const RecomputeCacheChunkRequest* request,
                                                        RecomputeCacheChunkResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    if (absl::Status allowed = CheckTaskWorker(impl, context, request->task_id(), "RecomputeCacheChunk");
        !allowed.ok()) {
      return ToGrpcStatus(allowed);
    }
    return ToGrpcStatus(impl.RecomputeCacheChunk(*request, response));
  });
}

grpc::Status GrpcDispatcherService::ReportCacheProfile(grpc::ServerContext* context,
                                                       const ReportCacheProfileRequest* request,
                                                       ReportCacheProfileResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    if (absl::Status allowed = CheckWorker(context, request->worker_id(), "ReportCacheProfile");
        !allowed.ok()) {
      return ToGrpcStatus(allowed);
    }
    return ToGrpcStatus(impl.ReportCacheProfile(*request, response));
  });
}

grpc::Status GrpcDispatcherService::ScaleJob(grpc::ServerContext* context,
                                             const ScaleJobRequest* request,
                                             ScaleJobResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    const absl::StatusOr<Caller> caller = ClientCaller(impl, context, "ScaleJob");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.ScaleJob(*request, response, *caller));
  });
}

grpc::Status GrpcDispatcherService::GetStatus(grpc::ServerContext* context,
                                              const GetStatusRequest* request,
                                              GetStatusResponse* response) {
  return WithImpl(context, [&](DispatcherImpl& impl) -> grpc::Status {
    const absl::StatusOr<Caller> caller = ClientCaller(impl, context, "GetStatus");
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    return ToGrpcStatus(impl.GetStatus(*request, response, *caller));
  });
}

}  // namespace granary
