// Scaling: throughput with 1 and 2 workers on this machine, and a model of 1-64 workers built
// from what each part of the service costs.
//
// Measured here:
//   - the CPU-heavy ResNet-style pipeline (256x256 JPEGs cropped to 224x224, batches of 128 by
//     default) through a real dispatcher and 2 workers (processes on 127.0.0.1), jobs on 1 and on
//     2 workers read through shared memory and on 1 worker read over TCP, and the same pipeline
//     in-process, interleaved: images/s, and the CPU seconds per image of the workers, the
//     client (this process) and the dispatcher, against the in-process pipeline's (issue 14's
//     targets: client <= 0.1x, worker <= 1.2x);
//   - the dispatcher's cost per split lease (GetSplits of one split, journaled with a real fsync,
//     8 workers leasing concurrently so that group commit works as in a cluster) and per worker
//     heartbeat, on a DispatcherImpl in this process.
// The model: n workers, each on a core of its own, produce n / (worker CPU s per image); one
// client core ingests 1 / (client CPU s per image); the dispatcher's core spends, per second,
// n * (heartbeats per s) * (s per heartbeat) + images/s / (images per split) * (s per lease).
// Predicted images/s = the least of the three. On this 2-core machine the measured points share
// two cores among every process, so they sit below the model's.
//
//   bench/scaling_bench [--images N] [--size S] [--repetitions R] [--dir D]
//                       [--images_per_split 1250] [--heartbeat_interval_ms 200]
#include <algorithm>
#include <atomic>
#include <cstdio>
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
#include "bench/bench_service.h"
#include "bench/bench_setup.h"
#include "bench/process_stats.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/status_macros.h"
#include "dispatcher/dispatcher_impl.h"
#include "granary/client.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline_loader.h"

ABSL_FLAG(int64_t, images_per_split, 1250,
          "Images per split in the model (an ImageNet TFRecord shard: 1.28M images / 1024 files).");
ABSL_FLAG(int64_t, heartbeat_interval_ms, 200, "Worker heartbeat interval in the model.");
ABSL_FLAG(int64_t, batch_size, 128, "Images per batch.");

namespace granary {
namespace {

constexpr int kLeasingWorkers = 8;

struct DispatcherCosts {
  double seconds_per_lease = 0;
  double seconds_per_heartbeat = 0;
};

// Leases `leases` one-split leases from kLeasingWorkers concurrent workers and times
// `heartbeats` heartbeats, on a fresh DispatcherImpl in `dir`.
absl::StatusOr<DispatcherCosts> MeasureDispatcher(const std::string& dir, int64_t leases,
                                                  int64_t heartbeats) {
  std::filesystem::remove_all(dir);
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  DispatcherOptions options;
  options.journal_dir = dir;
  options.registries = &registries;
  ASSIGN_OR_RETURN(std::unique_ptr<DispatcherImpl> impl, DispatcherImpl::Open(options));
  ASSIGN_OR_RETURN(
      PipelineDef def,
      ParsePipelineJson(absl::StrCat(R"({"source": {"type": "range", "params": )", R"({"stop": )",
                                     leases + kLeasingWorkers, R"(, "elements_per_split": 1}}})"),
                        "scaling_range.json"));
  RegisterDatasetRequest dataset;
  *dataset.mutable_pipeline() = def;
  RegisterDatasetResponse registered;
  RETURN_IF_ERROR(impl->RegisterDataset(dataset, &registered));
  std::vector<WorkerHeartbeatRequest> workers(kLeasingWorkers);
  for (int w = 0; w < kLeasingWorkers; ++w) {
    RegisterWorkerRequest request;
    request.set_worker_id(absl::StrCat("worker-", w));
    request.set_address(absl::StrCat("127.0.0.1:", 1000 + w));
    RegisterWorkerResponse response;
    RETURN_IF_ERROR(impl->RegisterWorker(request, &response));
    workers[w].set_worker_id(request.worker_id());
    workers[w].set_incarnation(response.incarnation());
  }
  GetOrCreateJobRequest job;
  job.set_dataset_id(registered.dataset_id());
  job.set_name("scaling");
  job.mutable_options()->set_num_worker_slots(kLeasingWorkers);
  GetOrCreateJobResponse created;
  RETURN_IF_ERROR(impl->GetOrCreateJob(job, &created));
  StartEpochRequest start;
  start.set_job_id(created.job_id());
  StartEpochResponse started;
  RETURN_IF_ERROR(impl->StartEpoch(start, &started));
  std::vector<int64_t> tasks;
  for (const WorkerHeartbeatRequest& worker : workers) {
    WorkerHeartbeatResponse response;
    RETURN_IF_ERROR(impl->WorkerHeartbeat(worker, &response));
    for (const TaskDef& task : response.tasks()) tasks.push_back(task.task_id());
  }
  if (tasks.empty()) return absl::InternalError("no task was assigned to the leasing workers");

  DispatcherCosts costs;
  absl::Mutex mu;
  absl::Status failure;
  std::atomic<int64_t> leased{0};
  std::vector<std::thread> threads;
  absl::Time begin = absl::Now();
  for (const int64_t task : tasks) {
    threads.emplace_back([&, task] {
      GetSplitsRequest request;
      request.set_task_id(task);
      request.set_max(1);
      for (int64_t seq = 0; leased.fetch_add(1) < leases; ++seq) {
        request.set_from_seq(seq);
        GetSplitsResponse response;
        absl::Status s = impl->GetSplits(request, &response);
        if (s.ok() && response.splits_size() != 1) {
          s = absl::InternalError(absl::StrCat("task ", task, " leased no split at ", seq));
        }
        if (!s.ok()) {
          absl::MutexLock lock(&mu);
          failure.Update(s);
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  RETURN_IF_ERROR(failure);
  costs.seconds_per_lease = absl::ToDoubleSeconds(absl::Now() - begin) / leases;
  begin = absl::Now();
  for (int64_t i = 0; i < heartbeats; ++i) {
    WorkerHeartbeatResponse response;
    RETURN_IF_ERROR(impl->WorkerHeartbeat(workers[i % workers.size()], &response));
  }
  costs.seconds_per_heartbeat = absl::ToDoubleSeconds(absl::Now() - begin) / heartbeats;
  return costs;
}

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t size = absl::GetFlag(FLAGS_size);
  const int reps = absl::GetFlag(FLAGS_repetitions);
  ASSIGN_OR_RETURN(PipelineDef def, ResnetPipelineFromFlags(env));
  SetOpParam(&def, "batch", "batch_size", absl::GetFlag(FLAGS_batch_size));
  ASSIGN_OR_RETURN(BenchService service,
                   StartBenchService(dir + "/cluster", def, {.cluster = {.workers = 2}}));
  const testing::LocalCluster& cluster = *service.cluster;
  // A second client of the same cluster that reads over TCP (the first maps the workers'
  // shared memory, as any client on their host does by default).
  ASSIGN_OR_RETURN(std::unique_ptr<Client> tcp_client,
                   Client::Connect({.dispatcher_address = cluster.dispatcher_address(),
                                    .shared_memory = false,
                                    .insecure = true}));
  ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> local,
                   Pipeline::Create(def, PipelineRegistries::WithBuiltins()));
  struct Config {
    int workers;
    std::string transport;
    std::unique_ptr<Job> job;
    std::vector<double> rates, worker_cpu, client_cpu, dispatcher_cpu;  // CPU s per image.
  };
  std::vector<Config> configs(3);
  for (int i = 0; i < 3; ++i) {
    Config& c = configs[i];
    c.workers = i == 1 ? 2 : 1;
    c.transport = i == 2 ? "tcp" : "shared memory";
    Client& client = i == 2 ? *tcp_client : *service.client;
    ASSIGN_OR_RETURN(c.job, client.OpenJob(service.dataset, {.name = absl::StrCat("scaling", i),
                                                             .seed = 1,
                                                             .num_worker_slots = c.workers}));
  }
  std::vector<double> local_cpu;  // In-process CPU s per image.
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up.
    {
      EpochRunOptions options;
      options.digest = false;
      int64_t rows = 0;
      options.on_element = [&rows](const Element& batch) { rows += batch.tensors[0].shape()[0]; };
      const double cpu_before = CpuSecondsOf();
      ASSIGN_OR_RETURN(EpochResult run, RunEpochInProcess(*local, 1, rep + 1, env, options));
      if (rep >= 0) local_cpu.push_back((CpuSecondsOf() - cpu_before) / rows);
    }
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + rep + 1) % configs.size()];
      const double worker_before =
          CpuSecondsOf(cluster.worker_pid(0)) + CpuSecondsOf(cluster.worker_pid(1));
      const double client_before = CpuSecondsOf();
      const double dispatcher_before = CpuSecondsOf(cluster.dispatcher_pid());
      ASSIGN_OR_RETURN(ServiceEpoch read, ReadServiceEpoch(*c.job, rep + 1));
      if (rep < 0) continue;
      const double rows = static_cast<double>(read.rows);
      c.rates.push_back(rows / read.seconds);
      c.worker_cpu.push_back((CpuSecondsOf(cluster.worker_pid(0)) +
                              CpuSecondsOf(cluster.worker_pid(1)) - worker_before) /
                             rows);
      c.client_cpu.push_back((CpuSecondsOf() - client_before) / rows);
      c.dispatcher_cpu.push_back((CpuSecondsOf(cluster.dispatcher_pid()) - dispatcher_before) /
                                 rows);
    }
  }
  const bool quick = QuickBench();
  ASSIGN_OR_RETURN(
      DispatcherCosts costs,
      MeasureDispatcher(dir + "/dispatcher_journal", quick ? 200 : 20000, quick ? 1000 : 100000));
  std::filesystem::remove_all(dir + "/dispatcher_journal");

  BenchReport report("scaling",
                     absl::StrCat("Scaling: ResNet-style pipeline at ", size, "x", size,
                                  ", measured on 1-2 workers, modelled for 1-64"),
                     reps);
  for (size_t i = 0; i < 2; ++i) {
    const Config& c = configs[i];
    report.AddSeries(absl::StrCat("measured, ", c.workers, " worker(s) on this machine"),
                     "images/s", c.rates,
                     BenchPoint{"measured (2 cores shared)", double(c.workers)});
  }
  report.AddSeries("in-process CPU per image", "ms", Scaled(local_cpu, 1e3));
  for (const Config& c : configs) {
    const std::string on = absl::StrCat(", ", c.workers, " worker(s), ", c.transport);
    if (c.transport == "tcp") report.AddSeries("measured" + on, "images/s", c.rates);
    report.AddSeries("worker CPU per image" + on, "ms", Scaled(c.worker_cpu, 1e3));
    report.AddSeries("client CPU per image" + on, "ms", Scaled(c.client_cpu, 1e3));
    report.AddSeries("dispatcher CPU per image" + on, "ms", Scaled(c.dispatcher_cpu, 1e3));
  }
  const double local_s = std::max(Median(local_cpu), 1e-6);  // (As client_s below.)
  report.AddHeadline("client CPU per image / in-process, shared memory",
                     Median(configs[0].client_cpu) / local_s, "x", BenchTarget::AtMost(0.1));
  report.AddHeadline("client CPU per image / in-process, tcp",
                     Median(configs[2].client_cpu) / local_s, "x", BenchTarget::AtMost(0.1));
  report.AddHeadline("worker CPU per image / in-process, shared memory",
                     Median(configs[0].worker_cpu) / local_s, "x", BenchTarget::AtMost(1.2));
  report.AddHeadline("worker CPU per image / in-process, tcp",
                     Median(configs[2].worker_cpu) / local_s, "x", BenchTarget::AtMost(1.2));
  const double worker_s = Median(configs[0].worker_cpu);
  // At least 1 us: a short epoch's client CPU can round to 0 clock ticks (/proc counts in
  // 10 ms), which would make the model's ingest limit infinite.
  const double client_s = std::max(Median(configs[0].client_cpu), 1e-6);
  const double images_per_split = absl::GetFlag(FLAGS_images_per_split);
  const double heartbeats_per_s = 1000.0 / absl::GetFlag(FLAGS_heartbeat_interval_ms);
  report.AddHeadline("dispatcher: time per split lease (8 concurrent workers, fsynced)",
                     costs.seconds_per_lease * 1e6, "us");
  report.AddHeadline("dispatcher: time per worker heartbeat", costs.seconds_per_heartbeat * 1e6,
                     "us");
  report.AddHeadline("model: one worker core", 1 / worker_s, "images/s");
  report.AddHeadline("model: one client core (ingest limit)", 1 / client_s, "images/s");
  for (const int n : {1, 2, 4, 8, 16, 32, 64}) {
    const double dispatcher_left = 1 - n * heartbeats_per_s * costs.seconds_per_heartbeat;
    const double dispatcher_limit =
        std::max(0.0, dispatcher_left) * images_per_split / costs.seconds_per_lease;
    const double workers_limit = n / worker_s;
    report.AddSeries(absl::StrCat("model, ", n, " workers: workers' limit"), "images/s",
                     {workers_limit}, BenchPoint{"workers' limit (1 core each)", double(n)});
    report.AddSeries(absl::StrCat("model, ", n, " workers: dispatcher's limit"), "images/s",
                     {dispatcher_limit}, BenchPoint{"dispatcher's limit (1 core)", double(n)});
    report.AddSeries(absl::StrCat("model, ", n, " workers: one client core"), "images/s",
                     {1 / client_s}, BenchPoint{"one client core's ingest", double(n)});
    report.AddSeries(absl::StrCat("model, ", n, " workers: predicted"), "images/s",
                     {std::min({workers_limit, dispatcher_limit, 1 / client_s})},
                     BenchPoint{"predicted (the least)", double(n)});
  }
  report.AddNote(absl::StrCat("The model's splits hold ", images_per_split,
                              " images (an ImageNet TFRecord shard); workers heartbeat every ",
                              absl::GetFlag(FLAGS_heartbeat_interval_ms),
                              " ms. Predicted images/s for n workers = the least of the three "
                              "limits; a client beyond one core's ingest needs more client "
                              "processes (one per trainer host)."));
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "scaling_bench",
      {.images = 1024, .size = 256, .dir = "/tmp/granary_scaling_bench", .quick_images = 128},
      granary::Run);
}
