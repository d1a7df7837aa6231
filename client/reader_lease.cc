#include "client/reader_lease.h"

#include <unistd.h>

#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace granary {

ReaderIdentity ReaderIdentity::New() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::StrFormat("%08x", random()));
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return {std::move(id), absl::StrCat(host[0] == '\0' ? "?" : host, ":", getpid())};
}

absl::StatusOr<std::shared_ptr<ReaderLease>> ReaderLease::Claim(
    std::shared_ptr<Connection> connection, int64_t job_id, int32_t consumer,
    const ReaderIdentity& reader, bool takeover) {
  std::shared_ptr<ReaderLease> lease(
      new ReaderLease(std::move(connection), job_id, consumer, reader));
  RETURN_IF_ERROR(lease->CallClaim(takeover));
  return lease;
}

absl::Status ReaderLease::Reclaim() { return CallClaim(/*takeover=*/false); }

absl::Status ReaderLease::CallClaim(bool takeover) {
  ClaimConsumerRequest request;
  request.set_job_id(job_id_);
  request.set_consumer(consumer_);
  request.set_reader_id(reader_.id);
  request.set_description(reader_.description);
  request.set_takeover(takeover);
  ClaimConsumerResponse response;
  grpc::Status rpc;
  int attempts = 0;
  // Unavailable also answers a claim of a consumer whose holder looks gone: asked again until
  // its lease expires.
  connection_->RepeatWhileUnreachable([&] {
    rpc = connection_->dispatcher().Call([&] { return connection_->DispatcherContext(); },
                                         [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
                                           return stub.ClaimConsumer(context, request, &response);
                                         });
    const bool again = rpc.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       rpc.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    // Said once, when a live holder would have answered by now (a few heartbeats).
    if (again && ++attempts == 4 &&
        rpc.error_message().find("lease expires") != std::string::npos) {
      LOG(INFO) << "waiting to read: " << rpc.error_message();
    }
    return again;
  });
  if (!rpc.ok()) {
    return Annotate(FromGrpcStatus(rpc),
                    absl::StrCat("claiming consumer ", consumer_, " of job ", job_id_));
  }
  generation_.store(response.generation());
  return absl::OkStatus();
}

ReaderLease::~ReaderLease() {
  ReleaseConsumerRequest request;
  request.set_job_id(job_id_);
  request.set_consumer(consumer_);
  request.set_reader_id(reader_.id);
  ReleaseConsumerResponse response;
  // Best effort and quick: a dispatcher that is down lets the lease expire instead.
  const grpc::Status rpc = connection_->dispatcher().Call(
      [&] {
        std::unique_ptr<grpc::ClientContext> context = connection_->DispatcherContext();
        context->set_wait_for_ready(false);
        context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
        return context;
      },
      [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
        return stub.ReleaseConsumer(context, request, &response);
      });
  if (!rpc.ok()) {
    VLOG(1) << "releasing consumer " << consumer_ << " of job " << job_id_ << ": "
            << rpc.error_message();
  }
}

}  // namespace granary
