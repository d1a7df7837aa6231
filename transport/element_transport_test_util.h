// For the element transports' tests: element images, and a worker in this process whose
// Worker.GetElements answers from a list of images through an ElementServer, as WorkerImpl does.
#ifndef GRANARY_TRANSPORT_ELEMENT_TRANSPORT_TEST_UTIL_H_
#define GRANARY_TRANSPORT_ELEMENT_TRANSPORT_TEST_UTIL_H_

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/method_handler.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "transport/element_channel.h"
#include "transport/element_image.h"
#include "transport/element_server.h"

namespace granary::testing {

// An element image of one DT_UINT8 tensor of `size` bytes, each `fill`, in a buffer of `pool`.
inline BufferRef FilledImage(size_t size, char fill, BufferPool* pool) {
  const ImageLayout layout({{DT_UINT8, {static_cast<int64_t>(size)}}}, 1, 2);
  auto buffer = pool->Allocate(layout.size());
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  layout.WriteFraming((*buffer)->data());
  std::memset((*buffer)->data() + layout.content_offset(0), fill, size);
  return *buffer;
}

// Every element from index 0 on (up to 64 MiB), fetched through `channel`, compressed as asked.
inline ReceivedReply FetchAll(ElementChannel& channel, Compression compression) {
  GetElementsRequest request;
  request.set_max_bytes(int64_t{64} << 20);
  request.set_compression(compression);
  grpc::ClientContext context;
  ReceivedReply reply;
  EXPECT_TRUE(channel.Fetch(&context, request, &reply).ok());
  EXPECT_TRUE(reply.malformed.ok()) << reply.malformed;
  return reply;
}

// Serves Worker.GetElements in this process: answers `request` with the images from
// request.from_index() on (at least one, up to max_bytes), prepared by `server`.
class InProcessWorker final : public grpc::Service {
 public:
  InProcessWorker(ElementServer* server, std::vector<BufferRef> images)
      : server_(server), images_(std::move(images)) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        "/granary.Worker/GetElements", grpc::internal::RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<InProcessWorker, GetElementsRequest, ElementsReply>(
            [](InProcessWorker* worker, grpc::ServerContext*, const GetElementsRequest* request,
               ElementsReply* reply) { return worker->GetElements(*request, reply); },
            this)));
    grpc::ServerBuilder builder;
    builder.RegisterService(this);
    grpc_server_ = builder.BuildAndStart();
  }
  ~InProcessWorker() override { grpc_server_->Shutdown(); }

  std::shared_ptr<grpc::Channel> Channel() {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    return grpc_server_->InProcessChannel(args);
  }
  // What the last answer's Prepare said carried it.
  std::string last_transport() const {
    absl::MutexLock lock(&mu_);
    return last_transport_;
  }

 private:
  grpc::Status GetElements(const GetElementsRequest& request, ElementsReply* reply) {
    if (!CheckElementsRequest(request).ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad request");
    }
    int64_t bytes = 0;
    for (size_t i = static_cast<size_t>(request.from_index());
         i < images_.size() && (reply->elements.empty() || bytes < request.max_bytes()); ++i) {
      ReplyElement e;
      e.index = static_cast<int64_t>(i);
      e.image = images_[i];
      bytes += static_cast<int64_t>(e.image->size());
      reply->elements.push_back(std::move(e));
    }
    reply->end_of_task = request.from_index() + static_cast<int64_t>(reply->elements.size()) ==
                         static_cast<int64_t>(images_.size());
    reply->num_elements = static_cast<int64_t>(images_.size());
    const char* transport = server_->Prepare(request, reply);
    absl::MutexLock lock(&mu_);
    last_transport_ = transport;
    return grpc::Status::OK;
  }

  ElementServer* const server_;
  const std::vector<BufferRef> images_;
  mutable absl::Mutex mu_;
  std::string last_transport_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::Server> grpc_server_;
};

}  // namespace granary::testing

#endif  // GRANARY_TRANSPORT_ELEMENT_TRANSPORT_TEST_UTIL_H_
