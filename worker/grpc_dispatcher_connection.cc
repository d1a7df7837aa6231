// DispatcherConnection over a gRPC channel.
#include <chrono>

#include "common/dispatcher_targets.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/security/credentials.h"
#include "proto/dispatcher.grpc.pb.h"
#include "worker/dispatcher_connection.h"

namespace granary {
namespace {

class GrpcDispatcherConnection : public DispatcherConnection {
 public:
  GrpcDispatcherConnection(std::unique_ptr<DispatcherTargets> targets, int timeout_ms)
      : targets_(std::move(targets)), timeout_ms_(timeout_ms) {}

  absl::StatusOr<RegisterWorkerResponse> RegisterWorker(
      const RegisterWorkerRequest& request) override {
    return Call(&Dispatcher::Stub::RegisterWorker, request);
  }
  absl::StatusOr<WorkerHeartbeatResponse> WorkerHeartbeat(
      const WorkerHeartbeatRequest& request) override {
    return Call(&Dispatcher::Stub::WorkerHeartbeat, request);
  }
  absl::StatusOr<GetSplitsResponse> GetSplits(const GetSplitsRequest& request) override {
    return Call(&Dispatcher::Stub::GetSplits, request);
  }
  absl::Status TaskFinished(const TaskFinishedRequest& request) override {
    return Call(&Dispatcher::Stub::TaskFinished, request).status();
  }
  absl::StatusOr<RecomputeCacheChunkResponse> RecomputeCacheChunk(
      const RecomputeCacheChunkRequest& request) override {
    return Call(&Dispatcher::Stub::RecomputeCacheChunk, request);
  }
  absl::StatusOr<ReportCacheProfileResponse> ReportCacheProfile(
      const ReportCacheProfileRequest& request) override {
    return Call(&Dispatcher::Stub::ReportCacheProfile, request);
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (Dispatcher::Stub::*method)(grpc::ClientContext*,
                                                                         const Request&, Response*),
                                const Request& request) {
    Response response;
    const grpc::Status status = targets_->Call(
        [this] {
          auto context = std::make_unique<grpc::ClientContext>();
          context->set_deadline(std::chrono::system_clock::now() +
                                std::chrono::milliseconds(timeout_ms_));
          return context;
        },
        [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
          return (stub.*method)(context, request, &response);
        });
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  const std::unique_ptr<DispatcherTargets> targets_;
  const int timeout_ms_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DispatcherConnection>> NewGrpcDispatcherConnection(
    const std::string& addresses, std::shared_ptr<grpc::ChannelCredentials> credentials,
    int timeout_ms) {
  // Room for the largest heartbeat answer (a pipeline budget of kMaxHeartbeatPipelineBytes,
  // one pipeline larger than that, and the task definitions).
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  ASSIGN_OR_RETURN(
      std::unique_ptr<DispatcherTargets> targets,
      DispatcherTargets::Create(addresses, "--dispatcher", std::move(credentials), args));
  return std::make_unique<GrpcDispatcherConnection>(std::move(targets), timeout_ms);
}

}  // namespace granary
