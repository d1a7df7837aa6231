#include "faultinject/hostile_traffic.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/dispatcher.grpc.pb.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// A dispatcher that knows the job "chaos" and answers every other call with UNIMPLEMENTED (the
// generated service's default) — a server that refuses nothing the way it should.
class CarelessDispatcher final : public Dispatcher::Service {
 public:
  grpc::Status GetStatus(grpc::ServerContext*, const GetStatusRequest*,
                         GetStatusResponse* response) override {
    JobState* job = response->mutable_state()->add_jobs();
    job->set_job_id(3);
    job->set_name("chaos");
    job->set_dataset_id("d");
    job->set_epochs_started(1);
    return grpc::Status::OK;
  }
};

TEST(HostileTrafficTest, WrongAnswersAreViolationsNamingTheRequest) {
  CarelessDispatcher service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  HostileTrafficOptions options;
  options.dispatcher_address = absl::StrCat("127.0.0.1:", port);
  options.worker_addresses = [] { return std::vector<std::string>(); };
  options.credentials = grpc::InsecureChannelCredentials();
  options.job_name = "chaos";
  options.seed = 5;
  options.interval_ms = 1;
  HostileTraffic traffic(options);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const HostileTrafficReport report = traffic.Stop();
  server->Shutdown();

  int64_t sent = 0;
  for (const auto& [kind, n] : report.sent) sent += n;
  EXPECT_GE(sent, 20) << "seed 5";
  EXPECT_EQ(report.unreachable, 0) << "seed 5";
  // Every refusal came with the wrong code (UNIMPLEMENTED), and no job could be opened.
  EXPECT_EQ(report.violation_count, sent) << "seed 5";
  EXPECT_EQ(report.abandoned_jobs, 0) << "seed 5";
  ASSERT_FALSE(report.violations.empty());
  EXPECT_LE(report.violations.size(), 20u);
  EXPECT_THAT(report.violations.front(), HasSubstr("another code")) << "seed 5";
}

}  // namespace
}  // namespace granary
