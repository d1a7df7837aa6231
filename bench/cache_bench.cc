// What the Put/Get cache buys: the ResNet-style example read through the service (one worker)
// as compute epochs (no cache), as the Put epoch of a `full` and an `at_mark` job (computing and
// writing the cache) and as their Get epochs (reading it), interleaved round by round; images/s
// and the ratio to compute. Each round uses a new seed, so each Put writes a new cache; a
// round's caches are deleted after it. 256x256 JPEGs cropped to 224x224, batches of 128, as
// ImageNet training reads them: decoding is the pipeline's largest cost.
//
// Issue 20, in the same rounds: the `full` Put and Get through the in-memory tier (a second
// cluster whose --cache_root is a local redis-server), against the filesystem tier's Get — the
// first Get after the Put (which also waits for the Put's last commits) and a second one (epoch
// 2: the Get alone); and
// precache on an I/O-bound source (every record waits kSlowSourceUs, a simulated remote read):
// the first epoch of a job after `Client::Precache` against that job's later Get epochs and
// against the first epoch of a job without precache.
//
//   bench/cache_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <algorithm>
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
#include "cache/local_redis_server.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "granary/client.h"

namespace granary {
namespace {

// The simulated remote read of each source record in the precache measurement.
constexpr int64_t kSlowSourceUs = 4000;

// `def` with a first op that waits `us` per record (the source's records arrive slowly).
PipelineDef WithSlowSource(PipelineDef def, int64_t us) {
  OpDef slow;
  slow.set_op("map");
  slow.set_udf("simulate_cost");
  (*slow.mutable_udf_params()->mutable_fields())["us_per_element"].set_number_value(
      static_cast<double>(us));
  def.mutable_ops()->Add(std::move(slow));
  std::rotate(def.mutable_ops()->rbegin(), def.mutable_ops()->rbegin() + 1,
              def.mutable_ops()->rend());
  return def;
}

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  auto def = ResnetPipelineFromFlags(env);
  if (!def.ok()) return def.status();
  SetOpParam(&*def, "batch", "batch_size", 128);
  ASSIGN_OR_RETURN(BenchService service, StartBenchService(dir + "/cluster", *def));
  LocalRedisServer redis;
  if (!redis.ok()) return absl::UnavailableError("redis-server did not start");
  BenchServiceOptions in_memory;
  in_memory.cluster.dispatcher_flags = {"--cache_root=" + redis.url() + "/granary"};
  // A worker writing a chunk of 77 MB batches into the same two cores' Redis misses heartbeats
  // for seconds at a time: not lost for that.
  in_memory.cluster.worker_timeout_ms = 10000;
  ASSIGN_OR_RETURN(BenchService redis_service,
                   StartBenchService(dir + "/redis-cluster", *def, in_memory));
  ASSIGN_OR_RETURN(const std::string slow_dataset,
                   redis_service.client->RegisterPipeline(WithSlowSource(*def, kSlowSourceUs)));

  // Kind of epoch -> images/s per round.
  std::map<std::string, std::vector<double>> rates;
  const std::vector<std::string> kinds = {"compute",           "put full",
                                          "get full",          "get again full",
                                          "put at_mark",       "get at_mark",
                                          "get again at_mark", "put full redis",
                                          "get full redis",    "get again full redis"};
  // Seconds of the slow-source jobs' epochs.
  std::map<std::string, std::vector<double>> slow;
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
        if (auto s = read(*jobs[j], 2, "get again " + name); !s.ok()) return s;
      }
    }
    auto redis_job = redis_service.client->OpenJob(
        redis_service.dataset, {.seed = seed, .cache_policy = JobCachePolicy::kFull});
    if (!redis_job.ok()) return redis_job.status();
    if (auto s = read(**redis_job, 0, "put full redis"); !s.ok()) return s;
    if (auto s = read(**redis_job, 1, "get full redis"); !s.ok()) return s;
    if (auto s = read(**redis_job, 2, "get again full redis"); !s.ok()) return s;

    // Precache on the slow source: job A without, job B after a precache (not timed: it runs
    // before training starts), each epoch 0 and 1.
    const auto slow_epoch = [&](Job& job, int64_t epoch, const std::string& kind) -> absl::Status {
      auto epoch_read = ReadServiceEpoch(job, epoch);
      if (!epoch_read.ok()) return epoch_read.status();
      slow[kind].push_back(epoch_read->seconds);
      return absl::OkStatus();
    };
    const JobSpec slow_spec{.seed = seed, .cache_policy = JobCachePolicy::kFull};
    auto without = redis_service.client->OpenJob(slow_dataset, slow_spec);
    if (!without.ok()) return without.status();
    if (auto s = slow_epoch(**without, 0, "no precache: epoch 0"); !s.ok()) return s;
    if (auto s = slow_epoch(**without, 1, "no precache: epoch 1"); !s.ok()) return s;
    const JobSpec precached_spec{.seed = seed + 1000, .cache_policy = JobCachePolicy::kFull};
    auto precached = redis_service.client->Precache(slow_dataset, {.seed = precached_spec.seed});
    if (!precached.ok()) return precached.status();
    auto with = redis_service.client->OpenJob(slow_dataset, precached_spec);
    if (!with.ok()) return with.status();
    if (auto s = slow_epoch(**with, 0, "precache: epoch 0"); !s.ok()) return s;
    if (auto s = slow_epoch(**with, 1, "precache: epoch 1"); !s.ok()) return s;
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
  report.AddHeadline("get full redis / get full filesystem",
                     Median(rates["get full redis"]) / Median(rates["get full"]), "x",
                     BenchTarget::AtLeast(1));
  report.AddHeadline("get again full redis / get again full filesystem",
                     Median(rates["get again full redis"]) / Median(rates["get again full"]), "x",
                     BenchTarget::AtLeast(1));
  for (const auto& [kind, seconds] : slow) report.AddSeries(kind, "s", seconds);
  report.AddHeadline("precache: epoch 0 / epoch 1 (slow source)",
                     Median(slow["precache: epoch 0"]) / Median(slow["precache: epoch 1"]), "x",
                     BenchTarget::AtMost(1.1));
  report.AddHeadline("no precache: epoch 0 / precache: epoch 0 (slow source)",
                     Median(slow["no precache: epoch 0"]) / Median(slow["precache: epoch 0"]), "x",
                     BenchTarget());
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
