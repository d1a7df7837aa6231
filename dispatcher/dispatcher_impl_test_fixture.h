// DispatcherImplTest: a DispatcherImpl over a real RocksDB journal in a temporary directory,
// with a manual clock, and the RPC helpers the dispatcher's tests share
// (dispatcher_impl_test.cc, dispatcher_impl_requests_test.cc, and through
// cache/cache_coordinator_test_fixture.h the caching jobs' tests).
#ifndef GRANARY_DISPATCHER_DISPATCHER_IMPL_TEST_FIXTURE_H_
#define GRANARY_DISPATCHER_DISPATCHER_IMPL_TEST_FIXTURE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/cache_gc.h"
#include "cache/cache_op_declarations.h"
#include "common/deterministic_serialization.h"
#include "common/failpoint.h"
#include "testing/manual_clock_env.h"
#include "testing/scoped_temp_dir.h"
#include "common/status_macros.h"
#include "dispatcher/dispatcher_impl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/exposition_parser.h"
#include "cache/cache_policy.h"
#include "pipeline/spec/pipeline_spec.h"
#include "pipeline/pipeline_loader.h"

namespace granary {

constexpr int64_t kTimeoutMs = 1000;
constexpr int64_t kRetentionMs = 60000;

class DispatcherImplTest : public ::testing::Test {
 protected:
  void Open(int64_t snapshot_every = 10000, const std::string& cache_root = "") {
    impl_.reset();
    auto impl = DispatcherImpl::Open(Options(snapshot_every, cache_root));
    ASSERT_TRUE(impl.ok()) << impl.status();
    impl_ = std::move(impl).value();
  }
  DispatcherOptions Options(int64_t snapshot_every = 10000, const std::string& cache_root = "") {
    DispatcherOptions options;
    options.journal_dir = dir_.path() + "/journal";
    options.snapshot_every = snapshot_every;
    options.cache_root = cache_root;
    options.cache_capacity_bytes = cache_capacity_bytes_;
    options.cache_wait_ms = cache_wait_ms_;
    // The failure detector's own thread polls every timeout/4 of the machine's time, but this
    // test's clock only moves when the test says so.
    options.worker_timeout_ms = kTimeoutMs;
    options.job_retention_ms = kRetentionMs;
    options.env = &clock_;
    options.registries = &registries_;
    options.check_invariants = true;
    options.metrics = &metrics_;
    // Some tests register pipelines larger than a gRPC message, as no client can.
    options.limits.pipeline_bytes = 64 << 20;
    return options;
  }

  std::string ClusterId() {
    GetStatusResponse status;
    EXPECT_TRUE(impl_->GetStatus({}, &status).ok());
    return status.state().cluster_id();
  }

  std::string State() {
    GetStatusResponse status;
    EXPECT_TRUE(impl_->GetStatus({}, &status).ok());
    return SerializeDeterministically(status.state());
  }

  std::string RegisterRangeDataset(int64_t stop, int64_t per_split) {
    auto def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "range", "params": {"stop": )", stop,
                     R"(, "elements_per_split": )", per_split, R"(, "shuffle_splits": true}}})"),
        "range.json");
    EXPECT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    EXPECT_TRUE(impl_->RegisterDataset(request, &response).ok());
    return response.dataset_id();
  }

  // `more_options`, if given, sets options besides these.
  int64_t CreateJob(const std::string& dataset, const std::string& name, int consumers = 1,
                    int slots = 0, const std::function<void(JobOptions*)>& more_options = nullptr) {
    GetOrCreateJobRequest request;
    request.set_dataset_id(dataset);
    request.set_name(name);
    request.mutable_options()->set_seed(3);
    request.mutable_options()->set_num_consumers(consumers);
    request.mutable_options()->set_num_worker_slots(slots);
    if (more_options) more_options(request.mutable_options());
    GetOrCreateJobResponse response;
    const absl::Status status = impl_->GetOrCreateJob(request, &response);
    EXPECT_TRUE(status.ok()) << status;
    return response.job_id();
  }

  absl::Status StartEpoch(int64_t job, int64_t epoch) {
    StartEpochRequest request;
    request.set_job_id(job);
    request.set_epoch(epoch);
    StartEpochResponse response;
    return impl_->StartEpoch(request, &response);
  }

  int64_t RegisterWorker(const std::string& id, bool standby = false) {
    RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_address(id + ".local:7000");
    request.set_standby(standby);
    RegisterWorkerResponse response;
    EXPECT_TRUE(impl_->RegisterWorker(request, &response).ok());
    return response.incarnation();
  }

  absl::StatusOr<GetSplitsResponse> Splits(int64_t task, int64_t from, int64_t max) {
    GetSplitsRequest request;
    request.set_task_id(task);
    request.set_from_seq(from);
    request.set_max(max);
    GetSplitsResponse response;
    absl::Status status = impl_->GetSplits(request, &response);
    if (!status.ok()) return status;
    return response;
  }

  // Heartbeats every registered worker except `silent`, moves the clock past the timeout and
  // runs the failure detector.
  void LoseWorker(const std::string& silent) {
    clock_.AdvanceMicros(kTimeoutMs * 1000 + 1);
    GetStatusResponse status;
    ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
    for (const WorkerState& w : status.state().workers()) {
      if (w.worker_id() == silent || w.lost()) continue;
      WorkerHeartbeatRequest hb;
      hb.set_worker_id(w.worker_id());
      hb.set_incarnation(w.incarnation());
      WorkerHeartbeatResponse ignored;
      ASSERT_TRUE(impl_->WorkerHeartbeat(hb, &ignored).ok());
    }
    ASSERT_TRUE(impl_->CheckLiveness().ok());
  }

  testing::ScopedTempDir dir_;
  ManualClockEnv clock_{Env::Default()};
  // What the dispatcher command gives it: declarations, no op or UDF implementation.
  PipelineRegistries registries_ = PipelineDeclarationsWithCache();
  // DispatcherOptions.cache_capacity_bytes and cache_wait_ms of the next Open (short: a
  // StartEpoch waiting for a cache decision or Put).
  int64_t cache_capacity_bytes_ = 0;
  int64_t cache_wait_ms_ = 20;
  // Where the journal counts (DispatcherOptions.metrics); outlives impl_.
  MetricRegistry metrics_;
  std::unique_ptr<DispatcherImpl> impl_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_DISPATCHER_IMPL_TEST_FIXTURE_H_
