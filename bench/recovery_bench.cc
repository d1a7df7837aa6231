// How fast a restarted worker serves again: a single-worker cluster, with checkpoints every 1 s
// or without, reads the ResNet-style example (1024-element shuffle buffer) through a client
// three quarters into an epoch; then the worker is SIGKILLed and started again, and the time from
// process start to the first element it serves at the client's position is measured with a
// GetElements call, along with how many elements it recomputed to get there. Alternates the two
// configurations round by round.
//
//   bench/recovery_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_setup.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "granary/client.h"
#include "tests/local_cluster.h"

namespace granary {
namespace {

struct Recovery {
  double start_to_listening_s = 0;
  double start_to_first_element_s = 0;
  int64_t recomputed = 0;
};

// Reads three quarters of epoch 0 of a new job, kills and restarts the worker, and times its
// recovery.
absl::StatusOr<Recovery> MeasureOnce(const PipelineDef& def, const std::string& dir,
                                     int64_t checkpoint_interval_ms, int64_t batches) {
  std::filesystem::remove_all(dir);
  testing::LocalClusterOptions options;
  // A small window keeps the worker near the client, as a trainer-bound job would.
  options.worker_flags = {"--window_bytes=" + std::to_string(32 << 20)};
  if (checkpoint_interval_ms > 0) {
    options.worker_flags.push_back("--checkpoint_dir=" + dir + "/checkpoints");
    options.worker_flags.push_back(absl::StrCat("--checkpoint_interval_ms=",
                                                checkpoint_interval_ms));
  }
  testing::LocalCluster cluster(dir, options);
  if (!cluster.ok()) return absl::UnavailableError("the cluster did not start");
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                   Client::Connect({.dispatcher_address = cluster.dispatcher_address(),
                                    .max_outstanding_requests = 1,
                                    .max_bytes_per_request = 1 << 20}));
  ASSIGN_OR_RETURN(std::string dataset, client->RegisterPipeline(def));
  ASSIGN_OR_RETURN(std::unique_ptr<Job> job, client->OpenJob(dataset, {.seed = 1}));
  {
    ASSIGN_OR_RETURN(std::unique_ptr<EpochReader> reader, job->ReadEpoch(0));
    ElementProto element;
    bool end = false;
    for (int64_t i = 0; i < batches * 3 / 4 && !end; ++i) {
      RETURN_IF_ERROR(reader->Next(&element, &end));
    }
  }
  GetWorkerStatusResponse status;
  grpc::Status rpc = cluster.WorkerStub(0)->GetWorkerStatus(testing::RpcContext().get(), {}, &status);
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

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  auto def = ResnetPipelineFromFlags(env);
  if (!def.ok()) return def.status();
  int64_t batch = 0;
  for (OpDef& op : *def->mutable_ops()) {
    if (op.op() == "shuffle") {
      (*op.mutable_params()->mutable_fields())["buffer_size"].set_number_value(1024);
    }
    if (op.op() == "batch") batch = op.params().fields().at("batch_size").number_value();
  }
  const int64_t batches = images / std::max<int64_t>(batch, 1);
  struct Config {
    std::string name;
    int64_t interval_ms;
    std::vector<double> listening, first_element, recomputed;
  };
  std::vector<Config> configs = {{"off", 0}, {"every 1 s", 1000}};
  for (int rep = 0; rep < absl::GetFlag(FLAGS_repetitions); ++rep) {
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + rep) % configs.size()];
      auto r = MeasureOnce(*def, absl::StrCat(dir, "/cluster"), c.interval_ms, batches);
      if (!r.ok()) return r.status();
      c.listening.push_back(r->start_to_listening_s);
      c.first_element.push_back(r->start_to_first_element_s);
      c.recomputed.push_back(r->recomputed);
    }
  }
  std::printf(
      "Worker recovery, ResNet-style pipeline, shuffle buffer 1024, %lldx%lld images, killed "
      "three quarters into a %lld-image epoch; median of %d\n",
      static_cast<long long>(size), static_cast<long long>(size), static_cast<long long>(images),
      absl::GetFlag(FLAGS_repetitions));
  std::printf("  %-12s %14s %20s %8s %12s\n", "checkpoints", "start->listen s",
              "start->1st element s", "spread", "recomputed");
  for (Config& c : configs) {
    std::printf("  %-12s %14.2f %20.2f %8.2f %12.0f\n", c.name.c_str(), Median(c.listening),
                Median(c.first_element), Spread(c.first_element), Median(c.recomputed));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(argc, argv, "recovery_bench",
                                  {.images = 32768, .dir = "/tmp/granary_recovery_bench"}, granary::Run);
}
