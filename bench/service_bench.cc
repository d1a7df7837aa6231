// The service against the in-process baseline (the raw transport is transport_bench.cc).
//
// Starts a real dispatcher and 2 workers (processes on 127.0.0.1) and, in rotating order over
// --repetitions rounds, the ResNet-style example pipeline (batch 128) for one epoch of a generated
// dataset: in-process (granary local's runner), through the service with 1 task on 1 worker and
// with 2 tasks on 2 workers read through shared memory, and with 2 read over TCP; images/s and
// the ratio to in-process. All share the same 2 cores.
// The replicated dispatcher (issue 32) side by side: a second service of 3 replicas over a
// 3-member etcd, with its own 2 workers, read through shared memory with 2 tasks; its images/s
// against the single dispatcher's, and the CPU time each control plane (the dispatcher; the
// replicas and etcd's members) used during its own epochs and, the replicated one, during the
// single dispatcher's (idle). Both services run throughout, the idle one in the background of the
// other's epochs.
//
//   bench/service_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_report.h"
#include "bench/bench_service.h"
#include "bench/bench_setup.h"
#include "bench/process_stats.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "granary/client.h"
#include "pipeline/local_runner.h"

namespace granary {
namespace {

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  ASSIGN_OR_RETURN(PipelineDef def, ResnetPipelineFromFlags(env));
  SetOpParam(&def, "batch", "batch_size", 128);
  ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> local,
                   Pipeline::Create(def, PipelineRegistries::WithBuiltins()));
  ASSIGN_OR_RETURN(BenchService service,
                   StartBenchService(dir + "/cluster", def, {.cluster = {.workers = 2}}));
  ASSIGN_OR_RETURN(
      BenchService replicated,
      StartBenchService(dir + "/replicated", def, {.cluster = {.workers = 2}, .replicated = true}));
  // The bench's client maps the workers' shared memory (the default on their host); a second
  // one reads over TCP.
  ASSIGN_OR_RETURN(std::unique_ptr<Client> tcp,
                   Client::Connect({.dispatcher_address = service.cluster->dispatcher_address(),
                                    .shared_memory = false,
                                    .insecure = true}));
  struct Config {
    std::string name;
    std::unique_ptr<Job> job;  // null: in-process
    std::vector<double> rates;
    // The CPU seconds each of `control_planes` used in each measured epoch.
    std::vector<double> control_plane_cpu[2];
  };
  // The single dispatcher's control plane, and the replicated one's.
  const std::vector<pid_t> control_planes[2] = {ControlPlanePids(service),
                                                ControlPlanePids(replicated)};
  std::vector<Config> configs;
  configs.push_back({"in-process"});
  for (const auto& [name, client, dataset, workers] :
       std::vector<std::tuple<std::string, Client*, std::string, int>>{
           {"service, 1 worker, shared memory", service.client.get(), service.dataset, 1},
           {"service, 2 workers, shared memory", service.client.get(), service.dataset, 2},
           {"service, 2 workers, tcp", tcp.get(), service.dataset, 2},
           {"replicated service, 2 workers, shared memory", replicated.client.get(),
            replicated.dataset, 2}}) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<Job> job,
        client->OpenJob(dataset, {.name = name, .seed = 1, .num_worker_slots = workers}));
    configs.push_back({name, std::move(job)});
  }
  const int reps = absl::GetFlag(FLAGS_repetitions);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up.
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + std::max(rep, 0)) % configs.size()];
      double rate;
      const double cpu_before[2] = {CpuSecondsOfAll(control_planes[0]),
                                    CpuSecondsOfAll(control_planes[1])};
      if (c.job == nullptr) {
        EpochRunOptions options;
        options.digest = false;
        ASSIGN_OR_RETURN(EpochResult l, RunEpochInProcess(*local, 1, rep + 1, env, options));
        rate = images / l.seconds;
      } else {
        ASSIGN_OR_RETURN(ServiceEpoch s, ReadServiceEpoch(*c.job, rep + 1));
        rate = s.rows / s.seconds;
      }
      if (rep < 0) continue;
      c.rates.push_back(rate);
      for (int i = 0; i < 2; ++i) {
        c.control_plane_cpu[i].push_back(CpuSecondsOfAll(control_planes[i]) - cpu_before[i]);
      }
    }
  }
  BenchReport report("service",
                     absl::StrCat("Service vs in-process (ResNet-style pipeline, ", size, "x",
                                  size, " JPEGs cropped to 224x224, batch 128, 2 cores shared)"),
                     reps);
  for (const Config& c : configs) report.AddSeries(c.name, "images/s", c.rates);
  const double base = Median(configs[0].rates);
  report.AddHeadline("service 1 worker (shared memory) / in-process",
                     Median(configs[1].rates) / base, "x");
  report.AddHeadline("service 2 workers (shared memory) / in-process",
                     Median(configs[2].rates) / base, "x", BenchTarget::AtLeast(0.8));
  report.AddHeadline("service 2 workers (tcp) / in-process", Median(configs[3].rates) / base, "x");
  const Config& single = configs[2];
  const Config& replicated_config = configs[4];
  report.AddHeadline("replicated / single dispatcher (2 workers, shared memory)",
                     Median(replicated_config.rates) / Median(single.rates), "x",
                     BenchTarget::AtLeast(0.95));
  // The same ratio within each round, where both were measured within seconds of each other.
  std::vector<double> round_ratios;
  for (int rep = 0; rep < reps; ++rep) {
    round_ratios.push_back(replicated_config.rates[rep] / single.rates[rep]);
  }
  report.AddSeries("replicated / single dispatcher, per round", "x", round_ratios);
  report.AddSeries("control plane per epoch: single dispatcher", "CPU s",
                   single.control_plane_cpu[0]);
  report.AddSeries("control plane per epoch: replicated (3 replicas, 3 etcd members)", "CPU s",
                   replicated_config.control_plane_cpu[1]);
  report.AddSeries("replicated control plane, idle, per single-dispatcher epoch", "CPU s",
                   single.control_plane_cpu[1]);
  report.AddNote(
      "The replicated service: 3 `granary dispatcher --journal etcd://...` replicas over a "
      "3-member etcd (heartbeat 50 ms, election 400 ms) with 2 workers of its own, started beside "
      "the single dispatcher's; both run throughout, on the same 2 cores.");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "service_bench",
      {.images = 1024, .size = 256, .dir = "/tmp/granary_service_bench", .quick_images = 128},
      granary::Run);
}
