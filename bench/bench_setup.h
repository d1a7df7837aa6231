// What the benchmarks share: the generated ImageNet-style dataset with the pipeline that reads
// it, reading one epoch through the service, and in-process epochs of pipelines compared.
#ifndef GRANARY_BENCH_BENCH_SETUP_H_
#define GRANARY_BENCH_BENCH_SETUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "granary/client.h"
#include "pipeline/pipeline.h"
#include "proto/pipeline.pb.h"

namespace granary {

// Where the benchmarks keep the dataset of `images` size x size JPEGs under `root` (their --dir):
// "<root>/imagenet_<size>_<images>", shared by every benchmark asking for the same one.
std::string ImagenetDatasetDir(const std::string& root, int64_t size, int64_t images);

// Generates (once: an existing dataset in `out_dir` is reused) `images` size x size JPEGs in 8
// TFRecord files under `out_dir`, points GRANARY_DATA at it, and loads `pipeline_path`.
absl::StatusOr<PipelineDef> ImagenetPipeline(Env* env, const std::string& out_dir, int64_t images,
                                             int64_t size, const std::string& pipeline_path);

struct ServiceEpoch {
  // Rows (a batch counts its rows), payload bytes and wall time.
  int64_t rows = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

// Reads epoch `epoch` of `job` (consumer 0) to its end.
absl::StatusOr<ServiceEpoch> ReadServiceEpoch(Job& job, int64_t epoch);

// `def` without its ops from the first one named `name` on: its op ("batch") or its UDF
// ("random_resized_crop").
PipelineDef OpsBefore(PipelineDef def, const std::string& name);

// One pipeline of an in-process comparison: its label, definition and options.
struct NamedPipeline {
  std::string name;
  PipelineDef def;
  PipelineOptions options;
};

// Pipeline::Create of each, in order.
absl::StatusOr<std::vector<std::unique_ptr<Pipeline>>> CreatePipelines(
    const std::vector<NamedPipeline>& configs, const UdfRegistry& udfs);

// What InterleaveEpochs measured of one pipeline: its rows (a batch counts its rows) per
// second in each epoch, and the process's CPU and wall time over them.
struct EpochRates {
  std::vector<double> rates;
  double cpu_seconds = 0;
  double wall_seconds = 0;
};

// After a warm-up round, `repetitions` rounds of one in-process epoch of each pipeline in turn
// (A B A B ...: drifts of the machine hit every pipeline alike).
absl::StatusOr<std::vector<EpochRates>> InterleaveEpochs(
    const std::vector<std::unique_ptr<Pipeline>>& pipelines, int repetitions, Env* env);

}  // namespace granary

#endif  // GRANARY_BENCH_BENCH_SETUP_H_
