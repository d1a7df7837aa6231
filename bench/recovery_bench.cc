// How fast a restarted worker serves again: a single-worker cluster, with checkpoints every 1 s
// or without, reads the ResNet-style example (1024-element shuffle buffer) through a client
// three quarters into an epoch; then the worker is SIGKILLed and started again, and the time from
// process start to the first element it serves at the client's position is measured with a
// GetElements call, along with how many elements it recomputed to get there. And failover: the
// same with a standby worker instead of a restart, timed from the kill to the client's first
// element from the standby, less the failure-detection timeout. Rotates the three configurations
// round by round.
//
//   bench/recovery_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_report.h"
#include "bench/bench_service.h"
#include "bench/bench_setup.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "granary/client.h"
#include "tests/local_cluster.h"

namespace granary {
namespace {

// The dispatcher's failure-detection timeout in the failover measurement.
constexpr int64_t kFailoverTimeoutMs = 1000;

struct Recovery {
  double start_to_listening_s = 0;
  double start_to_first_element_s = 0;
  int64_t recomputed = 0;
};

// A cluster whose client has read three quarters of epoch 0 of a new job (1 element per request,
// so the client holds next to nothing ahead), the reader still open.
struct ReadingCluster {
  BenchService service;
  std::unique_ptr<Job> job;
  std::unique_ptr<EpochReader> reader;
};

absl::StatusOr<ReadingCluster> ReadThreeQuarters(const PipelineDef& def, const std::string& dir,
                                                 BenchServiceOptions options, int64_t batches) {
  // A small window keeps the worker near the client, as a trainer-bound job would.
  options.cluster.worker_flags.push_back("--window_bytes=" + std::to_string(32 << 20));
  options.client.max_outstanding_requests = 1;
  options.client.max_bytes_per_request = 1;
  ReadingCluster r;
  ASSIGN_OR_RETURN(r.service, StartBenchService(dir, def, std::move(options)));
  ASSIGN_OR_RETURN(r.job, r.service.client->OpenJob(r.service.dataset, {.seed = 1}));
  ASSIGN_OR_RETURN(r.reader, r.job->ReadEpoch(0));
  ElementProto element;
  bool end = false;
  for (int64_t i = 0; i < batches * 3 / 4 && !end; ++i) {
    RETURN_IF_ERROR(r.reader->Next(&element, &end));
  }
  return r;
}

// Kills the worker of a cluster three quarters into an epoch, starts it again and times its
// recovery.
absl::StatusOr<Recovery> MeasureRestart(const PipelineDef& def, const std::string& dir,
                                        int64_t checkpoint_interval_ms, int64_t batches) {
  ASSIGN_OR_RETURN(
      ReadingCluster r,
      ReadThreeQuarters(def, dir, {.checkpoint_interval_ms = checkpoint_interval_ms}, batches));
  r.reader.reset();  // The GetElements call below stands in for the client.
  testing::LocalCluster& cluster = *r.service.cluster;
  GetWorkerStatusResponse status;
  grpc::Status rpc =
      cluster.WorkerStub(0)->GetWorkerStatus(testing::RpcContext().get(), {}, &status);
  if (!rpc.ok() || status.tasks_size() != 1) {
    return absl::InternalError(absl::StrCat("worker status: ", rpc.error_message()));
  }
  const TaskStatus task = status.tasks(0);
  cluster.KillWorker(0);
  const absl::Time start = absl::Now();
  if (!cluster.RestartWorker(0)) return absl::UnavailableError("the worker did not restart");
  Recovery recovery;
  recovery.start_to_listening_s = absl::ToDoubleSeconds(absl::Now() - start);
  GetElementsRequest request;
  request.set_task_id(task.task_id());
  request.set_generation(task.generation());
  request.set_from_index(task.window_start());
  request.set_max_bytes(1);
  while (true) {
    GetElementsResponse response;
    rpc = cluster.WorkerStub(0)->GetElements(testing::RpcContext().get(), request, &response);
    if (!rpc.ok() && rpc.error_code() != grpc::StatusCode::NOT_FOUND) {
      return absl::InternalError(absl::StrCat("GetElements: ", rpc.error_message()));
    }
    recovery.recomputed += response.recomputed();
    if (response.elements_size() > 0) break;
    if (absl::Now() - start > absl::Minutes(5)) return absl::DeadlineExceededError("no element");
  }
  recovery.start_to_first_element_s = absl::ToDoubleSeconds(absl::Now() - start);
  return recovery;
}

// Kills the worker of a cluster with a standby (checkpoints every 1 s in a shared directory)
// three quarters into an epoch and returns the seconds from the kill until the client holds an
// element the standby produced. The client holds at most one response ahead (one element per
// request), so the third element read after the kill comes from the standby.
absl::StatusOr<double> MeasureFailover(const PipelineDef& def, const std::string& dir,
                                       int64_t batches) {
  BenchServiceOptions options;
  options.cluster.standby = 1;
  options.cluster.worker_timeout_ms = kFailoverTimeoutMs;
  options.checkpoint_interval_ms = 1000;
  ASSIGN_OR_RETURN(ReadingCluster r, ReadThreeQuarters(def, dir, std::move(options), batches));
  r.service.cluster->KillWorker(0);
  const absl::Time kill = absl::Now();
  ElementProto element;
  bool end = false;
  for (int i = 0; i < 3 && !end; ++i) RETURN_IF_ERROR(r.reader->Next(&element, &end));
  if (end) return absl::InternalError("the epoch ended before the standby served");
  return absl::ToDoubleSeconds(absl::Now() - kill);
}

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  auto def = ResnetPipelineFromFlags(env);
  if (!def.ok()) return def.status();
  SetOpParam(&*def, "shuffle", "buffer_size", 1024);
  int64_t batch = 0;
  for (const OpDef& op : def->ops()) {
    if (op.op() == "batch") batch = op.params().fields().at("batch_size").number_value();
  }
  const int64_t batches = images / std::max<int64_t>(batch, 1);
  struct Config {
    std::string name;
    int64_t interval_ms;
    std::vector<double> listening, first_element, recomputed;
  };
  std::vector<Config> configs = {{"checkpoints off", 0}, {"checkpoints every 1 s", 1000}};
  std::vector<double> failover;
  const int reps = absl::GetFlag(FLAGS_repetitions);
  const std::string cluster_dir = absl::StrCat(dir, "/cluster");
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t k = 0; k <= configs.size(); ++k) {
      const size_t which = (k + rep) % (configs.size() + 1);
      if (which == configs.size()) {
        ASSIGN_OR_RETURN(double seconds, MeasureFailover(*def, cluster_dir, batches));
        failover.push_back(seconds);
        continue;
      }
      Config& c = configs[which];
      ASSIGN_OR_RETURN(Recovery r, MeasureRestart(*def, cluster_dir, c.interval_ms, batches));
      c.listening.push_back(r.start_to_listening_s);
      c.first_element.push_back(r.start_to_first_element_s);
      c.recomputed.push_back(r.recomputed);
    }
  }
  BenchReport report(
      "recovery",
      absl::StrCat("Worker recovery: ResNet-style pipeline, shuffle buffer 1024, ", size, "x", size,
                   ", killed three quarters into a ", images, "-image epoch"),
      reps);
  for (Config& c : configs) {
    report.AddSeries(absl::StrCat("restart, ", c.name, ": start -> listening"), "s", c.listening);
    report.AddSeries(absl::StrCat("restart, ", c.name, ": start -> first element"), "s",
                     c.first_element);
    report.AddSeries(absl::StrCat("restart, ", c.name, ": batches recomputed"), "batches",
                     c.recomputed);
  }
  report.AddSeries(
      absl::StrCat("failover to a standby (timeout ", kFailoverTimeoutMs, " ms): kill -> element"),
      "s", failover);
  report.AddHeadline("restarted worker serving after process start (checkpoints every 1 s)",
                     Median(configs[1].first_element), "s", BenchTarget::AtMost(1));
  report.AddHeadline("failover time beyond the detection timeout",
                     Median(failover) - kFailoverTimeoutMs / 1e3, "s");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "recovery_bench",
      {.images = 32768, .dir = "/tmp/granary_recovery_bench", .quick_images = 512}, granary::Run);
}
