// Autotuned parallelism (issue 18, pipeline/core/autotuner.h): the ResNet-style pipeline
// (examples/imagenet_resnet.json: two parallel stages — parse + decode, then crop, flip and
// normalize — then batch and prefetch) with every parallel_map given num_threads 0, against a
// sweep of every static assignment of 1-4 threads to the two stages, in process, on 1 core and
// on 2 (the process's CPU affinity), interleaved epochs after a warm-up round. The tuned pipeline
// is one Pipeline across its epochs, as a worker's is (each epoch goes on from where the last
// one's tuning stopped): it first runs epochs until its tuning ends — reported, in epochs and
// seconds — and is then measured like the static ones. Target: the tuned pipeline within 10% of
// the best static assignment on each core count.
//
//   bench/autotune_bench [--size 256] [--images N] [--repetitions R] [--dir D]
#include <sched.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_report.h"
#include "bench/bench_setup.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "pipeline/local_runner.h"

ABSL_FLAG(int64_t, size, 256, "Side of the source images.");
ABSL_FLAG(int64_t, images, 4096, "Images per dataset.");
ABSL_FLAG(int, repetitions, 3, "Epochs measured per configuration.");
ABSL_FLAG(std::string, dir, "/tmp/granary_bench", "Where datasets are generated.");

namespace granary {
namespace {

// `def` with the parallel_maps of its first run of map ops at `first` threads and those of
// later runs at `second`.
PipelineDef WithStageThreads(PipelineDef def, int first, int second) {
  int run = -1;
  bool in_run = false;
  for (OpDef& op : *def.mutable_ops()) {
    const bool is_map = op.op() == "map" || op.op() == "parallel_map";
    if (is_map && !in_run) ++run;
    in_run = is_map;
    if (op.op() == "parallel_map") {
      (*op.mutable_params()->mutable_fields())["num_threads"].set_number_value(run == 0 ? first
                                                                                        : second);
    }
  }
  return def;
}

absl::Status RestrictToCores(int cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = 0; c < cores; ++c) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InternalError(absl::StrCat("sched_setaffinity to ", cores, " cores failed"));
  }
  return absl::OkStatus();
}

absl::Status Run() {
  Env* env = Env::Default();
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  const bool quick = QuickBench();
  const int repetitions = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int64_t images = quick ? 32 : absl::GetFlag(FLAGS_images);
  const int64_t size = quick ? 64 : absl::GetFlag(FLAGS_size);
  BenchReport report("autotune",
                     absl::StrCat("Tuned parallel_map threads vs every static assignment, ResNet "
                                  "pipeline, ",
                                  size, "x", size, " JPEGs, in process"),
                     repetitions);
  ASSIGN_OR_RETURN(const PipelineDef def, ImagenetPipeline(env, absl::GetFlag(FLAGS_dir), images,
                                                           size, "examples/imagenet_resnet.json"));
  const int max_threads = quick ? 2 : 4;
  for (int cores : {1, 2}) {
    RETURN_IF_ERROR(RestrictToCores(cores));
    std::vector<NamedPipeline> configs;
    configs.push_back({"tuned (num_threads 0)", WithParallelMapThreads(def, 0), {}});
    for (int a = 1; a <= max_threads; ++a) {
      for (int b = 1; b <= max_threads; ++b) {
        configs.push_back(
            {absl::StrCat("static ", a, " + ", b, " threads"), WithStageThreads(def, a, b), {}});
      }
    }
    ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<Pipeline>> pipelines,
                     CreatePipelines(configs, registries));
    // The tuned pipeline first tunes (a worker's runs for many epochs): epochs until its tuning
    // ends, counted and timed.
    int tuning_epochs = 0;
    double tuning_seconds = 0;
    while (tuning_epochs < 30 && !absl::EndsWith(pipelines[0]->AutotunedThreads(), "(done)")) {
      EpochRunOptions options;
      options.digest = false;
      ASSIGN_OR_RETURN(const EpochResult result,
                       RunEpochInProcess(*pipelines[0], 1, tuning_epochs, env, options));
      tuning_seconds += result.seconds;
      ++tuning_epochs;
    }
    ASSIGN_OR_RETURN(const std::vector<EpochRates> rates,
                     InterleaveEpochs(pipelines, repetitions, env));
    size_t best = 1;
    for (size_t i = 1; i < configs.size(); ++i) {
      if (Median(rates[i].rates) > Median(rates[best].rates)) best = i;
    }
    const std::string on = absl::StrCat(cores, " core", cores == 1 ? "" : "s");
    report.AddSeries(absl::StrCat(on, ": ", configs[0].name), "images/s", rates[0].rates);
    for (size_t i = 1; i < configs.size(); ++i) {
      report.AddSeries(absl::StrCat(on, ": ", configs[i].name), "images/s", rates[i].rates);
    }
    report.AddHeadline(absl::StrCat(on, ": tuned / best static assignment"),
                       Median(rates[0].rates) / Median(rates[best].rates), "x",
                       BenchTarget::AtLeast(0.9));
    report.AddNote(absl::StrCat(
        on, ": the best of ", configs.size() - 1, " static assignments was ", configs[best].name,
        "; the tuned pipeline ended at ", pipelines[0]->AutotunedThreads(),
        " threads after tuning for ", tuning_epochs, " epochs (", tuning_seconds, " s)"));
  }
  RETURN_IF_ERROR(RestrictToCores(2));
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "autotune_bench", granary::Run);
}
