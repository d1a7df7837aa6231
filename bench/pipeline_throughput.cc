// In-process throughput of the ResNet-style example pipeline (examples/imagenet_resnet.json):
// the baseline every later service number is compared against.
//
// For each image size it generates a synthetic ImageNet-style dataset, then runs one epoch of
// the pipeline with every parallel_map at 1 thread and at 2 threads, interleaved (A B A B ...),
// and prints the median images/s of each, the spread (max - min), the 2-thread / 1-thread
// ratio, and how many cores the process kept busy on average.
//
//   bench/pipeline_throughput [--sizes 64,224] [--images N] [--repetitions R] [--dir D]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_report.h"
#include "bench/bench_setup.h"
#include "bench/process_stats.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "pipeline/local_runner.h"

ABSL_FLAG(std::vector<std::string>, sizes, (std::vector<std::string>{"64", "224"}),
          "Image sides to measure.");
ABSL_FLAG(int64_t, images, 2048, "Images per dataset.");
ABSL_FLAG(int, repetitions, 5, "Epochs measured per configuration.");
ABSL_FLAG(std::string, dir, "/tmp/granary_bench", "Where datasets are generated.");
ABSL_FLAG(std::string, pipeline, "examples/imagenet_resnet.json", "The pipeline measured.");

namespace granary {
namespace {

absl::Status Run() {
  Env* env = Env::Default();
  const UdfRegistry udfs = UdfRegistry::WithBuiltins();
  const bool quick = QuickBench();
  const int repetitions = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int64_t images = quick ? 64 : absl::GetFlag(FLAGS_images);
  BenchReport report("pipeline_throughput",
                     "In-process ResNet-style pipeline (the baseline): 1 vs 2 threads per "
                     "parallel_map",
                     repetitions);
  for (const std::string& size_text :
       quick ? std::vector<std::string>{"64"} : absl::GetFlag(FLAGS_sizes)) {
    const int64_t size = std::stoll(size_text);
    auto def = ImagenetPipeline(
        env, absl::StrCat(absl::GetFlag(FLAGS_dir), "/imagenet_", size, "_", images), images, size,
        absl::GetFlag(FLAGS_pipeline));
    if (!def.ok()) return def.status();
    const std::vector<int> thread_counts = {1, 2};
    std::vector<std::unique_ptr<Pipeline>> pipelines;
    for (int threads : thread_counts) {
      auto p = Pipeline::Create(WithParallelMapThreads(*def, threads), udfs);
      if (!p.ok()) return p.status();
      pipelines.push_back(std::move(p).value());
    }
    std::vector<std::vector<double>> rates(thread_counts.size());
    std::vector<double> cpu_seconds(thread_counts.size()), wall_seconds(thread_counts.size());
    // One warm-up epoch each (page cache), then interleaved measured epochs.
    for (int rep = -1; rep < repetitions; ++rep) {
      for (size_t i = 0; i < pipelines.size(); ++i) {
        EpochRunOptions options;
        options.digest = false;
        int64_t rows = 0;
        options.on_element = [&rows](const Element& batch) { rows += batch.tensors[0].shape()[0]; };
        const double cpu_before = CpuSecondsOf();
        auto result = RunEpochInProcess(*pipelines[i], 1, rep + 1, env, options);
        if (!result.ok()) return result.status();
        if (rep < 0) continue;
        rates[i].push_back(rows / result->seconds);
        cpu_seconds[i] += CpuSecondsOf() - cpu_before;
        wall_seconds[i] += result->seconds;
      }
    }
    for (size_t i = 0; i < thread_counts.size(); ++i) {
      const std::string config =
          absl::StrCat(size, "x", size, ", ", thread_counts[i], " thread(s) per parallel_map");
      report.AddSeries(config, "images/s", rates[i]);
      report.AddHeadline(absl::StrCat(config, ": cores busy"), cpu_seconds[i] / wall_seconds[i],
                         "cores");
    }
    report.AddHeadline(absl::StrCat(size, "x", size, ": 2 threads / 1 thread"),
                       Median(rates[1]) / Median(rates[0]), "x");
  }
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "pipeline_throughput", granary::Run);
}
