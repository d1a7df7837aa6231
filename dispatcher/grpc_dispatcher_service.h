// The gRPC face of the dispatcher: each RPC forwards to DispatcherImpl and translates the
// status. No logic lives here (DESIGN.md §1: dispatcher logic never includes gRPC headers).
#ifndef GRANARY_DISPATCHER_GRPC_DISPATCHER_SERVICE_H_
#define GRANARY_DISPATCHER_GRPC_DISPATCHER_SERVICE_H_

#include "dispatcher/dispatcher_impl.h"
#include "proto/dispatcher.grpc.pb.h"

namespace granary {

// Thread-safe. `impl` must outlive the service.
class GrpcDispatcherService final : public Dispatcher::Service {
 public:
  explicit GrpcDispatcherService(DispatcherImpl* impl) : impl_(impl) {}

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
  grpc::Status ClientHeartbeat(grpc::ServerContext*, const ClientHeartbeatRequest* request,
                               ClientHeartbeatResponse* response) override;
  grpc::Status GetSplits(grpc::ServerContext*, const GetSplitsRequest* request,
                         GetSplitsResponse* response) override;
  grpc::Status TaskFinished(grpc::ServerContext*, const TaskFinishedRequest* request,
                            TaskFinishedResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext*, const GetStatusRequest* request,
                         GetStatusResponse* response) override;

 private:
  DispatcherImpl* const impl_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_GRPC_DISPATCHER_SERVICE_H_
