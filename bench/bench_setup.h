// What the benchmarks share: the generated ImageNet-style dataset with the pipeline that reads
// it, and reading one epoch through the service.
#ifndef GRANARY_BENCH_BENCH_SETUP_H_
#define GRANARY_BENCH_BENCH_SETUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "granary/client.h"
#include "proto/pipeline.pb.h"

namespace granary {

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

}  // namespace granary

#endif  // GRANARY_BENCH_BENCH_SETUP_H_
