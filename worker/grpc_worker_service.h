// The gRPC face of the worker: forwards to WorkerImpl and translates the status.
#ifndef GRANARY_WORKER_GRPC_WORKER_SERVICE_H_
#define GRANARY_WORKER_GRPC_WORKER_SERVICE_H_

#include <atomic>

#include "proto/worker.grpc.pb.h"
#include "worker/worker_impl.h"

namespace granary {

// Thread-safe. Answers UNAVAILABLE until set_impl: a worker listens before it registers (the
// address it registers must already answer). The impl must outlive its use here.
class GrpcWorkerService final : public Worker::Service {
 public:
  void set_impl(WorkerImpl* impl) { impl_ = impl; }

  grpc::Status GetElements(grpc::ServerContext*, const GetElementsRequest* request,
                           GetElementsResponse* response) override;
  grpc::Status GetWorkerStatus(grpc::ServerContext*, const GetWorkerStatusRequest* request,
                               GetWorkerStatusResponse* response) override;

 private:
  std::atomic<WorkerImpl*> impl_{nullptr};
};

}  // namespace granary

#endif  // GRANARY_WORKER_GRPC_WORKER_SERVICE_H_
