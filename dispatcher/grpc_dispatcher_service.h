// The gRPC face of the dispatcher: each RPC checks who calls (when identities are enforced),
// forwards to DispatcherImpl and translates the status. No dispatcher logic lives here
// (DESIGN.md §1: dispatcher logic never includes gRPC headers).
//
// With enforce_identity (a TLS server, SECURITY.md), the caller's certificate — or for clients
// a bearer token of `tokens` — decides (security/bearer_tokens.h): RegisterWorker and
// WorkerHeartbeat and ReportCacheProfile only from the worker the request names; GetSplits,
// TaskFinished and RecomputeCacheChunk only from the worker holding the task; every other RPC only
// from a client, which the job RPCs pass on as the Caller whose access to the job is checked
// (dispatcher/caller.h); GetStatus shows a client only its own jobs unless it is one of the
// impl's admin_clients (DispatcherOptions). A refusal is Unauthenticated (no identity) or
// PermissionDenied.
#ifndef GRANARY_DISPATCHER_GRPC_DISPATCHER_SERVICE_H_
#define GRANARY_DISPATCHER_GRPC_DISPATCHER_SERVICE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dispatcher/dispatcher_impl.h"
#include "proto/dispatcher.grpc.pb.h"
#include "security/bearer_tokens.h"

namespace granary {

// Which DispatcherImpl answers a call now: a single dispatcher's one, or a replica's while it
// leads (replication/dispatcher_replica.h) — else an Unavailable the call is refused with,
// naming the leader (common/leader_redirect.h), which the service also sends as the trailing
// metadata kLeaderMetadataKey (and the replica's applied seq, when it carries one, as
// kAppliedSeqMetadataKey).
using DispatcherImplSource = std::function<absl::StatusOr<std::shared_ptr<DispatcherImpl>>()>;

// Thread-safe.
class GrpcDispatcherService final : public Dispatcher::Service {
 public:
  // `tokens` (may be null: certificates only) must outlive the service. The impl's
  // admin_clients see the whole status; every other client sees its own jobs (VisibleState,
  // caller.h). Each call is served by the impl `current` returns when it arrives.
  GrpcDispatcherService(DispatcherImplSource current, bool enforce_identity,
                        const BearerTokens* tokens = nullptr)
      : current_(std::move(current)), enforce_identity_(enforce_identity), tokens_(tokens) {}
  // Serves every call with `impl`, which must outlive the service.
  GrpcDispatcherService(DispatcherImpl* impl, bool enforce_identity,
                        const BearerTokens* tokens = nullptr);

  grpc::Status RegisterDataset(grpc::ServerContext*, const RegisterDatasetRequest* request,
                               RegisterDatasetResponse* response) override;
  grpc::Status GetOrCreateJob(grpc::ServerContext*, const GetOrCreateJobRequest* request,
                              GetOrCreateJobResponse* response) override;
  grpc::Status StartEpoch(grpc::ServerContext*, const StartEpochRequest* request,
                          StartEpochResponse* response) override;
  grpc::Status RegisterWorker(grpc::ServerContext*, const RegisterWorkerRequest* request,
                              RegisterWorkerResponse* response) override;
  grpc::Status WorkerHeartbeat(grpc::ServerContext*, const WorkerHeartbeatRequest* request,
                               WorkerHeartbeatResponse* response) override;
  grpc::Status ClaimConsumer(grpc::ServerContext*, const ClaimConsumerRequest* request,
                             ClaimConsumerResponse* response) override;
  grpc::Status ReleaseConsumer(grpc::ServerContext*, const ReleaseConsumerRequest* request,
                               ReleaseConsumerResponse* response) override;
  grpc::Status ClientHeartbeat(grpc::ServerContext*, const ClientHeartbeatRequest* request,
                               ClientHeartbeatResponse* response) override;
  grpc::Status GetSplits(grpc::ServerContext*, const GetSplitsRequest* request,
                         GetSplitsResponse* response) override;
  grpc::Status TaskFinished(grpc::ServerContext*, const TaskFinishedRequest* request,
                            TaskFinishedResponse* response) override;
  grpc::Status RecomputeCacheChunk(grpc::ServerContext*, const RecomputeCacheChunkRequest* request,
                                   RecomputeCacheChunkResponse* response) override;
  grpc::Status ReportCacheProfile(grpc::ServerContext*, const ReportCacheProfileRequest* request,
                                  ReportCacheProfileResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext*, const GetStatusRequest* request,
                         GetStatusResponse* response) override;
  grpc::Status ScaleJob(grpc::ServerContext*, const ScaleJobRequest* request,
                        ScaleJobResponse* response) override;

 private:
  // Runs `rpc` on the impl current_ returns; or refuses the call as it says (with the leader's
  // address as trailing metadata).
  grpc::Status WithImpl(grpc::ServerContext* context,
                        const std::function<grpc::Status(DispatcherImpl&)>& rpc) const;
  // The calling client (unauthenticated when identities are not enforced); Unauthenticated or
  // PermissionDenied (RequireClient) when they are and the caller is not a client.
  absl::StatusOr<Caller> ClientCaller(const DispatcherImpl& impl, grpc::ServerContext* context,
                                      absl::string_view rpc) const;
  // OK unless identities are enforced and the caller is not worker `worker_id`.
  absl::Status CheckWorker(grpc::ServerContext* context, const std::string& worker_id,
                           absl::string_view rpc) const;
  // OK unless identities are enforced and the caller is not the worker holding `task_id`.
  absl::Status CheckTaskWorker(const DispatcherImpl& impl, grpc::ServerContext* context,
                               int64_t task_id, absl::string_view rpc) const;

  const DispatcherImplSource current_;
  const bool enforce_identity_;
  const BearerTokens* const tokens_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_GRPC_DISPATCHER_SERVICE_H_
