// WorkerImpl against an in-process dispatcher connection.
#include "worker/worker_impl.h"

#include <chrono>

#include "cache/cache_ops.h"
#include "testing/manual_clock_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/core/udf.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// A dispatcher that is never reachable; counts the registration attempts in `*register_calls`.
class UnreachableDispatcher : public DispatcherConnection {
 public:
  explicit UnreachableDispatcher(int* register_calls) : register_calls_(register_calls) {}
  absl::StatusOr<RegisterWorkerResponse> RegisterWorker(const RegisterWorkerRequest&) override {
    ++*register_calls_;
    return absl::UnavailableError("dispatcher down");
  }
  absl::StatusOr<WorkerHeartbeatResponse> WorkerHeartbeat(const WorkerHeartbeatRequest&) override {
    return absl::UnavailableError("dispatcher down");
  }
  absl::StatusOr<GetSplitsResponse> GetSplits(const GetSplitsRequest&) override {
    return absl::UnavailableError("dispatcher down");
  }
  absl::Status TaskFinished(const TaskFinishedRequest&) override {
    return absl::UnavailableError("dispatcher down");
  }
  absl::StatusOr<RecomputeCacheChunkResponse> RecomputeCacheChunk(
      const RecomputeCacheChunkRequest&) override {
    return absl::UnavailableError("dispatcher down");
  }
  absl::StatusOr<ReportCacheProfileResponse> ReportCacheProfile(
      const ReportCacheProfileRequest&) override {
    return absl::UnavailableError("dispatcher down");
  }

 private:
  int* const register_calls_;
};

// Issue 13, layering: the registration deadline and its retry back-off run on the Env's clock,
// so a minute of retries passes here without a minute of waiting.
TEST(WorkerImplTest, RegistrationGivesUpOnTheEnvClock) {
  ManualClockEnv env(Env::Default());
  const PipelineRegistries registries = PipelineRegistriesWithCache();
  WorkerOptions options;
  options.worker_id = "w";
  options.address = "127.0.0.1:1";
  options.registries = &registries;
  options.runner.env = &env;
  int register_calls = 0;
  const auto start = std::chrono::steady_clock::now();
  const uint64_t start_micros = env.NowMicros();
  absl::StatusOr<std::unique_ptr<WorkerImpl>> worker =
      WorkerImpl::Start(options, std::make_unique<UnreachableDispatcher>(&register_calls),
                        /*register_timeout_ms=*/60'000);
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(worker.status().message(), HasSubstr("registering with the dispatcher: gave up"));
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed.count(), 10.0) << "seconds: the back-off slept in real time";
  EXPECT_GE(env.NowMicros() - start_micros, 60'000'000u);
  EXPECT_GE(register_calls, 100) << "retried every 100 ms for a minute";
}

}  // namespace
}  // namespace granary
