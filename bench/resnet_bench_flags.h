// What the ResNet-style service benchmarks (cache, checkpoint, peer, recovery, scaling, service,
// sharding) share: their flags — --images, --size, --repetitions, --dir, --pipeline — the dataset
// and pipeline those name (and variants of it), and their main().
#ifndef GRANARY_BENCH_RESNET_BENCH_FLAGS_H_
#define GRANARY_BENCH_RESNET_BENCH_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "proto/pipeline.pb.h"

ABSL_DECLARE_FLAG(int64_t, images);
ABSL_DECLARE_FLAG(int64_t, size);
ABSL_DECLARE_FLAG(int, repetitions);
ABSL_DECLARE_FLAG(std::string, dir);
ABSL_DECLARE_FLAG(std::string, pipeline);

namespace granary {

// A benchmark's own defaults for the shared flags.
struct ResnetBenchDefaults {
  int64_t images = 0;
  int64_t size = 64;
  std::string dir;
  // --images under --quick (which also makes --repetitions 1).
  int64_t quick_images = 256;
};

// A benchmark's main(): applies `defaults`, then BenchMain (bench_report.h).
int ResnetBenchMain(int argc, char** argv, const char* name, const ResnetBenchDefaults& defaults,
                    const std::function<absl::Status()>& run);

// The --pipeline over --images JPEGs of --size x --size, generated once under
// --dir/imagenet_<size>_<images> (ImagenetPipeline in bench_setup.h).
absl::StatusOr<PipelineDef> ResnetPipelineFromFlags(Env* env);

// Sets the number parameter `param` of every `op` op of `def` to `value`: a benchmark's variant of
// the example (a larger shuffle buffer, another batch size).
void SetOpParam(PipelineDef* def, const std::string& op, const std::string& param, double value);

}  // namespace granary

#endif  // GRANARY_BENCH_RESNET_BENCH_FLAGS_H_
