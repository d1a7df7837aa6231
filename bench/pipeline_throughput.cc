// In-process throughput of the ResNet-style example pipeline (examples/imagenet_resnet.json):
// the baseline every later service number is compared against.
//
// For each image size it generates a synthetic ImageNet-style dataset, then runs one epoch of
// the pipeline with every parallel_map at 1 thread and at 2 threads, interleaved (A B A B ...),
// and prints the median images/s of each, the spread (max - min), the 2-thread / 1-thread
// ratio, and how many cores the process kept busy on average.
//
//   bench/pipeline_throughput [--sizes 64,224] [--images N] [--repetitions R] [--dir D]
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_setup.h"
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

// User + system CPU seconds this process has used.
double CpuSeconds() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec / 1e6;
}

struct Series {
  std::vector<double> rates;
  // Cores busy on average during the measured epochs (CPU seconds / wall seconds).
  double cpu_seconds = 0;
  double wall_seconds = 0;
  double Median() const { return granary::Median(rates); }
  double Spread() const { return granary::Spread(rates); }
};

int Run() {
  Env* env = Env::Default();
  const UdfRegistry udfs = UdfRegistry::WithBuiltins();
  std::printf("%-6s %-8s %12s %10s %6s %10s\n", "size", "threads", "images/s", "spread", "ratio",
              "cores busy");
  for (const std::string& size_text : absl::GetFlag(FLAGS_sizes)) {
    const int64_t size = std::stoll(size_text);
    auto def = ImagenetPipeline(env, absl::StrCat(absl::GetFlag(FLAGS_dir), "/imagenet_", size),
                                absl::GetFlag(FLAGS_images), size, absl::GetFlag(FLAGS_pipeline));
    if (!def.ok()) {
      std::fprintf(stderr, "%s\n", std::string(def.status().message()).c_str());
      return 1;
    }
    const std::vector<int> thread_counts = {1, 2};
    std::vector<std::unique_ptr<Pipeline>> pipelines;
    for (int threads : thread_counts) {
      auto p = Pipeline::Create(WithParallelMapThreads(*def, threads), udfs);
      if (!p.ok()) {
        std::fprintf(stderr, "%s\n", std::string(p.status().message()).c_str());
        return 1;
      }
      pipelines.push_back(std::move(p).value());
    }
    std::vector<Series> series(thread_counts.size());
    // One warm-up epoch each (page cache), then interleaved measured epochs.
    for (int rep = -1; rep < absl::GetFlag(FLAGS_repetitions); ++rep) {
      for (size_t i = 0; i < pipelines.size(); ++i) {
        EpochRunOptions options;
        options.digest = false;
        int64_t images = 0;
        options.on_element = [&images](const Element& batch) {
          images += batch.tensors[0].shape()[0];
        };
        const double cpu_before = CpuSeconds();
        auto result = RunEpochInProcess(*pipelines[i], 1, rep + 1, env, options);
        if (!result.ok()) {
          std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
          return 1;
        }
        if (rep >= 0) {
          series[i].rates.push_back(images / result->seconds);
          series[i].cpu_seconds += CpuSeconds() - cpu_before;
          series[i].wall_seconds += result->seconds;
        }
      }
    }
    for (size_t i = 0; i < series.size(); ++i) {
      std::printf("%-6lld %-8d %12.0f %10.0f %6.2f %10.2f\n", static_cast<long long>(size),
                  thread_counts[i], series[i].Median(), series[i].Spread(),
                  series[i].Median() / series[0].Median(),
                  series[i].cpu_seconds / series[i].wall_seconds);
    }
  }
  return 0;
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return granary::Run();
}
