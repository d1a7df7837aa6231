#include "faultinject/hostile_traffic.h"

#include <chrono>
#include <limits>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "proto/dispatcher.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace granary {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
// Far from any id a short run reaches.
constexpr int64_t kBogusTaskId = int64_t{1} << 40;
// At most one job opened and abandoned per this long: each keeps a task on a worker until the
// dispatcher's retention drops it.
constexpr auto kAbandonEvery = std::chrono::seconds(2);

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return context;
}

bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// "" when `s` is a refusal with one of `codes` whose message names each of `names`; else what
// is wrong with it.
std::string ExpectRefusal(const grpc::Status& s, std::vector<grpc::StatusCode> codes,
                          const std::vector<std::string>& names) {
  if (s.ok()) return "accepted";
  bool code_ok = false;
  for (grpc::StatusCode code : codes) code_ok = code_ok || s.error_code() == code;
  std::string wrong;
  if (!code_ok) wrong = "another code";
  for (const std::string& name : names) {
    if (s.error_message().find(name) == std::string::npos) {
      absl::StrAppend(&wrong, wrong.empty() ? "" : ", ", "no '", name, "' in the message");
    }
  }
  if (wrong.empty()) return "";
  return absl::StrCat(wrong, ": ", s.error_code(), " ", s.error_message().substr(0, 300));
}

// The run's job as the dispatcher sees it now.
struct Target {
  int64_t job_id = -1;
  std::string dataset_id;
  int64_t epoch = -1;    // The newest epoch started.
  int64_t task_id = -1;  // A task of that epoch, its consumer and its generation.
  int32_t consumer = 0;
  int64_t generation = 0;
};

}  // namespace

HostileTraffic::HostileTraffic(HostileTrafficOptions options)
    : options_(std::move(options)), thread_([this] { Loop(); }) {}

HostileTraffic::~HostileTraffic() { Stop(); }

HostileTrafficReport HostileTraffic::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mutex_);
  return report_;
}

void HostileTraffic::Record(const std::string& kind, const std::string& violation,
                            bool unreachable) {
  absl::MutexLock lock(&mutex_);
  ++report_.sent[kind];
  if (unreachable) {
    ++report_.unreachable;
  } else if (!violation.empty()) {
    ++report_.violation_count;
    if (report_.violations.size() < 20) report_.violations.push_back(kind + ": " + violation);
  }
}

void HostileTraffic::Loop() {
  auto dispatcher =
      Dispatcher::NewStub(grpc::CreateChannel(options_.dispatcher_address, options_.credentials));
  std::mt19937_64 draws(options_.seed);
  auto last_abandoned = std::chrono::steady_clock::time_point();
  int64_t abandoned = 0;
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(options_.interval_ms))) {
    Target target;
    {
      GetStatusRequest request;
      request.set_summary(true);
      GetStatusResponse status;
      if (!dispatcher->GetStatus(Context().get(), request, &status).ok()) continue;
      for (const JobState& job : status.state().jobs()) {
        if (job.name() != options_.job_name) continue;
        target.job_id = job.job_id();
        target.dataset_id = job.dataset_id();
        target.epoch = job.epochs_started() - 1;
      }
      for (const TaskState& task : status.state().tasks()) {
        if (task.job_id() == target.job_id && task.epoch() == target.epoch) {
          target.task_id = task.task_id();
          target.consumer = task.consumer();
          target.generation = task.generation();
        }
      }
    }
    // The trainer has not opened its job or started its first epoch yet.
    if (target.job_id < 0 || target.epoch < 0) continue;

    std::string kind;
    grpc::Status s;
    std::string violation;
    const auto refused = [&](std::vector<grpc::StatusCode> codes, std::vector<std::string> names) {
      violation = ExpectRefusal(s, std::move(codes), names);
    };
    const bool may_abandon = std::chrono::steady_clock::now() - last_abandoned > kAbandonEvery;
    switch (draws() % (may_abandon ? 11 : 10)) {
      case 0: {
        kind = "GetOrCreateJob of 2^31-1 consumers x 2^31-1 slots";
        GetOrCreateJobRequest request;
        request.set_dataset_id(target.dataset_id);
        request.mutable_options()->set_num_consumers(kInt32Max);
        request.mutable_options()->set_num_worker_slots(kInt32Max);
        GetOrCreateJobResponse response;
        s = dispatcher->GetOrCreateJob(Context().get(), request, &response);
        refused({grpc::StatusCode::INVALID_ARGUMENT}, {"num_consumers", "2147483647"});
        break;
      }
      case 1: {
        kind = "GetOrCreateJob of an unknown dataset";
        GetOrCreateJobRequest request;
        request.set_dataset_id("hostile-no-such-dataset");
        request.mutable_options()->set_num_consumers(1);
        GetOrCreateJobResponse response;
        s = dispatcher->GetOrCreateJob(Context().get(), request, &response);
        refused({grpc::StatusCode::NOT_FOUND}, {"hostile-no-such-dataset"});
        break;
      }
      case 2: {
        kind = "StartEpoch INT64_MAX of the run's job";
        StartEpochRequest request;
        request.set_job_id(target.job_id);
        request.set_epoch(kInt64Max);
        StartEpochResponse response;
        s = dispatcher->StartEpoch(Context().get(), request, &response);
        refused({grpc::StatusCode::FAILED_PRECONDITION}, {std::to_string(kInt64Max)});
        break;
      }
      case 3: {
        kind = "ClientHeartbeat of the run's job naming a task of no job";
        ClientHeartbeatRequest request;
        request.set_job_id(target.job_id);
        request.set_epoch(target.epoch);
        (*request.mutable_next_index())[kBogusTaskId] = 5;
        ClientHeartbeatResponse response;
        s = dispatcher->ClientHeartbeat(Context().get(), request, &response);
        refused({grpc::StatusCode::INVALID_ARGUMENT}, {std::to_string(kBogusTaskId)});
        break;
      }
      case 4: {
        kind = "ClientHeartbeat of the run's job as consumer 7 (out of range)";
        ClientHeartbeatRequest request;
        request.set_job_id(target.job_id);
        request.set_epoch(target.epoch);
        request.set_consumer(7);
        ClientHeartbeatResponse response;
        s = dispatcher->ClientHeartbeat(Context().get(), request, &response);
        refused({grpc::StatusCode::INVALID_ARGUMENT}, {"7"});
        break;
      }
      case 5: {
        if (target.task_id < 0) continue;
        kind = "ClientHeartbeat of the run's task at index -1";
        ClientHeartbeatRequest request;
        request.set_job_id(target.job_id);
        request.set_epoch(target.epoch);
        request.set_consumer(target.consumer);
        (*request.mutable_next_index())[target.task_id] = -1;
        ClientHeartbeatResponse response;
        s = dispatcher->ClientHeartbeat(Context().get(), request, &response);
        refused({grpc::StatusCode::INVALID_ARGUMENT}, {std::to_string(target.task_id), "-1"});
        break;
      }
      case 6: {
        kind = "ClientHeartbeat of the run's job at epoch INT64_MAX";
        ClientHeartbeatRequest request;
        request.set_job_id(target.job_id);
        request.set_epoch(kInt64Max);
        ClientHeartbeatResponse response;
        s = dispatcher->ClientHeartbeat(Context().get(), request, &response);
        refused({grpc::StatusCode::NOT_FOUND}, {std::to_string(kInt64Max)});
        break;
      }
      case 7: {
        // A client speaking for a worker: refused by role before anything is looked up.
        kind = "GetSplits of the run's task by a client";
        GetSplitsRequest request;
        request.set_task_id(target.task_id < 0 ? kBogusTaskId : target.task_id);
        request.set_max(1);
        GetSplitsResponse response;
        s = dispatcher->GetSplits(Context().get(), request, &response);
        refused({grpc::StatusCode::PERMISSION_DENIED}, {});
        break;
      }
      case 8: {
        kind = "WorkerHeartbeat of a stranger by a client";
        WorkerHeartbeatRequest request;
        request.set_worker_id("hostile-stranger");
        WorkerHeartbeatResponse response;
        s = dispatcher->WorkerHeartbeat(Context().get(), request, &response);
        refused({grpc::StatusCode::PERMISSION_DENIED}, {});
        break;
      }
      case 9: {
        const std::vector<std::string> workers = options_.worker_addresses();
        if (workers.empty() || target.task_id < 0) continue;
        // Without the dispatcher's grant for that generation: refused by every worker, the
        // one running the task included.
        kind = "GetElements of the run's task at another generation, without a grant";
        auto worker = Worker::NewStub(
            grpc::CreateChannel(workers[draws() % workers.size()], options_.credentials));
        GetElementsRequest request;
        request.set_task_id(target.task_id);
        request.set_generation(target.generation + 1000);
        request.set_from_index(0);
        request.set_max_bytes(kInt64Max);
        GetElementsResponse response;
        s = worker->GetElements(Context().get(), request, &response);
        refused({grpc::StatusCode::UNAUTHENTICATED}, {std::to_string(target.task_id)});
        break;
      }
      default: {
        // A job of its own on the run's dataset, started and heartbeated once, then abandoned:
        // its task takes a worker's slot and memory until retention drops the job.
        kind = "a job opened, started and abandoned";
        last_abandoned = std::chrono::steady_clock::now();
        GetOrCreateJobRequest request;
        request.set_dataset_id(target.dataset_id);
        request.set_name(absl::StrCat("hostile-abandoned-", abandoned++));
        request.mutable_options()->set_num_consumers(1);
        request.mutable_options()->set_num_worker_slots(1);
        GetOrCreateJobResponse job;
        s = dispatcher->GetOrCreateJob(Context().get(), request, &job);
        if (s.ok()) {
          StartEpochRequest start;
          start.set_job_id(job.job_id());
          StartEpochResponse started;
          s = dispatcher->StartEpoch(Context().get(), start, &started);
        }
        if (s.ok()) {
          ClientHeartbeatRequest heartbeat;
          heartbeat.set_job_id(job.job_id());
          ClientHeartbeatResponse tasks;
          s = dispatcher->ClientHeartbeat(Context().get(), heartbeat, &tasks);
        }
        if (!s.ok() && !Unreachable(s)) {
          violation = absl::StrCat("refused: ", s.error_code(), " ", s.error_message());
        }
        if (s.ok()) {
          absl::MutexLock lock(&mutex_);
          ++report_.abandoned_jobs;
        }
        break;
      }
    }
    Record(kind, violation, Unreachable(s));
  }
}

}  // namespace granary
