// DispatcherConnection: the worker's calls to the dispatcher, each with a deadline. The worker
// logic (TaskRunner, WorkerImpl) sees only this interface, so tests can also give it a
// dispatcher in the same process. Thread-safe.
#ifndef GRANARY_WORKER_DISPATCHER_CONNECTION_H_
#define GRANARY_WORKER_DISPATCHER_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "proto/dispatcher.pb.h"

namespace granary {

class DispatcherConnection {
 public:
  virtual ~DispatcherConnection() = default;
  virtual absl::StatusOr<RegisterWorkerResponse> RegisterWorker(
      const RegisterWorkerRequest& request) = 0;
  virtual absl::StatusOr<WorkerHeartbeatResponse> WorkerHeartbeat(
      const WorkerHeartbeatRequest& request) = 0;
  virtual absl::StatusOr<GetSplitsResponse> GetSplits(const GetSplitsRequest& request) = 0;
  virtual absl::Status TaskFinished(const TaskFinishedRequest& request) = 0;
  virtual absl::StatusOr<RecomputeCacheChunkResponse> RecomputeCacheChunk(
      const RecomputeCacheChunkRequest& request) = 0;
  virtual absl::StatusOr<ReportCacheProfileResponse> ReportCacheProfile(
      const ReportCacheProfileRequest& request) = 0;
};

// A connection over gRPC to the dispatcher at `addresses` — one host:port, or a replicated
// dispatcher's replicas separated by commas, whose redirects to the leader it follows
// (common/dispatcher_targets.h) — with `credentials` (the worker's certificate, for mutual
// TLS); each call has `timeout_ms`. InvalidArgument naming --dispatcher for a malformed list.
absl::StatusOr<std::unique_ptr<DispatcherConnection>> NewGrpcDispatcherConnection(
    const std::string& addresses, std::shared_ptr<grpc::ChannelCredentials> credentials,
    int timeout_ms);

}  // namespace granary

#endif  // GRANARY_WORKER_DISPATCHER_CONNECTION_H_
