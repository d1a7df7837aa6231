#include "bench/resnet_bench_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_report.h"
#include "bench/bench_setup.h"

ABSL_FLAG(int64_t, images, 8192, "Images in the generated dataset (default: the benchmark's).");
ABSL_FLAG(int64_t, size, 64, "Image side (default: the benchmark's).");
ABSL_FLAG(int, repetitions, 3, "Rounds of interleaved measurements.");
ABSL_FLAG(std::string, dir, "/tmp/granary_bench", "Scratch directory (default: the benchmark's).");
ABSL_FLAG(std::string, pipeline, "examples/imagenet_resnet.json", "The ResNet-style pipeline.");

namespace granary {

int ResnetBenchMain(int argc, char** argv, const char* name, const ResnetBenchDefaults& defaults,
                    const std::function<absl::Status()>& run) {
  absl::SetFlag(&FLAGS_images, defaults.images);
  absl::SetFlag(&FLAGS_size, defaults.size);
  absl::SetFlag(&FLAGS_dir, defaults.dir);
  return BenchMain(argc, argv, name, [&] {
    if (QuickBench()) {
      absl::SetFlag(&FLAGS_images, defaults.quick_images);
      absl::SetFlag(&FLAGS_repetitions, 1);
    }
    return run();
  });
}

absl::StatusOr<PipelineDef> ResnetPipelineFromFlags(Env* env) {
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  return ImagenetPipeline(env, absl::GetFlag(FLAGS_dir), images, size,
                          absl::GetFlag(FLAGS_pipeline));
}

void SetOpParam(PipelineDef* def, const std::string& op, const std::string& param, double value) {
  for (OpDef& o : *def->mutable_ops()) {
    if (o.op() == op) (*o.mutable_params()->mutable_fields())[param].set_number_value(value);
  }
}

}  // namespace granary
