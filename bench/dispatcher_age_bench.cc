// Does the dispatcher slow down with age? For each --finished_jobs count, a DispatcherImpl (real
// RocksDB journal) is filled with that many finished jobs — each started, its one task leased its
// split, finished and read to its end by its consumer, all on one worker, none retired — and
// then, next to one running job, the two RPCs every worker and trainer makes all the time are
// timed: a worker heartbeat, and a GetSplits that leases a new split (one journaled record).
// The headlines are their median latencies at the most jobs over those at the fewest (target
// <= 1.2: flat). A last phase writes a snapshot every 50 records while heartbeats are timed, and
// reports the slowest heartbeat: the snapshot of the largest state must not stall RPCs.
//
//   bench/dispatcher_age_bench [--finished_jobs 10,10000] [--calls 2000] [--dir D]
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_report.h"
#include "bench/sample_stats.h"
#include "common/status_macros.h"
#include "dispatcher/dispatcher_impl.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/spec/builtin_declarations.h"

ABSL_FLAG(std::vector<std::string>, finished_jobs, (std::vector<std::string>{"10", "10000"}),
          "Numbers of finished jobs the dispatcher holds when it is timed.");
ABSL_FLAG(int, calls, 2000, "Timed calls of each RPC per state.");
ABSL_FLAG(std::string, dir, "/tmp/granary_dispatcher_age_bench", "Scratch directory (wiped).");

namespace granary {
namespace {

constexpr int kSetupThreads = 16;
constexpr char kWorker[] = "worker-0";

absl::StatusOr<std::string> RegisterRange(DispatcherImpl& impl, int64_t stop) {
  ASSIGN_OR_RETURN(
      PipelineDef def,
      ParsePipelineJson(absl::StrCat(R"({"source": {"type": "range", "params": )", R"({"stop": )",
                                     stop, R"(, "elements_per_split": 10}}})"),
                        "range.json"));
  RegisterDatasetRequest request;
  *request.mutable_pipeline() = def;
  RegisterDatasetResponse response;
  RETURN_IF_ERROR(impl.RegisterDataset(request, &response));
  return response.dataset_id();
}

// Creates a job over `dataset` (1 consumer, 1 slot) and starts its epoch 0; returns its task.
absl::StatusOr<int64_t> StartJob(DispatcherImpl& impl, const std::string& dataset) {
  GetOrCreateJobRequest create;
  create.set_dataset_id(dataset);
  create.mutable_options()->set_num_consumers(1);
  create.mutable_options()->set_num_worker_slots(1);
  GetOrCreateJobResponse job;
  RETURN_IF_ERROR(impl.GetOrCreateJob(create, &job));
  StartEpochRequest start;
  start.set_job_id(job.job_id());
  StartEpochResponse started;
  RETURN_IF_ERROR(impl.StartEpoch(start, &started));
  ClientHeartbeatRequest hb;
  hb.set_job_id(job.job_id());
  ClientHeartbeatResponse tasks;
  RETURN_IF_ERROR(impl.ClientHeartbeat(hb, &tasks));
  if (tasks.tasks_size() != 1) return absl::InternalError("expected one task");
  return tasks.tasks(0).task_id();
}

// One finished job: its task leased its one split and finished (its consumer reads it later).
absl::Status FinishedJob(DispatcherImpl& impl, const std::string& dataset) {
  ASSIGN_OR_RETURN(int64_t task, StartJob(impl, dataset));
  GetSplitsRequest lease;
  lease.set_task_id(task);
  lease.set_max(1);
  GetSplitsResponse splits;
  RETURN_IF_ERROR(impl.GetSplits(lease, &splits));
  TaskFinishedRequest finished;
  finished.set_task_id(task);
  finished.set_generation(1);
  finished.set_num_elements(10);
  TaskFinishedResponse ignored;
  return impl.TaskFinished(finished, &ignored);
}

struct Timings {
  std::vector<double> heartbeat_us, lease_us;
  double slowest_heartbeat_during_snapshots_ms = 0;
};

absl::StatusOr<Timings> Measure(const std::string& journal_dir, int64_t finished_jobs, int calls) {
  const PipelineRegistries registries = BuiltinDeclarations();
  DispatcherOptions options;
  options.journal_dir = journal_dir;
  options.snapshot_every = 1 << 30;
  options.worker_timeout_ms = 3600 * 1000;
  options.job_retention_ms = int64_t{24} * 3600 * 1000;  // Nothing is retired.
  options.registries = &registries;
  ASSIGN_OR_RETURN(std::unique_ptr<DispatcherImpl> impl, DispatcherImpl::Open(options));
  RegisterWorkerRequest worker;
  worker.set_worker_id(kWorker);
  worker.set_address("127.0.0.1:1");
  RegisterWorkerResponse incarnation;
  RETURN_IF_ERROR(impl->RegisterWorker(worker, &incarnation));
  ASSIGN_OR_RETURN(const std::string small, RegisterRange(*impl, 10));
  ASSIGN_OR_RETURN(const std::string large, RegisterRange(*impl, 10 * (int64_t{calls} * 2 + 10)));

  // Finished jobs, from several threads so that group commit keeps the set-up short.
  std::atomic<int64_t> next{0};
  absl::Mutex mu;
  absl::Status failure;
  std::vector<std::thread> threads;
  for (int t = 0; t < kSetupThreads; ++t) {
    threads.emplace_back([&] {
      while (next.fetch_add(1) < finished_jobs) {
        if (absl::Status s = FinishedJob(*impl, small); !s.ok()) {
          absl::MutexLock lock(&mu);
          failure.Update(s);
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  RETURN_IF_ERROR(failure);
  // Every finished task read to its end, so that heartbeats list only the running job's task.
  GetStatusResponse status;
  RETURN_IF_ERROR(impl->GetStatus({}, &status));
  for (const TaskState& task : status.state().tasks()) {
    ClientHeartbeatRequest read;
    read.set_job_id(task.job_id());
    (*read.mutable_next_index())[task.task_id()] = task.num_elements();
    ClientHeartbeatResponse ignored;
    RETURN_IF_ERROR(impl->ClientHeartbeat(read, &ignored));
  }

  ASSIGN_OR_RETURN(const int64_t running, StartJob(*impl, large));
  Timings timings;
  WorkerHeartbeatRequest heartbeat;
  heartbeat.set_worker_id(kWorker);
  heartbeat.set_incarnation(incarnation.incarnation());
  int64_t leased = 0;
  for (int i = 0; i < calls; ++i) {
    WorkerHeartbeatResponse tasks;
    absl::Time start = absl::Now();
    RETURN_IF_ERROR(impl->WorkerHeartbeat(heartbeat, &tasks));
    timings.heartbeat_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    if (tasks.tasks_size() != 1) {
      return absl::InternalError(absl::StrCat("the heartbeat listed ", tasks.tasks_size(),
                                              " tasks, expected the running one"));
    }
    GetSplitsRequest lease;
    lease.set_task_id(running);
    lease.set_from_seq(leased);
    lease.set_max(1);
    GetSplitsResponse splits;
    start = absl::Now();
    RETURN_IF_ERROR(impl->GetSplits(lease, &splits));
    timings.lease_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    leased += splits.splits_size();
  }
  impl.reset();

  // Snapshots of this state every 50 records, while another thread times heartbeats.
  options.snapshot_every = 50;
  ASSIGN_OR_RETURN(impl, DispatcherImpl::Open(options));
  RETURN_IF_ERROR(impl->RegisterWorker(worker, &incarnation));
  heartbeat.set_incarnation(incarnation.incarnation());
  std::atomic<bool> leasing{true};
  std::atomic<double> slowest_ms{0};
  std::thread timer([&] {
    while (leasing.load()) {
      WorkerHeartbeatResponse tasks;
      const absl::Time start = absl::Now();
      if (!impl->WorkerHeartbeat(heartbeat, &tasks).ok()) continue;
      const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      if (ms > slowest_ms.load()) slowest_ms.store(ms);
    }
  });
  absl::Status leases;
  for (int i = 0; i < 200 && leases.ok(); ++i) {
    GetSplitsRequest lease;
    lease.set_task_id(running);
    lease.set_from_seq(leased);
    lease.set_max(1);
    GetSplitsResponse splits;
    leases = impl->GetSplits(lease, &splits);
    leased += splits.splits_size();
  }
  leasing.store(false);
  timer.join();
  RETURN_IF_ERROR(leases);
  timings.slowest_heartbeat_during_snapshots_ms = slowest_ms.load();
  return timings;
}

absl::Status Run() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const bool quick = QuickBench();
  const int calls = quick ? 100 : absl::GetFlag(FLAGS_calls);
  const std::vector<std::string> counts =
      quick ? std::vector<std::string>{"10", "200"} : absl::GetFlag(FLAGS_finished_jobs);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  BenchReport report("dispatcher_age",
                     "Dispatcher RPC latency by the number of finished jobs it holds", 1);
  std::vector<Timings> all;
  for (const std::string& count : counts) {
    const int64_t jobs = std::stoll(count);
    ASSIGN_OR_RETURN(Timings t, Measure(absl::StrCat(dir, "/journal-", jobs), jobs, calls));
    report.AddSeries(absl::StrCat("worker heartbeat, ", jobs, " finished jobs"), "us",
                     t.heartbeat_us, BenchPoint{"worker heartbeat", static_cast<double>(jobs)});
    report.AddSeries(absl::StrCat("lease a split, ", jobs, " finished jobs"), "us", t.lease_us,
                     BenchPoint{"lease a split", static_cast<double>(jobs)});
    report.AddHeadline(
        absl::StrCat("slowest heartbeat while snapshots are written, ", jobs, " finished jobs"),
        t.slowest_heartbeat_during_snapshots_ms, "ms");
    all.push_back(std::move(t));
  }
  const std::string span = absl::StrCat(counts.back(), " vs ", counts.front(), " finished jobs");
  report.AddHeadline(absl::StrCat("heartbeat latency, ", span),
                     Median(all.back().heartbeat_us) / Median(all.front().heartbeat_us), "x",
                     BenchTarget::AtMost(1.2));
  report.AddHeadline(absl::StrCat("lease latency, ", span),
                     Median(all.back().lease_us) / Median(all.front().lease_us), "x",
                     BenchTarget::AtMost(1.2));
  report.AddNote(
      "In-process DispatcherImpl over a RocksDB journal in --dir (fsync per group commit); every "
      "finished job's task ran on the one worker timed, the worst case for a scan by worker.");
  std::filesystem::remove_all(dir);
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "dispatcher_age_bench", granary::Run);
}
