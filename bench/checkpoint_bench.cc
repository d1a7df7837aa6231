// What task checkpoints cost: the ResNet-style example with a 1024-element shuffle buffer read
// through the service from three single-worker clusters — checkpoints off, every 1 s and every
// 5 s — interleaved epoch by epoch; images/s and the ratio to "off", and from the workers' own
// status the time the pipeline was held up per checkpoint (saving the iterator state; the write
// runs in the background) and the size of a checkpoint.
//
//   bench/checkpoint_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
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

struct Config {
  std::string name;
  int64_t interval_ms;  // 0: off
  BenchService service;
  std::unique_ptr<Job> job;
  std::vector<double> rates;
};

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  auto def = ResnetPipelineFromFlags(env);
  if (!def.ok()) return def.status();
  SetOpParam(&*def, "shuffle", "buffer_size", 1024);

  std::vector<Config> configs;
  for (const auto& [name, interval] : std::vector<std::pair<std::string, int64_t>>{
           {"off", 0}, {"every 1 s", 1000}, {"every 5 s", 5000}}) {
    Config& c = configs.emplace_back();
    c.name = name;
    c.interval_ms = interval;
    ASSIGN_OR_RETURN(c.service, StartBenchService(absl::StrCat(dir, "/cluster-", interval), *def,
                                                  {.checkpoint_interval_ms = interval}));
    ASSIGN_OR_RETURN(c.job,
                     c.service.client->OpenJob(c.service.dataset, {.name = "bench", .seed = 1}));
  }
  const int reps = absl::GetFlag(FLAGS_repetitions);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up.
    // Rotate who goes first, so no configuration always runs right after another.
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + rep + 1) % configs.size()];
      auto read = ReadServiceEpoch(*c.job, rep + 1);
      if (!read.ok()) return read.status();
      if (rep >= 0) c.rates.push_back(read->rows / read->seconds);
    }
  }
  BenchReport report(
      "checkpoint",
      absl::StrCat("Checkpoint overhead: ResNet-style pipeline, shuffle buffer 1024, ", size, "x",
                   size, ", ", images, " images per epoch, 1 worker"),
      reps);
  const double base = Median(configs[0].rates);
  for (Config& c : configs) {
    report.AddSeries(absl::StrCat("checkpoints ", c.name), "images/s", c.rates);
    if (c.interval_ms == 0) continue;
    report.AddHeadline(absl::StrCat("checkpoints ", c.name, " / off"), Median(c.rates) / base, "x");
    GetWorkerStatusResponse status;
    grpc::Status rpc =
        c.service.cluster->WorkerStub(0)->GetWorkerStatus(testing::RpcContext().get(), {}, &status);
    if (!rpc.ok()) return absl::UnavailableError(rpc.error_message());
    const int64_t written = status.checkpoints_written();
    report.AddHeadline(absl::StrCat("checkpoints written ", c.name), written, "checkpoints");
    if (written == 0) continue;
    const double stall_ms = status.checkpoint_stall_us() / 1e3 / written;
    report.AddHeadline(absl::StrCat("stall per checkpoint ", c.name), stall_ms, "ms");
    report.AddHeadline(absl::StrCat("size per checkpoint ", c.name),
                       status.checkpoint_bytes() / 1e6 / written, "MB");
    // The producer is held up stall_ms once per interval: the overhead that checkpointing adds
    // (the throughput ratio above is the same thing seen through this machine's noise).
    report.AddHeadline(absl::StrCat("producer time stalled ", c.name),
                       100 * stall_ms / c.interval_ms, "%",
                       c.interval_ms == 1000 ? BenchTarget::AtMost(3) : BenchTarget());
  }
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "checkpoint_bench",
      {.images = 65536, .dir = "/tmp/granary_checkpoint_bench", .quick_images = 512}, granary::Run);
}
