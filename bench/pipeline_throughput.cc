// In-process throughput of the ResNet-style example pipeline (examples/imagenet_resnet.json):
// the baseline every later service number is compared against.
//
// For each image size it generates a synthetic ImageNet-style dataset, then runs one epoch of
// the pipeline (batches of --batch_size) with every parallel_map at 1 thread and at 2 threads,
// interleaved (A B A B ...), and prints the median images/s of each, the spread (max - min), the
// 2-thread / 1-thread ratio, and how many cores the process kept busy on average.
//
// Then, at the largest size and 2 threads, the cost of the pipeline's last two ops (issue 14):
// the pipeline up to normalize (no batch), with batch, and with batch and prefetch, interleaved,
// in rows (images) per second. Target: batch + prefetch within 10% of up to normalize.
//
//   bench/pipeline_throughput [--sizes 64,256] [--images N] [--repetitions R] [--dir D]
//                             [--batch_size 128]
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
#include "common/status_macros.h"
#include "pipeline/local_runner.h"

ABSL_FLAG(std::vector<std::string>, sizes, (std::vector<std::string>{"64", "256"}),
          "Image sides to measure.");
ABSL_FLAG(int64_t, images, 2048, "Images per dataset.");
ABSL_FLAG(int, repetitions, 5, "Epochs measured per configuration.");
ABSL_FLAG(std::string, dir, "/tmp/granary_bench", "Where datasets are generated.");
ABSL_FLAG(std::string, pipeline, "examples/imagenet_resnet.json", "The pipeline measured.");
ABSL_FLAG(int64_t, batch_size, 128, "Images per batch.");

namespace granary {
namespace {

// `def` with `op`'s number param `param` set to `value`.
void SetParam(PipelineDef& def, const std::string& op, const std::string& param, double value) {
  for (OpDef& o : *def.mutable_ops()) {
    if (o.op() == op) (*o.mutable_params()->mutable_fields())[param].set_number_value(value);
  }
}

absl::Status Run() {
  Env* env = Env::Default();
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  const bool quick = QuickBench();
  const int repetitions = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int64_t images = quick ? 64 : absl::GetFlag(FLAGS_images);
  const std::vector<std::string> sizes =
      quick ? std::vector<std::string>{"64"} : absl::GetFlag(FLAGS_sizes);
  BenchReport report("pipeline_throughput",
                     absl::StrCat("In-process ResNet-style pipeline (the baseline), batch ",
                                  absl::GetFlag(FLAGS_batch_size),
                                  ": 1 vs 2 threads per parallel_map; the cost of batch and "
                                  "prefetch"),
                     repetitions);
  for (const std::string& size_text : sizes) {
    const int64_t size = std::stoll(size_text);
    ASSIGN_OR_RETURN(PipelineDef def, ImagenetPipeline(env, absl::GetFlag(FLAGS_dir), images, size,
                                                       absl::GetFlag(FLAGS_pipeline)));
    SetParam(def, "batch", "batch_size", absl::GetFlag(FLAGS_batch_size));
    const std::vector<int> thread_counts = {1, 2};
    std::vector<std::unique_ptr<Pipeline>> pipelines;
    for (int threads : thread_counts) {
      ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p,
                       Pipeline::Create(WithParallelMapThreads(def, threads), registries));
      pipelines.push_back(std::move(p));
    }
    ASSIGN_OR_RETURN(std::vector<EpochRates> measured,
                     InterleaveEpochs(pipelines, repetitions, env));
    for (size_t i = 0; i < thread_counts.size(); ++i) {
      const std::string config =
          absl::StrCat(size, "x", size, ", ", thread_counts[i], " thread(s) per parallel_map");
      report.AddSeries(config, "images/s", measured[i].rates);
      report.AddHeadline(absl::StrCat(config, ": cores busy"),
                         measured[i].cpu_seconds / measured[i].wall_seconds, "cores");
    }
    report.AddHeadline(absl::StrCat(size, "x", size, ": 2 threads / 1 thread"),
                       Median(measured[1].rates) / Median(measured[0].rates), "x");
    if (size_text != sizes.back()) continue;

    // The last two ops' cost, at 2 threads.
    const PipelineDef two = WithParallelMapThreads(def, 2);
    const std::vector<NamedPipeline> stages = {{"up to normalize", OpsBefore(two, "batch"), {}},
                                               {"up to batch", OpsBefore(two, "prefetch"), {}},
                                               {"whole (batch + prefetch)", two, {}}};
    ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<Pipeline>> staged,
                     CreatePipelines(stages, registries));
    ASSIGN_OR_RETURN(std::vector<EpochRates> stage_rates,
                     InterleaveEpochs(staged, repetitions, env));
    for (size_t i = 0; i < stages.size(); ++i) {
      report.AddSeries(absl::StrCat(size, "x", size, ", 2 threads, ", stages[i].name), "images/s",
                       stage_rates[i].rates);
    }
    report.AddHeadline(absl::StrCat(size, "x", size, ": batch / up to normalize"),
                       Median(stage_rates[1].rates) / Median(stage_rates[0].rates), "x");
    report.AddHeadline(absl::StrCat(size, "x", size, ": batch + prefetch / up to normalize"),
                       Median(stage_rates[2].rates) / Median(stage_rates[0].rates), "x",
                       BenchTarget::AtLeast(0.9));
  }
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "pipeline_throughput", granary::Run);
}
