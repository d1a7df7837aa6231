// What the Put/Get cache buys: the ResNet-style example read through the service (one worker)
// as compute epochs (no cache), as the Put epoch of a `full` and an `at_mark` job (computing and
// writing the cache) and as their Get epochs (reading it), interleaved round by round; images/s
// and the ratio to compute. Each round uses a new seed, so each Put writes a new cache; a
// round's caches are deleted after it. 256x256 JPEGs cropped to 224x224, batches of 128, as
// ImageNet training reads them: decoding is the pipeline's largest cost.
//
//   bench/cache_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <cstdio>
#include <filesystem>
#include <map>
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

namespace granary {
namespace {

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  auto def = ResnetPipelineFromFlags(env);
  if (!def.ok()) return def.status();
  SetOpParam(&*def, "batch", "batch_size", 128);
  ASSIGN_OR_RETURN(BenchService service, StartBenchService(dir + "/cluster", *def));

  // Kind of epoch -> images/s per round.
  std::map<std::string, std::vector<double>> rates;
  const std::vector<std::string> kinds = {"compute", "put full", "get full", "put at_mark",
                                          "get at_mark"};
  const auto read = [&](Job& job, int64_t epoch, const std::string& kind) -> absl::Status {
    auto epoch_read = ReadServiceEpoch(job, epoch);
    if (!epoch_read.ok()) return epoch_read.status();
    rates[kind].push_back(epoch_read->rows / epoch_read->seconds);
    return absl::OkStatus();
  };
  const int reps = absl::GetFlag(FLAGS_repetitions);
  for (int rep = 0; rep < reps; ++rep) {
    const uint64_t seed = 100 + rep;
    std::vector<std::unique_ptr<Job>> jobs;
    for (JobCachePolicy policy :
         {JobCachePolicy::kCompute, JobCachePolicy::kFull, JobCachePolicy::kAtMark}) {
      auto job = service.client->OpenJob(service.dataset, {.seed = seed, .cache_policy = policy});
      if (!job.ok()) return job.status();
      jobs.push_back(std::move(job).value());
    }
    // Rotate the order of the three jobs' epochs from round to round.
    for (size_t k = 0; k < jobs.size(); ++k) {
      const size_t j = (k + rep) % jobs.size();
      if (j == 0) {
        if (auto s = read(*jobs[0], 0, "compute"); !s.ok()) return s;
      } else {
        const std::string name = j == 1 ? "full" : "at_mark";
        if (auto s = read(*jobs[j], 0, "put " + name); !s.ok()) return s;
        if (auto s = read(*jobs[j], 1, "get " + name); !s.ok()) return s;
      }
    }
    std::filesystem::remove_all(service.cluster->cache_root());
  }
  BenchReport report("cache",
                     absl::StrCat("Cache: Get and Put epochs vs compute, ResNet-style pipeline, ",
                                  size, "x", size, ", ", images, " images per epoch, 1 worker"),
                     reps);
  const double base = Median(rates["compute"]);
  for (const std::string& kind : kinds) {
    report.AddSeries(kind, "images/s", rates[kind]);
    if (kind == "compute") continue;
    report.AddHeadline(absl::StrCat(kind, " / compute"), Median(rates[kind]) / base, "x",
                       kind == "get full" ? BenchTarget::AtLeast(5) : BenchTarget());
  }
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "cache_bench",
      {.images = 1024, .size = 256, .dir = "/tmp/granary_cache_bench", .quick_images = 256},
      granary::Run);
}
