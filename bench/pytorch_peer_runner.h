// Running the PyTorch DataLoader peer (bench/pytorch_peer.py under Debian's python3-torch) for
// one epoch, and reading the one-line JSON results it and the other Python peers print. Shared by
// the benchmarks that compare Granary with it (peer_bench, remote_bench).
#ifndef GRANARY_BENCH_PYTORCH_PEER_RUNNER_H_
#define GRANARY_BENCH_PYTORCH_PEER_RUNNER_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"

ABSL_DECLARE_FLAG(std::string, python);
ABSL_DECLARE_FLAG(std::string, peer_script);

namespace granary {

// One DataLoader epoch: its rate, the cores its processes kept busy, and the peak RSS of its
// main process and of its largest worker.
struct DataLoaderEpoch {
  double images_per_s = 0;
  double cores_busy = 0;
  int64_t rss_main = 0;
  int64_t rss_worker = 0;
};

// Runs --peer_script under --python over the TFRecord files in `data_dir` with `workers`
// DataLoader workers and batches of `batch_size`, shuffled by `seed`. Errors name the script
// and what failed (its exit code, with the Debian packages it needs; no result line; no images).
absl::StatusOr<DataLoaderEpoch> RunDataLoaderEpoch(const std::string& data_dir, int workers,
                                                   int64_t batch_size, int64_t seed);

// The first line of `out` as a JSON object; InternalError naming `what` if it is not one.
absl::StatusOr<google::protobuf::Struct> ResultLine(const std::string& out,
                                                    const std::string& what);

// The number at `key` of a result line; 0 if absent.
double NumberOf(const google::protobuf::Struct& line, const char* key);

}  // namespace granary

#endif  // GRANARY_BENCH_PYTORCH_PEER_RUNNER_H_
