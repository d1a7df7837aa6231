// DispatcherConnection over a gRPC channel.
#include <chrono>

#include "common/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/dispatcher.grpc.pb.h"
#include "worker/dispatcher_connection.h"

namespace granary {
namespace {

class GrpcDispatcherConnection : public DispatcherConnection {
 public:
  GrpcDispatcherConnection(const std::string& address,
                           std::shared_ptr<grpc::ChannelCredentials> credentials, int timeout_ms)
      : stub_(Dispatcher::NewStub(
            grpc::CreateCustomChannel(address, std::move(credentials), ChannelArguments()))),
        timeout_ms_(timeout_ms) {}

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
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_));
    Response response;
    const grpc::Status status = (stub_.get()->*method)(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  // Room for the largest heartbeat answer (a pipeline budget of kMaxHeartbeatPipelineBytes,
  // one pipeline larger than that, and the task definitions).
  static grpc::ChannelArguments ChannelArguments() {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    return args;
  }

  const std::unique_ptr<Dispatcher::Stub> stub_;
  const int timeout_ms_;
};

}  // namespace

std::unique_ptr<DispatcherConnection> NewGrpcDispatcherConnection(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
    int timeout_ms) {
  return std::make_unique<GrpcDispatcherConnection>(address, std::move(credentials), timeout_ms);
}

}  // namespace granary
