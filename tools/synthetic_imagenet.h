// A synthetic ImageNet-style dataset: TFRecord files of tf.train.Example records laid out as
// the Inception/ResNet preprocessing scripts write ImageNet (image/encoded holds a real JPEG,
// image/class/label an int64, plus image/height, image/width, image/format).
//
// Images are smooth colour fields with shapes and noise, so their JPEGs have realistic sizes
// and decode cost. Output is a pure function of the options: the same seed writes identical
// bytes.
#ifndef GRANARY_TOOLS_SYNTHETIC_IMAGENET_H_
#define GRANARY_TOOLS_SYNTHETIC_IMAGENET_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace granary {

struct SyntheticImagenetOptions {
  std::string out_dir;
  int64_t images = 1000;
  int64_t files = 4;
  // Images are size x size x 3.
  int64_t size = 64;
  uint64_t seed = 0;
  int jpeg_quality = 90;
  int64_t num_classes = 1000;
  // Called after each image is written with the count written so far (null: not called).
  std::function<void(int64_t images_written)> progress;
};

// Writes `files` files named train-XXXXX-of-YYYYY.tfrecord into out_dir (created if missing),
// images spread round-robin. Returns the paths written. Errors name the file.
absl::StatusOr<std::vector<std::string>> WriteSyntheticImagenet(
    Env* env, const SyntheticImagenetOptions& options);

}  // namespace granary

#endif  // GRANARY_TOOLS_SYNTHETIC_IMAGENET_H_
