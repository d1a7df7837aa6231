// The service against the in-process baseline (the raw transport is transport_bench.cc).
//
// Starts a real dispatcher and 2 workers (processes on 127.0.0.1) and, interleaved over
// --repetitions rounds, the ResNet-style example pipeline for one epoch of a generated dataset:
// in-process (granary local's runner), through the service with 1 task on 1 worker, and with 2
// tasks on 2 workers; images/s and the ratio to in-process. All share the same 2 cores.
//
//   bench/service_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <algorithm>
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
#include "pipeline/local_runner.h"

namespace granary {
namespace {

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  auto def = ResnetPipelineFromFlags(env);
  if (!def.ok()) return def.status();
  const UdfRegistry udfs = UdfRegistry::WithBuiltins();
  auto local = Pipeline::Create(*def, udfs);
  if (!local.ok()) return local.status();

  ASSIGN_OR_RETURN(BenchService service,
                   StartBenchService(dir + "/cluster", *def, {.cluster = {.workers = 2}}));
  Client& client = *service.client;
  auto one = client.OpenJob(service.dataset, {.name = "one", .seed = 1, .num_worker_slots = 1});
  auto two = client.OpenJob(service.dataset, {.name = "two", .seed = 1, .num_worker_slots = 2});
  if (!one.ok() || !two.ok()) return one.ok() ? two.status() : one.status();

  std::vector<double> local_rates, one_rates, two_rates;
  const int reps = absl::GetFlag(FLAGS_repetitions);
  BenchReport report(
      "service", "Service vs in-process (ResNet-style pipeline)", reps);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up.
    EpochRunOptions options;
    options.digest = false;
    auto l = RunEpochInProcess(**local, 1, rep + 1, env, options);
    auto s1 = ReadServiceEpoch(**one, rep + 1);
    auto s2 = ReadServiceEpoch(**two, rep + 1);
    if (!l.ok()) return l.status();
    if (!s1.ok()) return s1.status();
    if (!s2.ok()) return s2.status();
    if (rep < 0) continue;
    local_rates.push_back(images / l->seconds);
    one_rates.push_back(s1->rows / s1->seconds);
    two_rates.push_back(s2->rows / s2->seconds);
  }
  const std::string shape = absl::StrCat(size, "x", size);
  report.AddSeries(absl::StrCat("in-process, ", shape), "images/s", local_rates);
  report.AddSeries(absl::StrCat("service, 1 worker, ", shape), "images/s", one_rates);
  report.AddSeries(absl::StrCat("service, 2 workers, ", shape), "images/s", two_rates);
  report.AddHeadline("service 1 worker / in-process", Median(one_rates) / Median(local_rates), "x");
  report.AddHeadline("service 2 workers / in-process", Median(two_rates) / Median(local_rates), "x",
                     BenchTarget::AtLeast(0.9));

  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "service_bench",
      {.images = 1024, .size = 224, .dir = "/tmp/granary_service_bench", .quick_images = 128},
      granary::Run);
}
