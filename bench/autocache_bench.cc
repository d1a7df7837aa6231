// Autocaching (issue 18, cache/cache_planner.h) against the oracle of every static choice, through
// the service (a LocalCluster of real processes, one worker), four epochs per job:
//   decode-heavy (5× --images): 512x512 JPEGs decoded (2 threads) and resized to 128, a mark,
//     batched, a mark at the end;
//   I/O-heavy (1.25× --images): a slow source (simulate_cost, 2 ms a record, standing in for a
//     remote store), the parse, a mark, a 64x64 decode and the batch, a mark at the end;
//   augmentation-heavy (1× --images): 256x256 JPEGs decoded, a mark, then random_resized_crop
//     to 112, a flip and a simulated 2 ms augmentation, batched.
// The sizes make a computing epoch last about 4 s on this machine, so that auto's fixed cost —
// a worker heartbeat and 64 records profiled — is amortized over an epoch as it is on a real
// dataset (with epochs of about 1.5 s it was 7–10% of a job's four epochs).
// Each choice is its own job with its own seed (no cache is shared), its four epochs read back to
// back; its time runs from opening the job to the end of epoch 3, so auto's profile before epoch
// 0 counts. The static choices are compute, at_mark (the first mark) and full (the whole
// pipeline, which equals caching at a last mark that ends it); on the augmentation-heavy
// pipeline full would replay epoch 0's random augmentation, changing the data, so — like auto,
// whose candidates are the marks — the oracle there is compute or at_mark. Targets: auto within
// 5% of the oracle's time on each; on decode-heavy, auto ≥ 2× compute.
//
//   bench/autocache_bench [--images N] [--repetitions R] [--dir D]
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
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
#include "pipeline/pipeline_loader.h"

namespace granary {
namespace {

constexpr int kEpochs = 4;

struct Workload {
  std::string name;
  int64_t size;          // Side of the source JPEGs.
  double images_factor;  // Of --images.
  std::string ops_json;  // The pipeline's ops, after the TFRecord source.
  // The static choices that keep the job's data.
  std::vector<JobCachePolicy> statics;
};

std::vector<Workload> Workloads() {
  const std::string parse = R"(
    {"op": "map", "udf": "parse_example",
     "udfParams": {"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]}})";
  const std::string batch = R"(
    {"op": "batch", "params": {"batch_size": 32, "drop_remainder": false}})";
  const std::vector<JobCachePolicy> all = {JobCachePolicy::kCompute, JobCachePolicy::kAtMark,
                                           JobCachePolicy::kFull};
  return {
      {"decode-heavy", 512, 5.0,
       absl::StrCat(parse, R"(,
    {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_jpeg"},
    {"op": "map", "udf": "resize", "udfParams": {"height": 128, "width": 128}},
    {"op": "mark", "params": {"name": "resized"}},)",
                    batch, R"(,
    {"op": "mark", "params": {"name": "batched"}})"),
       all},
      {"I/O-heavy", 64, 1.25,
       absl::StrCat(R"(
    {"op": "map", "udf": "simulate_cost", "udfParams": {"us_per_element": 2000}},)",
                    parse, R"(,
    {"op": "mark", "params": {"name": "parsed"}},
    {"op": "map", "udf": "decode_jpeg"},)",
                    batch, R"(,
    {"op": "mark", "params": {"name": "batched"}})"),
       all},
      {"augmentation-heavy",
       256,
       1.0,
       absl::StrCat(parse, R"(,
    {"op": "map", "udf": "decode_jpeg"},
    {"op": "mark", "params": {"name": "decoded"}},
    {"op": "map", "udf": "random_resized_crop", "udfParams": {"height": 112, "width": 112}},
    {"op": "map", "udf": "random_flip"},
    {"op": "map", "udf": "simulate_cost", "udfParams": {"us_per_element": 2000}},)",
                    batch),
       {JobCachePolicy::kCompute, JobCachePolicy::kAtMark}},
  };
}

// Seconds from opening a job with `policy` to the end of its epoch kEpochs - 1.
absl::StatusOr<double> RunJob(Client& client, const std::string& dataset, JobCachePolicy policy,
                              uint64_t seed) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(
      std::unique_ptr<Job> job,
      client.OpenJob(dataset, {.seed = seed, .num_epochs = kEpochs, .cache_policy = policy}));
  for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    RETURN_IF_ERROR(ReadServiceEpoch(*job, epoch).status());
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

absl::Status Run() {
  Env* env = Env::Default();
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int reps = absl::GetFlag(FLAGS_repetitions);
  BenchReport report("autocache",
                     absl::StrCat("Autocaching: auto vs every static cache choice, ", kEpochs,
                                  " epochs per job, 1 worker, --images ", images),
                     reps);
  const std::vector<Workload> workloads = Workloads();
  // The service's own dataset is the first workload's; the others are registered after.
  std::vector<std::string> pipelines;
  for (const Workload& w : workloads) {
    const int64_t n = std::max<int64_t>(static_cast<int64_t>(images * w.images_factor), 16);
    ASSIGN_OR_RETURN(const std::string data,
                     ImagenetDataset(env, absl::GetFlag(FLAGS_dir), n, w.size));
    pipelines.push_back(absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")",
                                     data, R"(/*.tfrecord"]}}, "ops": [)", w.ops_json, "]}"));
  }
  ASSIGN_OR_RETURN(PipelineDef first, ParsePipelineJson(pipelines[0], workloads[0].name));
  ASSIGN_OR_RETURN(BenchService service,
                   StartBenchService(absl::GetFlag(FLAGS_dir) + "/autocache_cluster", first));
  std::vector<std::string> datasets = {service.dataset};
  for (size_t i = 1; i < workloads.size(); ++i) {
    ASSIGN_OR_RETURN(PipelineDef def, ParsePipelineJson(pipelines[i], workloads[i].name));
    ASSIGN_OR_RETURN(std::string id, service.client->RegisterPipeline(def));
    datasets.push_back(id);
  }

  uint64_t seed = 1000;
  for (size_t w = 0; w < workloads.size(); ++w) {
    const Workload& workload = workloads[w];
    std::vector<JobCachePolicy> choices = workload.statics;
    choices.push_back(JobCachePolicy::kAuto);
    // Choice -> seconds per round; the choices' order rotates from round to round.
    std::map<std::string, std::vector<double>> seconds;
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t k = 0; k < choices.size(); ++k) {
        const JobCachePolicy policy = choices[(k + rep) % choices.size()];
        ASSIGN_OR_RETURN(const double s, RunJob(*service.client, datasets[w], policy, seed++));
        seconds[JobCachePolicyName(policy)].push_back(s);
        std::printf("  %s %s: %.2f s\n", workload.name.c_str(), JobCachePolicyName(policy), s);
      }
      std::filesystem::remove_all(service.cluster->cache_root() + "/");
      std::filesystem::create_directories(service.cluster->cache_root());
    }
    std::string oracle;
    double oracle_s = std::numeric_limits<double>::infinity();
    for (const JobCachePolicy policy : workload.statics) {
      const std::string name = JobCachePolicyName(policy);
      report.AddSeries(absl::StrCat(workload.name, ": ", name), "s", seconds[name]);
      if (Median(seconds[name]) < oracle_s) {
        oracle_s = Median(seconds[name]);
        oracle = name;
      }
    }
    const double auto_s = Median(seconds["auto"]);
    report.AddSeries(absl::StrCat(workload.name, ": auto"), "s", seconds["auto"]);
    report.AddHeadline(absl::StrCat(workload.name, ": auto / oracle (", oracle, ")"),
                       auto_s / oracle_s, "x", BenchTarget::AtMost(1.05));
    report.AddHeadline(absl::StrCat(workload.name, ": compute / auto"),
                       Median(seconds["compute"]) / auto_s, "x",
                       w == 0 ? BenchTarget::AtLeast(2) : BenchTarget());
  }
  report.AddNote(
      "Each job's time includes everything its trainer waits for: auto's profile (a worker "
      "measures 64 records stage by stage, writing and reading each mark's probe chunk) "
      "before epoch 0, and the Put epoch. The decisions are in the dispatcher's log "
      "(<dir>/autocache_cluster/logs) and `granary status`.");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "autocache_bench",
      {.images = 1600, .size = 512, .dir = "/tmp/granary_bench", .quick_images = 64}, granary::Run);
}
